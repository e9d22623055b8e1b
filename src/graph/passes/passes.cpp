#include <onyx/graph/passes/passes.h>

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

PassCounts optimizeGraph(ExpressionGraph& g, const std::vector<Expr>& keep, OptLevel level, bool cpuKernels) {
  PassCounts fired;
  if(level == OptLevel::none) return fired;
  size_t pruned = 0;
  auto run = [&](const char* name, size_t (*pass)(ExpressionGraph&, const std::vector<Expr>&)) {
    size_t n = pass(g, keep);
    if(!n) return;
    fired.emplace_back(name, n);
    // What a rewrite left unread goes now: a dead reader would stop a later
    // fusion that needs a value's only reader.
    pruned += g.prune(keep);
  };
  run("fold_constants", foldConstants);
  run("eliminate_noops", eliminateNoOps);
  if(level == OptLevel::all && g.isInference()) {
    run("fold_batch_norm", foldBatchNorm);
    run("fuse_gelu", fuseGelu);
    run("fuse_matmul_add", fuseMatmulAdd);
    // fused_conv's kernel is the CPU's (the GPU would run it on host copies).
    if(cpuKernels && g.getDeviceId().type == DeviceType::cpu) {
      run("fuse_conv", fuseConvEpilogues);
      run("blocked_layout", blockConvChains);
    }
  }
  pruned += g.prune(keep);
  if(pruned) fired.emplace_back("prune", pruned);
  return fired;
}

}  // namespace onyx
