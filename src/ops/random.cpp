// Random generators: uniform, normal and multinomial sampling ops (ONNX's
// RandomUniform(Like), RandomNormal(Like), Bernoulli and Multinomial import
// as them in converters/import_random.cpp). See random.h for the seeding
// rules.
#include <onyx/ops/random.h>

#include <cmath>
#include <cstring>
#include <vector>

#include <onyx/graph/onnx_export.h>
#include <onyx/graph/onnx_import.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/kernel_helpers.h>

namespace onyx {

namespace {

// The node's generator: its own, seeded from the `seed` attribute's bits,
// when `seeded` is set, else the graph's.
struct NodeRng {
  Rng own;
  Rng* r;
  explicit NodeRng(KernelCtx& c) : r(&c.rng) {
    if(c.attrs.i("seeded")) {
      double s = c.attrs.f("seed");
      uint64_t bits;
      std::memcpy(&bits, &s, sizeof bits);
      own.seed(bits ^ 0x9e3779b97f4a7c15ull);
      r = &own;
    }
  }
  double uniform() { return static_cast<double>((*r)() >> 11) * 0x1.0p-53; }  // [0, 1)
  // Box-Muller; the first draw is kept away from 0 so log() is finite.
  double normal() {
    double u1 = 1.0 - uniform(), u2 = uniform();
    return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.28318530717958647692 * u2);
  }
};

void inferGenerator(InferCtx& c) {
  Type to = static_cast<Type>(c.attrs.i("to"));
  c.check(isFloat(to), "element type ", to, " is not a floating-point type");
  const IntList& s = c.attrs.ints("shape");
  for(auto d : s) c.check(d >= 0, "shape ", attrToString(s), " has a negative dimension");
  c.shape = Shape(Shape::Dims(s.begin(), s.end()));
  c.type = to;
}

// Fills the output with f(rng) converted to its float type.
template <class F>
void fillRandom(KernelCtx& c, F f) {
  NodeRng rng(c);
  dispatchFloat(c.out.type(), c.node.type().c_str(), [&](auto tag) {
    using T = typename decltype(tag)::type;
    using C = typename ComputeOf<T>::type;
    T* y = c.out.data<T>();
    for(int64_t i = 0; i < c.out.size(); ++i) host::store(y, i, static_cast<C>(f(rng)));
  });
}

Expr makeGenerator(const OpDef& op, ExpressionGraph* graph, const Shape& shape, const char* a, double av,
                   const char* b, double bv, Type type, std::optional<double> seed) {
  if(type == Type::undefined) type = graph->getDefaultElementType();
  Expr e = graph->make(op, std::vector<Expr>(),
                       {{"shape", attr(shape.vec())}, {a, av}, {b, bv}, {"to", int64_t(type)},
                        {"seeded", int64_t(seed ? 1 : 0)}, {"seed", seed ? *seed : 0.0}});
  // A checkpointing graph recomputes freed values; redrawn values would no
  // longer match what the forward pass used.
  e->markCheckpoint();
  return e;
}

// ---- export

// ONNX has no bfloat16 before opset 13 (not even in Cast).
void checkBf16Opset(OnnxExportCtx& c, Type t) {
  if(t == Type::bfloat16) c.requireOpset(13, "bfloat16 (ONNX has none before opset 13)");
}

bool isFloat32Value(double v) { return std::isnan(v) || static_cast<double>(static_cast<float>(v)) == v; }

// The `seed` attribute of a seeded node (none when unseeded). ONNX's seed is
// a float32: a seed that is not one would re-import as another stream.
void addSeed(OnnxExportCtx& c, OnnxAttrs& attrs) {
  const Attrs a = c.attrs();
  if(!a.i("seeded")) return;
  const double seed = a.f("seed"), back = static_cast<double>(static_cast<float>(seed));
  c.check(std::memcmp(&seed, &back, sizeof seed) == 0, "seed ", seed, " is not a float32 value; ONNX's seed ",
          "attribute is a float32, so the exported model would draw other numbers (seed with a float32 value)");
  attrs.emplace_back("seed", seed);
}

// RandomUniform (low + (high - low) * u) and RandomNormal (mean + scale *
// n), computed in double and rounded to the output type. When both
// parameters are float32 values (ONNX's attributes are float32) the node
// exports as is. Otherwise the draw is exported as a float64 generator with
// unit parameters (0 + 1 * u is u exactly), then Mul and Add by float64
// constants and a Cast: the kernel's double arithmetic and rounding.
// bfloat16 at opsets 13-21 (where Cast has it but the generators do not)
// is drawn as float32 and cast: the kernel rounds through float32 too. The
// values of such a bridged node are named under "<node>/f32/", as the
// float32 node, re-imported, names them, so that a second round trip gives
// the same file.
void exportGenerator(OnnxExportCtx& c, const char* opType, bool normal) {
  const Attrs at = c.attrs();
  const char* aName = normal ? "mean" : "low";
  const char* bName = normal ? "scale" : "high";
  const Type to = static_cast<Type>(at.i("to"));
  const double a = at.f(aName), b = at.f(bName);
  checkBf16Opset(c, to);
  const bool bf16 = to == Type::bfloat16 && c.opset() < 22;
  const std::string p = bf16 ? "f32/" : "";
  const Type t = bf16 ? Type::float32 : to;
  const std::string y = bf16 ? c.fresh("f32") : c.output();
  OnnxAttrs attrs{{"shape", at.ints("shape")}};
  if(isFloat32Value(a) && isFloat32Value(b)) {
    attrs.emplace_back(aName, a);
    attrs.emplace_back(bName, b);
    attrs.emplace_back("dtype", int64_t(t));
    addSeed(c, attrs);
    c.emit(opType, {}, {y}, attrs);
  } else {
    c.requireOpset(7, str(aName, " = ", a, " and ", bName, " = ", b, ", not both float32 values (ONNX's attributes ",
                          "are float32), exported exactly as a float64 draw, Mul and Add,"));
    attrs.emplace_back(aName, 0.0);
    attrs.emplace_back(bName, 1.0);
    attrs.emplace_back("dtype", int64_t(Type::float64));
    addSeed(c, attrs);
    const double mul = normal ? b : b - a;
    std::string u = c.fresh(p + "unit"), mu = c.fresh(p + "scaled");
    std::string v = t == Type::float64 ? y : c.fresh(p + "f64");
    c.emit(opType, {}, {u}, attrs);
    c.emit("Mul", {u, c.scalarConst(mul, Type::float64, p + "scale")}, {mu});
    c.emit("Add", {mu, c.scalarConst(a, Type::float64, p + "offset")}, {v});
    if(v != y) c.emit("Cast", {v}, {y}, {{"to", int64_t(t)}});
  }
  if(bf16) c.emit("Cast", {y}, {c.output()}, {{"to", int64_t(Type::bfloat16)}});
}

}  // namespace

