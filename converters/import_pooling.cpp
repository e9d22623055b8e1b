// ONNX pools with no registry op of their own: LpPool, the global pools and
// MaxUnpool, as the pooling functions of src/ops/pooling.cpp.
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/core/checked.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/convolution.h>
#include <onyx/ops/pooling.h>
#include <onyx/ops/slicing.h>

namespace onyx {

namespace {

double importP(OnnxImportCtx& c) {
  // LpPool-1 / GlobalLpPool-1 have a float p, later opsets an int.
  double p = c.opset() < 2 ? c.attrFloat("p", 2.0) : double(c.attrInt("p", 2));
  c.check(p > 0, "p must be > 0, got ", p);
  return p;
}

}  // namespace

ONYX_ONNX_IMPORT(kLpPoolImport, "LpPool", 1).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  PoolOptions o;
  std::vector<int64_t> k = importPool(c, x, o);
  c.setOutput(0, lp_pool(x, importP(c), k, o));
});

ONYX_ONNX_IMPORT(kGlobalAvgPoolImport, "GlobalAveragePool", 1).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  c.check(x->shape().rank() >= 3, "input of shape ", x->shape(), " is not [N, C, spatial..]");
  c.setOutput(0, global_average_pool(x));
});

ONYX_ONNX_IMPORT(kGlobalMaxPoolImport, "GlobalMaxPool", 1).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  c.check(x->shape().rank() >= 3, "input of shape ", x->shape(), " is not [N, C, spatial..]");
  c.setOutput(0, global_max_pool(x));
});

ONYX_ONNX_IMPORT(kGlobalLpPoolImport, "GlobalLpPool", 1).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  c.check(x->shape().rank() >= 3, "input of shape ", x->shape(), " is not [N, C, spatial..]");
  c.setOutput(0, global_lp_pool(x, importP(c)));
});

ONYX_ONNX_IMPORT(kMaxUnpoolImport, "MaxUnpool", 9).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0), idx = c.input(1);
  checkSpatialInput(c, x);
  const int nd = x->shape().rank() - 2;
  std::vector<int64_t> k = c.attrInts("kernel_shape", {});
  c.check(k.size() == size_t(nd), "kernel_shape must have ", nd, " entries, got ", k.size());
  std::vector<int64_t> strides = importList(c, "strides", nd, 1);
  std::vector<int64_t> pads = c.attrInts("pads", {});
  if(pads.empty()) pads.assign(size_t(2 * nd), 0);
  c.check(pads.size() == size_t(2 * nd), "pads must have ", 2 * nd, " entries, got ", pads.size());
  // Indices address the shape the pool's input had (inferred from the
  // attributes); a given output_shape pads (or cuts) that at the end of each dim.
  std::vector<int64_t> inferred{x->shape()[0], x->shape()[1]};
  for(int i = 0; i < nd; ++i) {
    size_t u = size_t(i);
    const char* what = "MaxUnpool output size";
    inferred.push_back(subChecked(addChecked(mulChecked(x->shape()[2 + i] - 1, strides[u], what), k[u], what),
                                  addChecked(pads[u], pads[u + size_t(nd)], what), what));
  }
  Expr y = max_unpool(x, idx, Shape(inferred));
  if(c.numInputs() > 2 && c.hasInput(2)) {
    std::vector<int64_t> out = c.ints(2);
    c.check(out.size() == size_t(nd + 2), "output_shape must have ", nd + 2, " entries, got ", out.size());
    if(out != inferred) {
      std::vector<int64_t> grow(size_t(2 * (nd + 2)), 0);
      for(size_t i = 0; i < out.size(); ++i) grow[i + out.size()] = subChecked(out[i], inferred[i], "MaxUnpool output_shape");
      y = pad(y, grow);
    }
  }
  c.setOutput(0, y);
});

}  // namespace onyx
