// Random generators of src/ops/random.cpp (ONNX RandomUniform, RandomNormal,
// their *Like forms, Bernoulli, Multinomial).
//
// Without a seed the values come from the graph's generator
// (ExpressionGraph::setSeed), drawn anew on each forward(). With a seed a
// node draws the same values on every run, from its own generator. The
// streams are Onyx's own (a 64-bit Mersenne Twister): seeded results are
// reproducible within Onyx, never equal to numpy's or another runtime's.
#pragma once
#include <optional>

#include <onyx/core/shape.h>
#include <onyx/core/types.h>
#include <onyx/graph/node.h>

namespace onyx {

class ExpressionGraph;

// Uniform values in [low, high) of `shape`; type: a float type (undefined:
// the graph's default).
Expr random_uniform(ExpressionGraph* graph, const Shape& shape, double low = 0, double high = 1,
                    Type type = Type::undefined, std::optional<double> seed = std::nullopt);
// Normal values with the given mean and standard deviation.
Expr random_normal(ExpressionGraph* graph, const Shape& shape, double mean = 0, double scale = 1,
                   Type type = Type::undefined, std::optional<double> seed = std::nullopt);
// 1 with probability p (element-wise, p a float tensor), else 0, as `type`
// (undefined: p's type).
Expr bernoulli(Expr p, Type type = Type::undefined, std::optional<double> seed = std::nullopt);
// For each row of logits [B, K] (unnormalised log-probabilities), sampleSize
// class indices drawn with probabilities softmax(row): [B, sampleSize] of
// type int32 or int64.
Expr multinomial(Expr logits, int64_t sampleSize, Type type = Type::int32, std::optional<double> seed = std::nullopt);

}  // namespace onyx
