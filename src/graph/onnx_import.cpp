#include <onyx/graph/onnx_import.h>

#include <cmath>
#include <cstdint>

#include <onyx/core/allocation_limit.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/graph/op_def.h>

namespace onyx {

// The helpers of the import context; the importer in converters/ implements
// the rest.

Expr OnnxImportCtx::input(size_t i) {
  check(i < numInputs() && hasInput(i), "input ", i, " is required");
  OnnxValue v = inputValue(i);
  check(v.kind == OnnxValue::Kind::Tensor, "input ", i, " must be a tensor");
  return v.tensor;
}

std::vector<Expr> OnnxImportCtx::inputSequence(size_t i) {
  check(i < numInputs() && hasInput(i), "input ", i, " is required");
  OnnxValue v = inputValue(i);
  check(v.kind == OnnxValue::Kind::Sequence, "input ", i, " must be a sequence");
  return v.sequence;
}

std::vector<int64_t> OnnxImportCtx::ints(size_t i) {
  Tensor t = value(i);
  check(isInt(t->type()), "input ", i, " must be an integer tensor, got ", t->type());
  // int64s from int8s take 8 times the tensor's bytes: held to the run's limit.
  checkHostAllocation(static_cast<size_t>(t->size()) * sizeof(int64_t), "the integer values of an input");
  if(t->type() == Type::uint64) {  // exactly: no value past INT64_MAX wraps (through double it was UB)
    Tensor h = t->onHost() ? t : t->hostCopy();
    const uint64_t* u = h->data<uint64_t>();
    std::vector<int64_t> v(static_cast<size_t>(h->size()));
    for(size_t k = 0; k < v.size(); ++k) {
      check(u[k] <= static_cast<uint64_t>(INT64_MAX), "input ", i, " holds ", u[k], " at ", k,
            ", more than an int64 can hold");
      v[k] = static_cast<int64_t>(u[k]);
    }
    return v;
  }
  return t->toVector<int64_t>();
}

double OnnxImportCtx::scalar(size_t i) {
  Tensor t = value(i);
  check(t->size() == 1, "input ", i, " must hold one value, got shape ", t->shape());
  return t->getAsDouble(0);
}

int64_t OnnxImportCtx::intScalar(size_t i) {
  Tensor t = value(i);
  check(t->size() == 1, "input ", i, " must hold one value, got shape ", t->shape());
  if(isInt(t->type())) return ints(i)[0];
  double v = t->getAsDouble(0);
  check(std::isfinite(v) && v >= -9.2e18 && v <= 9.2e18, "input ", i, " holds ", v, ", not a usable integer");
  return static_cast<int64_t>(v);
}

int64_t OnnxImportCtx::attrInt(const char* name) {
  check(hasAttr(name), "attribute '", name, "' is required");
  return attrInt(name, 0);
}
double OnnxImportCtx::attrFloat(const char* name) {
  check(hasAttr(name), "attribute '", name, "' is required");
  return attrFloat(name, 0.0);
}
std::string OnnxImportCtx::attrString(const char* name) {
  check(hasAttr(name), "attribute '", name, "' is required");
  return attrString(name, std::string());
}

Expr OnnxImportCtx::make(const char* op, const std::vector<Expr>& inputs,
                         const std::vector<std::pair<std::string, AttrValue>>& attrs) {
  return graph().make(Registry::instance().get(op), inputs, attrs);
}

Expr OnnxImportCtx::constant(const Tensor& t) { return graph().constant(t); }

std::string OnnxImportCtx::where() const {
  std::string d = domain().empty() ? "" : domain() + ".";
  return str("node '", nodeName(), "' (", d, opType(), ", opset ", opset(), ")");
}

void OnnxImportCtx::failMsg(const std::string& msg) const { throw Error(where() + ": " + msg); }

int OnnxImportCtx::axis(int64_t axis, int rank, const char* what) const {
  try {
    return normalizeAxis(axis, rank, what);
  } catch(const Error& e) {
    failMsg(e.what());
  }
}

}  // namespace onyx
