// Classic-ML kernels (the ai.onnx.ml domain): the tree_ensemble op, which
// evaluates TreeEnsembleRegressor/Classifier models as one graph node (trees
// flattened into arrays once per node, rows in parallel), and the score
// transforms the ml imports share (converters/import_ml.cpp).
#pragma once
#include <cstdint>
#include <vector>

#include <onyx/graph/node.h>

namespace onyx {
namespace ml {

// post_transform, in the order of TreeEnsemble (opset 5)'s integer codes.
enum class Post { none = 0, softmax = 1, logistic = 2, softmaxZero = 3, probit = 4 };

// The inverse of the normal CDF (PROBIT), exact to double precision.
double probit(double p);
double logistic(double v);
// post_transform over one row of n >= 2 scores (onnxruntime's write_scores):
// `has` marks the scores some leaf or base value set; the others read as 0.
void transform(Post post, double* s, size_t n, const char* has = nullptr);

}  // namespace ml

// A tree ensemble, flattened: node i branches on x[feature[i]] against
// threshold[i] by mode[i] (0 LEQ, 1 LT, 2 GTE, 3 GT, 4 EQ, 5 NEQ; 6 a leaf)
// to node trueChild[i] or falseChild[i] (a NaN feature goes the true way
// where missingTrue[i]); each tree starts at a root; weight k adds
// weightValue[k] to output weightId[k] at leaf weightNode[k].
struct TreeEnsembleSpec {
  std::vector<int64_t> feature, mode, trueChild, falseChild, missingTrue, roots, weightNode, weightId;
  std::vector<double> threshold, weightValue, baseValues;
  int64_t outputs = 1;       // targets (regressor) or classes (classifier)
  int aggregate = 0;         // regressor: 0 SUM, 1 AVERAGE, 2 MIN, 3 MAX
  ml::Post post = ml::Post::none;
  bool classifier = false;
};

// x [N, F] (float32 or float64) through the ensemble, with onnxruntime's
// rules for base values, post transforms and (classifier) the two-class
// cases. Regressor: y [N, outputs]. Classifier: y [N, outputs + 1], the
// scores and then the label's class index. y has x's type.
Expr tree_ensemble(Expr x, const TreeEnsembleSpec& spec);

}  // namespace onyx