// y ~ U[low, high)
ONYX_OP(kRandomUniform, "random_uniform")
    .doc("uniform random values in [low, high) of shape `shape`, float type `to`; seeded: the same values each run")
    .inputs(0)
    .attr("shape", IntList{})
    .attr("low", 0.0)
    .attr("high", 1.0)
    .attr("to", int64_t(Type::float32))
    .attr("seeded", int64_t(0))
    .attr("seed", 0.0)
    .stochastic()
    .infer(inferGenerator)
    .cpu([](KernelCtx& c) {
      const double lo = c.attrs.f("low"), hi = c.attrs.f("high");
      fillRandom(c, [&](NodeRng& r) { return lo + (hi - lo) * r.uniform(); });
    })
    .gpuOnHost(ops::kDrawOnHost)
    .notDifferentiable("random values with no inputs")
    .noOnnx("imported from RandomUniform/RandomUniformLike by composite rules that read the shape and dtype; "
            "exported as RandomUniform")
    .onnxExport(1, [](OnnxExportCtx& c) { exportGenerator(c, "RandomUniform", false); });

Expr random_uniform(ExpressionGraph* graph, const Shape& shape, double low, double high, Type type,
                    std::optional<double> seed) {
  return makeGenerator(kRandomUniform, graph, shape, "low", low, "high", high, type, seed);
}

// y ~ N(mean, scale^2)
ONYX_OP(kRandomNormal, "random_normal")
    .doc("normal random values with mean `mean` and standard deviation `scale` of shape `shape`, float type `to`")
    .inputs(0)
    .attr("shape", IntList{})
    .attr("mean", 0.0)
    .attr("scale", 1.0)
    .attr("to", int64_t(Type::float32))
    .attr("seeded", int64_t(0))
    .attr("seed", 0.0)
    .stochastic()
    .infer(inferGenerator)
    .cpu([](KernelCtx& c) {
      const double mean = c.attrs.f("mean"), scale = c.attrs.f("scale");
      fillRandom(c, [&](NodeRng& r) { return mean + scale * r.normal(); });
    })
    .gpuOnHost(ops::kDrawOnHost)
    .notDifferentiable("random values with no inputs")
    .noOnnx("imported from RandomNormal/RandomNormalLike by composite rules that read the shape and dtype; "
            "exported as RandomNormal")
    .onnxExport(1, [](OnnxExportCtx& c) { exportGenerator(c, "RandomNormal", true); });

