// Imports of the ai.onnx.ml domain used by ONNX's node tests: Binarizer and
// ArrayFeatureExtractor (composites of registry ops, so they stay in the
// graph), LabelEncoder and TreeEnsemble (computed now from the input data
// with c.value and emitted as constants: the graph built is valid for those
// input values only, and a session rebuilds it per run).
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <string>
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/slicing.h>

namespace onyx {

namespace {

constexpr const char* kMl = "ai.onnx.ml";

// Inverse of the normal CDF (PROBIT): Newton steps on erf from a rational
// first guess.
double probit(double p) {
  if(!(p > 0 && p < 1)) return p == 0 ? -INFINITY : p == 1 ? INFINITY : NAN;
  // Acklam-style start: the logistic approximation is close enough for Newton.
  double x = std::log(p / (1 - p)) / 1.702;
  for(int i = 0; i < 50; ++i) {
    double cdf = 0.5 * (1 + std::erf(x / std::sqrt(2.0)));
    double pdf = std::exp(-0.5 * x * x) / 2.50662827463100050242;
    if(pdf <= 0) break;
    double step = (cdf - p) / pdf;
    x -= step;
    if(std::fabs(step) < 1e-15 * std::max(1.0, std::fabs(x))) break;
  }
  return x;
}

}  // namespace

// Binarizer: 1 where x > threshold, else 0, in x's type.
ONYX_ONNX_IMPORT(kOnnxBinarizer, "Binarizer", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  double th = c.attrFloat("threshold", 0.0);
  c.check(x->value_type() != Type::boolean && x->value_type() != Type::string, "input has element type ",
          x->value_type(), "; it must be numeric");
  c.setOutput(0, cast(gt(x, th), x->value_type()));
});

// ArrayFeatureExtractor: the elements of the last axis of x at `indices`
// (any shape, flattened); a 1-D x counts as one row, so y is
// [..., len(indices)] or [1, len(indices)].
ONYX_ONNX_IMPORT(kOnnxArrayFeatureExtractor, "ArrayFeatureExtractor", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0), idx = c.input(1);
  c.check(x->shape().rank() >= 1, "input is a scalar; it needs at least one axis");
  if(x->shape().rank() == 1) x = reshape(x, std::vector<int64_t>{1, x->shape()[0]});
  c.setOutput(0, gather(x, -1, reshape(idx, std::vector<int64_t>{-1})));
});

