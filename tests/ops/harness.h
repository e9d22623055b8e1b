// The per-op harness: every registry op has at least one OpCase (registered
// with ONYX_OP_CASE in tests/ops/cases_<family>.cpp). For each case the
// harness checks
//   - forward in float32 and float64 against the case's reference, which is
//     written independently in plain C++ over doubles;
//   - gradients of every float input in float64 against central differences
//     of loss = sum(y * w) for a fixed random w;
// and the registry test fails for any op without a case.
#pragma once
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include <cmath>

#include <onyx/onyx.h>

namespace onyx {
namespace test {

// A plain tensor for references: row-major doubles.
struct Ref {
  std::vector<int64_t> shape;
  std::vector<double> v;
  int64_t size() const { return static_cast<int64_t>(v.size()); }
  double& operator[](int64_t i) { return v[static_cast<size_t>(i)]; }
  double operator[](int64_t i) const { return v[static_cast<size_t>(i)]; }
};

struct InputSpec {
  std::vector<int64_t> shape;
  double lo = -1, hi = 1;      // uniform random values in [lo, hi]
  bool integer = false;        // int64 values in [lo, hi] (labels, indices); never differentiated
  bool boolean = false;        // random bools; never differentiated
  std::vector<double> values;  // explicit values (overrides random)
  bool differentiable = true;  // float inputs: include in the gradient check
};

inline InputSpec in(std::vector<int64_t> shape, double lo = -1, double hi = 1) {
  InputSpec s;
  s.shape = std::move(shape);
  s.lo = lo;
  s.hi = hi;
  return s;
}
inline InputSpec ints(std::vector<int64_t> shape, int64_t lo, int64_t hi) {
  InputSpec s = in(std::move(shape), double(lo), double(hi));
  s.integer = true;
  s.differentiable = false;
  return s;
}
inline InputSpec bools(std::vector<int64_t> shape) {
  InputSpec s = in(std::move(shape));
  s.boolean = true;
  s.differentiable = false;
  return s;
}
inline InputSpec values(std::vector<int64_t> shape, std::vector<double> v) {
  InputSpec s = in(std::move(shape));
  s.values = std::move(v);
  return s;
}
inline InputSpec constantInput(InputSpec s) {
  s.differentiable = false;
  return s;
}
// Explicit integer values (indices, labels): never differentiated.
inline InputSpec intValues(std::vector<int64_t> shape, std::vector<double> v) {
  InputSpec s = values(std::move(shape), std::move(v));
  s.integer = true;
  s.differentiable = false;
  return s;
}

// Round half to even, written out (ONNX's rounding for quantization).
inline double roundHalfEven(double v) {
  double f = std::floor(v), r = v - f;
  if(r < 0.5) return f;
  if(r > 0.5) return f + 1;
  return std::fmod(f, 2.0) == 0 ? f : f + 1;
}

// Row-major multi-index <-> flat offset, for references written as loops.
using Idx = std::vector<int64_t>;
inline Idx unravel(int64_t k, const Idx& shape) {
  Idx idx(shape.size());
  for(size_t i = shape.size(); i-- > 0;) {
    idx[i] = k % shape[i];
    k /= shape[i];
  }
  return idx;
}
inline int64_t ravel(const Idx& idx, const Idx& shape) {
  int64_t k = 0;
  for(size_t i = 0; i < shape.size(); ++i) k = k * shape[i] + idx[i];
  return k;
}

struct OpCase {
  std::string op;    // registry name this case covers
  std::string name;  // short description, unique per op
  std::vector<InputSpec> inputs;
  std::function<Expr(const std::vector<Expr>&)> build;
  std::function<Ref(const std::vector<Ref>&)> reference;
  bool gradcheck = true;     // false only for ops whose output is not float or not differentiable
  double rtol = 1e-4, atol = 1e-5;  // float32 forward tolerance
  double gradTol = 1e-6;            // float64 gradient tolerance (abs + rel)
  bool stochastic = false;          // forward compared by `check` instead of `reference`
  std::function<void(const Ref& out, const std::vector<Ref>& ins)> check;
};

std::vector<OpCase>& cases();

struct CaseRegistrar {
  explicit CaseRegistrar(OpCase c) { cases().push_back(std::move(c)); }
};

#define ONYX_CASE_CAT2(a, b) a##b
#define ONYX_CASE_CAT(a, b) ONYX_CASE_CAT2(a, b)
// ONYX_OP_CASE({ .op = ..., ... }) in a tests/ops/cases_*.cpp file.
#define ONYX_OP_CASE(...) \
  static ::onyx::test::CaseRegistrar ONYX_CASE_CAT(onyxCase_, __COUNTER__)(::onyx::test::OpCase __VA_ARGS__)

// A graph on the CPU, for tests beside the cases.
inline Ptr<ExpressionGraph> cpuGraph() {
  auto g = New<ExpressionGraph>();
  g->setDevice({0, DeviceType::cpu});
  return g;
}

// The message of the onyx::Error thrown by f, or "" if none.
template <class F>
std::string errorOf(F f) {
  try {
    f();
  } catch(const Error& e) {
    return e.what();
  }
  return "";
}

// x's elements under another shape.
inline Ref withShape(Ref x, std::vector<int64_t> s) {
  x.shape = std::move(s);
  return x;
}

// Reference helpers.
Ref refLike(const Ref& a);  // same shape, zeros
Ref refOfShape(std::vector<int64_t> shape);
// Element-wise map with numpy broadcasting of all inputs.
Ref refBroadcast(const std::vector<Ref>& ins, const std::function<double(const std::vector<double>&)>& f);
// y = f(x) element by element, for the one input of a unary op's case.
Ref refMap(const std::vector<Ref>& ins, double (*f)(double));
std::vector<int64_t> refStrides(const std::vector<int64_t>& shape);
// y[o] = x[src(o)]: every output element read from one input position.
inline Ref mapRef(const Ref& x, const Idx& outShape, const std::function<Idx(const Idx&)>& src) {
  Ref y = refOfShape(outShape);
  for(int64_t k = 0; k < y.size(); ++k) y[k] = x[ravel(src(unravel(k, outShape)), x.shape)];
  return y;
}

// For the tests beside the cases (behaviour the harness does not check).
// The gradients of sum(f(a, b)) for a and b as float64 params on the CPU.
std::pair<std::vector<double>, std::vector<double>> gradsOfSum(Expr (*f)(Expr, Expr), std::vector<double> a,
                                                               std::vector<double> b);
// Fails the test unless f() throws an onyx::Error whose message contains
// `needle`.
void expectErrorMentioning(const std::function<void()>& f, const std::string& needle);

}  // namespace test
}  // namespace onyx