Expr random_normal(ExpressionGraph* graph, const Shape& shape, double mean, double scale, Type type,
                   std::optional<double> seed) {
  return makeGenerator(kRandomNormal, graph, shape, "mean", mean, "scale", scale, type, seed);
}

Expr bernoulli(Expr p, Type type, std::optional<double> seed) {
  if(type == Type::undefined) type = p->value_type();
  Expr u = random_uniform(p->graph(), p->shape(), 0, 1, p->value_type(), seed);
  return cast(lt(u, p), type);
}

// y[b, s] = class drawn from softmax(x[b, :])
ONYX_OP(kMultinomial, "multinomial")
    .doc("y[b, s] (s < sample_size) = a class index drawn with probabilities softmax(x[b, :]); x [B, K], y int32/int64")
    .inputs(1)
    .attr("sample_size", int64_t(1))
    .attr("to", int64_t(Type::int32))
    .attr("seeded", int64_t(0))
    .attr("seed", 0.0)
    .stochastic()
    .infer([](InferCtx& c) {
      c.requireFloat(0);
      const Shape& s = c.shapeOf(0);
      c.check(s.rank() == 2 && s[1] >= 1, "input has shape ", s, "; it must be [batch, classes] with classes >= 1");
      int64_t n = c.attrs.i("sample_size");
      c.check(n >= 0, "sample_size must not be negative, got ", n);
      Type to = static_cast<Type>(c.attrs.i("to"));
      c.check(to == Type::int32 || to == Type::int64, "output element type ", to, " must be int32 or int64");
      c.shape = Shape{s[0], n};
      c.type = to;
    })
    .cpu([](KernelCtx& c) {
      NodeRng rng(c);
      const int64_t B = c.in[0]->shape()[0], K = c.in[0]->shape()[1], S = c.attrs.i("sample_size");
      std::vector<double> cdf(static_cast<size_t>(K));
      for(int64_t b = 0; b < B; ++b) {
        double mx = -INFINITY;
        for(int64_t k = 0; k < K; ++k) mx = std::max(mx, c.in[0]->getAsDouble(b * K + k));
        double acc = 0;
        for(int64_t k = 0; k < K; ++k) {
          double v = c.in[0]->getAsDouble(b * K + k);
          acc += std::isinf(mx) && mx > 0 ? (v == mx ? 1.0 : 0.0) : std::exp(v - mx);
          cdf[static_cast<size_t>(k)] = acc;
        }
        for(int64_t s = 0; s < S; ++s) {
          double u = rng.uniform() * acc;
          int64_t k = 0;
          while(k < K - 1 && !(u < cdf[static_cast<size_t>(k)])) ++k;
          c.out.setFromDouble(b * S + s, static_cast<double>(k));
        }
      }
    })
    .gpuOnHost(ops::kDrawOnHost)
    .notDifferentiable("sampled class indices")
    .noOnnx("imported from Multinomial by a composite rule that reads sample_size, dtype and seed; exported as "
            "Multinomial")
    // bfloat16 at opsets 13-21 (Multinomial lacks it) is cast to float32
    // first: exact, and the kernel reads the logits as doubles either way.
    .onnxExport(7, [](OnnxExportCtx& c) {
      const Attrs a = c.attrs();
      checkBf16Opset(c, c.inputType(0));
      std::string x = c.input(0);
      if(c.inputType(0) == Type::bfloat16 && c.opset() < 22) {
        std::string f = c.fresh("logits_f32");
        c.emit("Cast", {x}, {f}, {{"to", int64_t(Type::float32)}});
        x = f;
      }
      OnnxAttrs attrs{{"dtype", a.i("to")}, {"sample_size", a.i("sample_size")}};
      addSeed(c, attrs);
      c.emit("Multinomial", {x}, {c.output()}, attrs);
    });

Expr multinomial(Expr logits, int64_t sampleSize, Type type, std::optional<double> seed) {
  Expr e = logits->graph()->make(kMultinomial, {logits},
                                 {{"sample_size", sampleSize}, {"to", int64_t(type)},
                                  {"seeded", int64_t(seed ? 1 : 0)}, {"seed", seed ? *seed : 0.0}});
  e->markCheckpoint();
  return e;
}

}  // namespace onyx
