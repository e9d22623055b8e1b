// ONNX random generators (RandomUniform, RandomNormal, their *Like forms,
// Bernoulli, Multinomial) as the ops of src/ops/random.cpp. A seed
// attribute seeds the op itself; without one the graph's generator draws.
#include <optional>
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/random.h>

namespace onyx {

// ------------------------------------------------------------------ ONNX

namespace {

std::optional<double> seedAttr(OnnxImportCtx& c) {
  if(!c.hasAttr("seed")) return std::nullopt;
  return c.attrFloat("seed");
}

Type dtypeAttr(OnnxImportCtx& c, Type def) {
  if(!c.hasAttr("dtype")) return def;
  return static_cast<Type>(c.attrInt("dtype"));
}

void importGenerator(OnnxImportCtx& c, bool normal, bool like) {
  Shape shape;
  Type type = Type::float32;
  if(like) {
    Expr x = c.input(0);
    shape = x->shape();
    type = dtypeAttr(c, x->value_type());
  } else {
    std::vector<int64_t> s = c.attrInts("shape");
    for(auto d : s) c.check(d >= 0, "shape has a negative dimension ", d);
    shape = Shape(s);
    type = dtypeAttr(c, Type::float32);
  }
  c.check(isFloat(type), "dtype ", type, " is not a floating-point type");
  std::optional<double> seed = seedAttr(c);
  Expr y = normal ? random_normal(&c.graph(), shape, c.attrFloat("mean", 0.0), c.attrFloat("scale", 1.0), type, seed)
                  : random_uniform(&c.graph(), shape, c.attrFloat("low", 0.0), c.attrFloat("high", 1.0), type, seed);
  c.setOutput(0, y);
}

}  // namespace

ONYX_ONNX_IMPORT(kOnnxRandomUniform, "RandomUniform", 1).importer([](OnnxImportCtx& c) {
  importGenerator(c, false, false);
});

ONYX_ONNX_IMPORT(kOnnxRandomNormal, "RandomNormal", 1).importer([](OnnxImportCtx& c) {
  importGenerator(c, true, false);
});

ONYX_ONNX_IMPORT(kOnnxRandomUniformLike, "RandomUniformLike", 1).importer([](OnnxImportCtx& c) {
  importGenerator(c, false, true);
});

ONYX_ONNX_IMPORT(kOnnxRandomNormalLike, "RandomNormalLike", 1).importer([](OnnxImportCtx& c) {
  importGenerator(c, true, true);
});

// Bernoulli: 1 where a uniform draw is below p.
ONYX_ONNX_IMPORT(kOnnxBernoulli, "Bernoulli", 15).importer([](OnnxImportCtx& c) {
  Expr p = c.input(0);
  c.check(isFloat(p->value_type()), "input has element type ", p->value_type(), "; it must be a float type");
  Type type = dtypeAttr(c, p->value_type());
  c.check(type == Type::boolean || isFloat(type) || isInt(type), "dtype ", type, " is not a numeric or bool type");
  c.setOutput(0, bernoulli(p, type, seedAttr(c)));
});

ONYX_ONNX_IMPORT(kOnnxMultinomial, "Multinomial", 7).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  c.check(isFloat(x->value_type()), "input has element type ", x->value_type(), "; it must be a float type");
  Type type = dtypeAttr(c, Type::int32);
  c.check(type == Type::int32 || type == Type::int64, "dtype ", type, " must be int32 or int64");
  c.setOutput(0, multinomial(x, c.attrInt("sample_size", 1), type, seedAttr(c)));
});

}  // namespace onyx