// LabelEncoder (opsets 1, 2 and 4): maps each element of x through the
// key -> value table (keys_strings/int64s/floats/tensor, values likewise;
// opset 1: classes_strings, string <-> position), unknown keys give the
// default of the value type (default_tensor, default_int64 = -1,
// default_float = -0.0, default_string = "_Unused"). Float keys match
// exactly, and a NaN key matches NaN.
ONYX_ONNX_IMPORT(kOnnxLabelEncoder, "LabelEncoder", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  Tensor x = c.value(0);
  const bool xs = x->type() == Type::string;
  // Keys and values as strings or doubles, with the value type.
  std::vector<std::string> keyS, valS;
  std::vector<double> keyD, valD;
  Type keyType = Type::undefined, valType = Type::undefined;
  Tensor defTensor;
  auto tensorStrings = [](Tensor t) { return t->strings(); };
  auto tensorDoubles = [](Tensor t) {
    std::vector<double> v;
    t->get(v);
    return v;
  };
  if(c.opset() < 2) {
    std::vector<std::string> classes = c.attrStrings("classes_strings");
    int64_t defInt = c.attrInt("default_int64", -1);
    std::string defStr = c.attrString("default_string", "_Unused");
    Tensor y;
    if(xs) {
      y = TensorBase::create(x->shape(), Type::int64);
      int64_t* py = y->data<int64_t>();
      for(int64_t i = 0; i < x->size(); ++i) {
        auto it = std::find(classes.begin(), classes.end(), x->strings()[static_cast<size_t>(i)]);
        py[i] = it == classes.end() ? defInt : static_cast<int64_t>(it - classes.begin());
      }
    } else {
      c.check(x->type() == Type::int64, "input has element type ", x->type(), "; it must be string or int64");
      y = TensorBase::create(x->shape(), Type::string);
      for(int64_t i = 0; i < x->size(); ++i) {
        int64_t k = x->get<int64_t>(i);
        y->strings()[static_cast<size_t>(i)] =
            k >= 0 && k < static_cast<int64_t>(classes.size()) ? classes[static_cast<size_t>(k)] : defStr;
      }
    }
    c.setOutput(0, c.constant(y));
    return;
  }
  if(c.hasAttr("keys_strings")) { keyS = c.attrStrings("keys_strings"); keyType = Type::string; }
  if(c.hasAttr("keys_int64s")) { for(auto v : c.attrInts("keys_int64s")) keyD.push_back(double(v)); keyType = Type::int64; }
  if(c.hasAttr("keys_floats")) { keyD = c.attrFloats("keys_floats"); keyType = Type::float32; }
  if(c.hasAttr("values_strings")) { valS = c.attrStrings("values_strings"); valType = Type::string; }
  if(c.hasAttr("values_int64s")) { for(auto v : c.attrInts("values_int64s")) valD.push_back(double(v)); valType = Type::int64; }
  if(c.hasAttr("values_floats")) { valD = c.attrFloats("values_floats"); valType = Type::float32; }
  if(c.opset() >= 4) {
    if(c.hasAttr("keys_tensor")) {
      Tensor t = c.attrTensor("keys_tensor");
      keyType = t->type();
      if(keyType == Type::string) keyS = tensorStrings(t);
      else keyD = tensorDoubles(t);
    }
    if(c.hasAttr("values_tensor")) {
      Tensor t = c.attrTensor("values_tensor");
      valType = t->type();
      if(valType == Type::string) valS = tensorStrings(t);
      else valD = tensorDoubles(t);
    }
    if(c.hasAttr("default_tensor")) defTensor = c.attrTensor("default_tensor");
  }
  c.check(keyType != Type::undefined, "has no keys (keys_strings, keys_int64s, keys_floats or keys_tensor)");
  c.check(valType != Type::undefined, "has no values (values_strings, values_int64s, values_floats or values_tensor)");
  size_t nk = keyType == Type::string ? keyS.size() : keyD.size();
  size_t nv = valType == Type::string ? valS.size() : valD.size();
  c.check(nk == nv, "has ", nk, " keys but ", nv, " values");
  c.check((keyType == Type::string) == xs, "input has element type ", x->type(), " but the keys are ", keyType);
  // The default.
  std::string defS = c.attrString("default_string", "_Unused");
  double defD = valType == Type::int64 || isInt(valType) ? double(c.attrInt("default_int64", -1))
                                                         : c.attrFloat("default_float", -0.0);
  if(valType == Type::int64 || isInt(valType)) c.ignoreAttr("default_float");
  else c.ignoreAttr("default_int64");
  if(defTensor) {
    c.check(defTensor->size() == 1, "default_tensor has ", defTensor->size(), " elements; it needs one");
    c.check(defTensor->type() == valType, "default_tensor has element type ", defTensor->type(),
            " but the values are ", valType);
    if(valType == Type::string) defS = defTensor->strings()[0];
    else defD = defTensor->getAsDouble(0);
  }
  Tensor y = TensorBase::create(x->shape(), valType);
  if(xs) {
    std::map<std::string, size_t> table;
    for(size_t i = 0; i < nk; ++i) table.emplace(keyS[i], i);
    for(int64_t i = 0; i < x->size(); ++i) {
      auto it = table.find(x->strings()[static_cast<size_t>(i)]);
      if(valType == Type::string) y->strings()[static_cast<size_t>(i)] = it == table.end() ? defS : valS[it->second];
      else y->setFromDouble(i, it == table.end() ? defD : valD[it->second]);
    }
  } else {
    std::map<double, size_t> table;
    size_t nanKey = nk;
    for(size_t i = 0; i < nk; ++i) {
      if(std::isnan(keyD[i])) { if(nanKey == nk) nanKey = i; }
      else table.emplace(keyD[i], i);
    }
    for(int64_t i = 0; i < x->size(); ++i) {
      double k = x->getAsDouble(i);
      size_t at = nk;
      if(std::isnan(k)) at = nanKey;
      else { auto it = table.find(k); if(it != table.end()) at = it->second; }
      if(valType == Type::string) y->strings()[static_cast<size_t>(i)] = at == nk ? defS : valS[at];
      else y->setFromDouble(i, at == nk ? defD : valD[at]);
    }
  }
  c.setOutput(0, c.constant(y));
});

