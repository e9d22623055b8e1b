#include <onyx/graph/passes/passes.h>

#include <algorithm>

namespace onyx {

OptLevel parseOptLevel(const std::string& s) {
  if(s == "none") return OptLevel::none;
  if(s == "basic") return OptLevel::basic;
  if(s == "all") return OptLevel::all;
  throw Error(str("optimization level '", s, "': expected none, basic or all"));
}

const char* optLevelName(OptLevel level) {
  switch(level) {
    case OptLevel::none: return "none";
    case OptLevel::basic: return "basic";
    default: return "all";
  }
}

namespace {

// An onyx::Error naming the first of `names` that is no pass, with the list.
void checkPassNames(const std::vector<std::string>& names) {
  for(const std::string& d : names)
    if(std::find(passNames().begin(), passNames().end(), d) == passNames().end()) {
      std::string all;
      for(const std::string& n : passNames()) all += (all.empty() ? "" : ", ") + n;
      throw Error(str("no graph pass '", d, "' (passes: ", all, ")"));
    }
}

}  // namespace

const std::vector<std::string>& passNames() {
  static const std::vector<std::string> names = {"fuse_qdq", "fold_constants", "eliminate_noops", "fold_batch_norm",
                                                 "fuse_gelu",      "fuse_transpose_matmul", "fuse_matmul_add", "fuse_conv",
                                                 "fuse_squeeze_excite", "fuse_channel_affine", "blocked_layout", "fuse_qlinear_add", "fuse_matmul_integer_float",
                                                 "int8_layout",    "prune"};
  return names;
}

PassCounts optimizeGraph(ExpressionGraph& g, const std::vector<Expr>& keep, OptLevel level, bool cpuKernels,
                         const std::vector<std::string>& disabled) {
  checkPassNames(disabled);
  auto off = [&](const char* name) { return std::find(disabled.begin(), disabled.end(), name) != disabled.end(); };
  PassCounts fired;
  if(level == OptLevel::none) return fired;
  size_t pruned = 0;
  const bool pruning = !off("prune");
  auto run = [&](const char* name, size_t (*pass)(ExpressionGraph&, const std::vector<Expr>&)) {
    if(off(name)) return;
    size_t n = pass(g, keep);
    if(!n) return;
    fired.emplace_back(name, n);
    // What a rewrite left unread goes now: a dead reader would stop a later
    // fusion that needs a value's only reader.
    if(pruning) pruned += g.prune(keep);
  };
  // Before folding, which would turn a constant's DequantizeLinear into
  // float weights and hide the int8 values.
  // Its op is ONNX's QLinearConv, so exports (cpuKernels false) take it too.
  if(level == OptLevel::all && g.isInference() && g.getDeviceId().type == DeviceType::cpu) run("fuse_qdq", fuseQdq);
  run("fold_constants", foldConstants);
  run("eliminate_noops", eliminateNoOps);
  if(level == OptLevel::all && g.isInference()) {
    run("fold_batch_norm", foldBatchNorm);
    run("fuse_gelu", fuseGelu);
    run("fuse_transpose_matmul", fuseTransposeMatmul);
    run("fuse_matmul_add", fuseMatmulAdd);
    // fused_conv's kernel is the CPU's (the GPU would run it on host copies).
    if(cpuKernels && g.getDeviceId().type == DeviceType::cpu) {
      run("fuse_conv", fuseConvEpilogues);
      run("fuse_squeeze_excite", fuseSqueezeExcite);
      run("fuse_channel_affine", fuseChannelAffine);
      run("blocked_layout", blockConvChains);
      run("fuse_qlinear_add", fuseQLinearAdd);
      run("fuse_matmul_integer_float", fuseMatmulIntegerFloat);
      run("int8_layout", int8Layout);
    }
  }
  if(pruning) pruned += g.prune(keep);
  if(pruned) fired.emplace_back("prune", pruned);
  return fired;
}

PassCounts optimizeTrainingGraph(ExpressionGraph& g, const std::vector<Expr>& keep,
                                 const std::vector<std::string>& disabled) {
  if(g.isInference())
    throw Error("optimizeTrainingGraph: the graph is in inference mode (optimizeGraph is the inference graph's)");
  checkPassNames(disabled);
  auto off = [&](const char* name) { return std::find(disabled.begin(), disabled.end(), name) != disabled.end(); };
  PassCounts fired;
  auto run = [&](const char* name, size_t (*pass)(ExpressionGraph&, const std::vector<Expr>&)) {
    if(off(name)) return;
    if(size_t n = pass(g, keep)) fired.emplace_back(name, n);
  };
  run("fuse_gelu", fuseGelu);
  run("fuse_transpose_matmul", fuseTransposeMatmul);
  run("fuse_matmul_add", fuseMatmulAdd);
  if(!fired.empty() && !off("prune"))
    if(size_t n = g.prune(keep)) fired.emplace_back("prune", n);
  return fired;
}

}  // namespace onyx
