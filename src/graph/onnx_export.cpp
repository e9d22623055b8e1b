#include <onyx/graph/onnx_export.h>

#include <onyx/graph/op_def.h>

namespace onyx {

// The helpers of the export context; the exporter in converters/ implements
// the rest.

std::string OnnxExportCtx::intsConst(const std::vector<int64_t>& v, const std::string& hint) {
  return constant(TensorBase::fromVector(Shape({static_cast<int64_t>(v.size())}), v), hint);
}

std::string OnnxExportCtx::scalarConst(double v, Type type, const std::string& hint) {
  Tensor t = TensorBase::create(Shape(std::vector<int64_t>{}), type);
  storeFromDouble(t->raw(), type, 0, v);
  return constant(t, hint);
}

void OnnxExportCtx::failMsg(const std::string& msg) const { throw Error(where() + ": " + msg); }

OnnxAttrs OnnxExportCtx::nodeAttrs() const {
  OnnxAttrs attrs;
  const OpDef& op = *node().op();
  const auto& values = node().attrValues();
  for(size_t k = 0; k < op.attrSpecs.size(); ++k) {
    const AttrValue& v = values[k];
    if(auto* l = std::get_if<IntList>(&v); l && l->empty()) continue;
    if(auto* l = std::get_if<FloatList>(&v); l && l->empty()) continue;
    attrs.emplace_back(op.attrSpecs[k].name, v);
  }
  return attrs;
}

std::string OnnxExportCtx::emitCast(const std::string& v, Type to, const std::string& hint) {
  std::string y = fresh(hint);
  emit("Cast", {v}, {y}, {{"to", int64_t(to)}});
  return y;
}

std::vector<std::string> OnnxExportCtx::inputs() {
  std::vector<std::string> v;
  for(size_t i = 0; i < numInputs(); ++i) v.push_back(input(i));
  return v;
}

}  // namespace onyx