// TreeEnsemble (opset 5): each row of x [N, F] walks every tree from its
// root (tree_roots) through the nodes (nodes_*: feature, split, mode 0 LEQ,
// 1 LT, 2 GTE, 3 GT, 4 EQ, 5 NEQ, 6 MEMBER of a set from membership_values,
// where NaN separates the sets of the MEMBER nodes in node order; NaN
// features go the true way where nodes_missing_value_tracks_true says so)
// to a leaf (leaf_weights, leaf_targetids). The leaf weights of all trees
// aggregate per target (0 AVERAGE, 1 SUM, 2 MIN, 3 MAX) into y [N, n_targets]
// of x's type, then post_transform (0 NONE, 1 SOFTMAX, 2 LOGISTIC,
// 3 SOFTMAX_ZERO, 4 PROBIT) applies per row. nodes_hitrates is ignored. A
// root whose true and false branches are the same leaf is a one-leaf tree;
// targets that no leaf reaches stay 0.
ONYX_ONNX_IMPORT(kOnnxTreeEnsemble, "TreeEnsemble", 5).inDomain(kMl).importer([](OnnxImportCtx& c) {
  Tensor x = c.value(0);
  c.check(isFloat(x->type()), "input has element type ", x->type(), "; it must be a float type");
  c.check(x->shape().rank() == 2, "input has shape ", x->shape(), "; it must be [N, F]");
  auto doubles = [&](const char* name) {
    std::vector<double> v;
    if(c.hasAttr(name)) c.attrTensor(name)->get(v);
    return v;
  };
  int64_t agg = c.attrInt("aggregate_function", 1);
  int64_t post = c.attrInt("post_transform", 0);
  int64_t nTargets = c.attrInt("n_targets");
  std::vector<int64_t> leafTarget = c.attrInts("leaf_targetids");
  std::vector<double> leafWeight = doubles("leaf_weights");
  std::vector<double> members = doubles("membership_values");
  std::vector<int64_t> falseLeaf = c.attrInts("nodes_falseleafs"), falseId = c.attrInts("nodes_falsenodeids");
  std::vector<int64_t> trueLeaf = c.attrInts("nodes_trueleafs"), trueId = c.attrInts("nodes_truenodeids");
  std::vector<int64_t> feature = c.attrInts("nodes_featureids");
  std::vector<int64_t> missingTrue = c.attrInts("nodes_missing_value_tracks_true");
  std::vector<double> modesD = doubles("nodes_modes");
  std::vector<double> splits = doubles("nodes_splits");
  std::vector<int64_t> roots = c.attrInts("tree_roots");
  c.ignoreAttr("nodes_hitrates");
  c.check(agg >= 0 && agg <= 3, "aggregate_function must be 0 to 3, got ", agg);
  c.check(post >= 0 && post <= 4, "post_transform must be 0 to 4, got ", post);
  c.check(nTargets >= 1, "n_targets must be positive, got ", nTargets);
  const size_t nNodes = feature.size();
  c.check(falseLeaf.size() == nNodes && falseId.size() == nNodes && trueLeaf.size() == nNodes &&
              trueId.size() == nNodes && modesD.size() == nNodes && splits.size() == nNodes &&
              (missingTrue.empty() || missingTrue.size() == nNodes),
          "the nodes_* attributes must all have one entry per node (", nNodes, ")");
  c.check(leafTarget.size() == leafWeight.size(), "leaf_targetids has ", leafTarget.size(),
          " entries but leaf_weights ", leafWeight.size());
  for(auto t : leafTarget) c.check(t >= 0 && t < nTargets, "leaf target ", t, " is outside [0, ", nTargets, ")");
  const int64_t F = x->shape()[1];
  for(size_t i = 0; i < nNodes; ++i) {
    int m = static_cast<int>(modesD[i]);
    c.check(m >= 0 && m <= 6, "node ", i, " has mode ", m, "; modes are 0 to 6");
    c.check(feature[i] >= 0 && feature[i] < F, "node ", i, " reads feature ", feature[i], " of ", F);
    for(int side = 0; side < 2; ++side) {
      int64_t id = side ? trueId[i] : falseId[i];
      bool leaf = (side ? trueLeaf[i] : falseLeaf[i]) != 0;
      c.check(id >= 0 && id < static_cast<int64_t>(leaf ? leafWeight.size() : nNodes), "node ", i, " has ",
              side ? "true" : "false", leaf ? " leaf " : " node ", id, " out of range");
    }
  }
  // Member sets of the MEMBER nodes, in node order.
  std::vector<std::set<double>> sets(nNodes);
  size_t pos = 0;
  for(size_t i = 0; i < nNodes; ++i) {
    if(static_cast<int>(modesD[i]) != 6) continue;
    while(pos < members.size() && !std::isnan(members[pos])) sets[i].insert(members[pos++]);
    c.check(pos < members.size(), "membership_values has fewer NaN-terminated sets than MEMBER nodes");
    ++pos;
  }
  for(auto r : roots) c.check(r >= 0 && r < static_cast<int64_t>(nNodes), "tree root ", r, " out of range");
  const int64_t N = x->shape()[0];
  std::vector<double> y(static_cast<size_t>(N * nTargets));
  std::vector<int64_t> hits(static_cast<size_t>(nTargets));
  for(int64_t row = 0; row < N; ++row) {
    double* out = y.data() + row * nTargets;
    std::fill(hits.begin(), hits.end(), 0);
    std::fill(out, out + nTargets, 0.0);
    for(auto root : roots) {
      size_t node = static_cast<size_t>(root);
      int64_t leaf = -1;
      if(trueLeaf[node] && falseLeaf[node] && trueId[node] == falseId[node]) leaf = trueId[node];
      for(size_t steps = 0; leaf < 0; ++steps) {
        c.check(steps <= nNodes, "the tree from root ", root, " has a cycle");
        double v = x->getAsDouble(row * F + feature[node]), s = splits[node];
        bool t;
        switch(static_cast<int>(modesD[node])) {
          case 0: t = v <= s; break;
          case 1: t = v < s; break;
          case 2: t = v >= s; break;
          case 3: t = v > s; break;
          case 4: t = v == s; break;
          case 5: t = v != s; break;
          default: t = sets[node].count(v) > 0; break;
        }
        if(std::isnan(v) && !missingTrue.empty() && missingTrue[node]) t = true;
        int64_t next = t ? trueId[node] : falseId[node];
        if(t ? trueLeaf[node] : falseLeaf[node]) leaf = next;
        else node = static_cast<size_t>(next);
      }
      int64_t tgt = leafTarget[static_cast<size_t>(leaf)];
      double w = leafWeight[static_cast<size_t>(leaf)];
      double& o = out[tgt];
      int64_t& h = hits[static_cast<size_t>(tgt)];
      if(agg == 2) o = h ? std::min(o, w) : w;
      else if(agg == 3) o = h ? std::max(o, w) : w;
      else o += w;
      ++h;
    }
    if(agg == 0 && !roots.empty())
      for(int64_t k = 0; k < nTargets; ++k) out[k] /= static_cast<double>(roots.size());
    if(post == 1 || post == 3) {  // softmax (SOFTMAX_ZERO leaves zeros at 0)
      double mx = -INFINITY, sum = 0;
      for(int64_t k = 0; k < nTargets; ++k)
        if(post == 1 || out[k] != 0) mx = std::max(mx, out[k]);
      for(int64_t k = 0; k < nTargets; ++k) {
        if(post == 3 && out[k] == 0) continue;
        out[k] = std::exp(out[k] - mx);
        sum += out[k];
      }
      for(int64_t k = 0; k < nTargets; ++k)
        if(post == 1 || out[k] != 0) out[k] /= sum;
    } else if(post == 2) {
      for(int64_t k = 0; k < nTargets; ++k) out[k] = 1 / (1 + std::exp(-out[k]));
    } else if(post == 4) {
      for(int64_t k = 0; k < nTargets; ++k) out[k] = probit(out[k]);
    }
  }
  Tensor t = TensorBase::create(Shape{N, nTargets}, x->type());
  for(int64_t i = 0; i < N * nTargets; ++i) t->setFromDouble(i, y[static_cast<size_t>(i)]);
  c.setOutput(0, c.constant(t));
});

}  // namespace onyx
