// Imports of the ai.onnx.ml domain. Binarizer, ArrayFeatureExtractor, Scaler,
// Normalizer and Imputer are composites of registry ops, so they stay in the
// graph.
// ZipMap makes a sequence of maps sharing their keys (OnnxValue::MapSequence).
// TreeEnsembleRegressor/Classifier become one tree_ensemble node (ops/ml.h:
// trees flattened once, rows in parallel). LabelEncoder, CategoryMapper,
// OneHotEncoder, FeatureVectorizer, DictVectorizer, CastMap, TreeEnsemble
// (opset 5), LinearRegressor/Classifier and SVMRegressor/Classifier are
// computed now from the input data with
// c.value and emitted as constants: the graph built is valid for those input
// values only, and a session rebuilds it per run. The predictors follow
// onnxruntime's semantics where the spec is silent (the binary cases of the
// classifiers, which scores a post_transform applies to), since that is what
// converters such as skl2onnx and onnxmltools are written against.
#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <onyx/core/allocation_limit.h>
#include <onyx/core/checked.h>
#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/ml.h>
#include <onyx/ops/reduce.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/slicing.h>

namespace onyx {

namespace {

constexpr const char* kMl = "ai.onnx.ml";

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
  c.check(nTargets <= kMaxTensorElements, "n_targets is ", nTargets, ", more than 2^56");
  const int64_t outs = mulChecked(N, nTargets, "the output's size (rows * n_targets)");
  c.check(outs <= kMaxTensorElements, "the output would have ", outs, " values, more than 2^56");
  checkHostAllocation(static_cast<size_t>(std::max(outs, nTargets)) * sizeof(double), "the output's values");
  std::vector<double> y(static_cast<size_t>(outs));
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
      for(int64_t k = 0; k < nTargets; ++k) out[k] = ml::probit(out[k]);
    }
  }
  Tensor t = TensorBase::create(Shape{N, nTargets}, x->type());
  for(int64_t i = 0; i < N * nTargets; ++i) t->setFromDouble(i, y[static_cast<size_t>(i)]);
  c.setOutput(0, c.constant(t));
});


// ---- Scaler and Normalizer (composites) ----

namespace {

// Input 0 as float32 (the type both ops output), rank 1 or 2.
Expr mlFloatInput(OnnxImportCtx& c) {
  Expr x = c.input(0);
  c.check(x->value_type() != Type::string && x->value_type() != Type::boolean, "input has element type ",
          x->value_type(), "; it must be numeric");
  c.check(x->shape().rank() == 1 || x->shape().rank() == 2, "input has shape ", x->shape(),
          "; it must be [F] or [N, F]");
  return x->value_type() == Type::float32 ? x : cast(x, Type::float32);
}

// The floats of attribute `name`, or of `name`_as_tensor (doubles).
std::vector<double> mlFloats(OnnxImportCtx& c, const std::string& name) {
  std::string t = name + "_as_tensor";
  if(c.hasAttr(t.c_str())) {
    c.check(!c.hasAttr(name.c_str()), "both ", name, " and ", t, " are set");
    std::vector<double> v;
    c.attrTensor(t.c_str())->get(v);
    return v;
  }
  return c.attrFloats(name.c_str());
}

}  // namespace

// Scaler: y = (x - offset) * scale per feature (offset and scale of length 1
// or F), float32.
ONYX_ONNX_IMPORT(kOnnxScaler, "Scaler", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  Expr x = mlFloatInput(c);
  const int64_t F = x->shape()[x->shape().rank() - 1];
  auto vec = [&](const char* name, double def) {
    std::vector<double> v = c.attrFloats(name);
    if(v.empty()) v.assign(1, def);
    c.check(v.size() == 1 || static_cast<int64_t>(v.size()) == F, name, " has ", v.size(),
            " values; it needs 1 or one per feature (", F, ")");
    std::vector<float> f(v.begin(), v.end());
    return c.constant(TensorBase::fromVector(Shape{static_cast<int64_t>(f.size())}, f));
  };
  Expr offset = vec("offset", 0.0), scale = vec("scale", 1.0);
  c.setOutput(0, (x - offset) * scale);
});

// Normalizer: each row divided by its MAX (the largest value), L1 (sum of
// absolute values) or L2 (Euclidean) norm; a row whose norm is 0 stays as it
// is. float32 out.
ONYX_ONNX_IMPORT(kOnnxNormalizer, "Normalizer", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  Expr x = mlFloatInput(c);
  std::string norm = c.attrString("norm", "MAX");
  int axis = static_cast<int>(x->shape().rank()) - 1;
  Expr n;
  if(norm == "MAX") n = max(x, std::vector<int>{axis}, true);
  else if(norm == "L1") n = sum(abs(x), std::vector<int>{axis}, true);
  else if(norm == "L2") n = sqrt(sum(x * x, std::vector<int>{axis}, true));
  else c.fail("norm must be MAX, L1 or L2, got '", norm, "'");
  c.setOutput(0, x / where(eq(n, 0.0), 1.0, n));
});

// ---- the predictors (computed from the input values) ----

namespace {

ml::Post mlPost(OnnxImportCtx& c) {
  std::string p = c.attrString("post_transform", "NONE");
  if(p == "NONE") return ml::Post::none;
  if(p == "SOFTMAX") return ml::Post::softmax;
  if(p == "LOGISTIC") return ml::Post::logistic;
  if(p == "SOFTMAX_ZERO") return ml::Post::softmaxZero;
  if(p == "PROBIT") return ml::Post::probit;
  c.fail("post_transform must be NONE, SOFTMAX, LOGISTIC, SOFTMAX_ZERO or PROBIT, got '", p, "'");
}

// The input as doubles, [N, F] (a 1-D input is one row).
struct MlRows {
  std::vector<double> v;
  int64_t n = 0, f = 0;
  double at(int64_t row, int64_t col) const { return v[static_cast<size_t>(row * f + col)]; }
};

MlRows mlRows(OnnxImportCtx& c) {
  Tensor x = c.value(0);
  c.check(x->type() != Type::string && x->type() != Type::boolean, "input has element type ", x->type(),
          "; it must be numeric");
  c.check(x->shape().rank() == 1 || x->shape().rank() == 2, "input has shape ", x->shape(),
          "; it must be [F] or [N, F]");
  MlRows r;
  r.n = x->shape().rank() == 1 ? 1 : x->shape()[0];
  r.f = x->shape()[x->shape().rank() - 1];
  checkHostAllocation(static_cast<size_t>(x->size()) * sizeof(r.v[0]), "the rows of an input");
  x->get(r.v);
  return r;
}

Tensor floatMatrix(const std::vector<double>& v, int64_t n, int64_t k) {
  std::vector<float> f(v.begin(), v.end());
  return TensorBase::fromVector(Shape{n, k}, f);
}

// Class labels: int64s or strings (exactly one of the two attributes).
struct MlLabels {
  std::vector<int64_t> ints;
  std::vector<std::string> strings;
  bool isString = false;
  size_t size() const { return isString ? strings.size() : ints.size(); }
};

MlLabels mlLabels(OnnxImportCtx& c, const char* intsName, const char* stringsName) {
  MlLabels l;
  l.ints = c.attrInts(intsName);
  l.strings = c.attrStrings(stringsName);
  c.check(l.ints.empty() || l.strings.empty(), "both ", intsName, " and ", stringsName, " are set");
  l.isString = !l.strings.empty();
  return l;
}

// Labels by class index.
Tensor labelTensor(const MlLabels& l, const std::vector<int64_t>& idx) {
  const int64_t n = static_cast<int64_t>(idx.size());
  if(l.isString) {
    Tensor t = TensorBase::create(Shape{n}, Type::string);
    for(int64_t i = 0; i < n; ++i) t->strings()[static_cast<size_t>(i)] = l.strings[static_cast<size_t>(idx[static_cast<size_t>(i)])];
    return t;
  }
  std::vector<int64_t> v(static_cast<size_t>(n));
  for(int64_t i = 0; i < n; ++i)
    v[static_cast<size_t>(i)] = l.ints[static_cast<size_t>(idx[static_cast<size_t>(i)])];
  return TensorBase::fromVector(Shape{n}, v);
}

}  // namespace

// LinearRegressor: y = x . coefficients^T + intercepts, [N, targets] float32;
// post_transform applies to rows of two or more targets (PROBIT to one).
ONYX_ONNX_IMPORT(kOnnxLinearRegressor, "LinearRegressor", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  MlRows x = mlRows(c);
  std::vector<double> coef = c.attrFloats("coefficients"), icpt = c.attrFloats("intercepts");
  int64_t T = c.attrInt("targets", 1);
  ml::Post post = mlPost(c);
  c.check(T >= 1, "targets must be positive, got ", T);
  // (targets is an attribute: 2^62 of them overflowed the plain product)
  const int64_t needCoef = mulChecked(T, x.f, "targets x features");
  c.check(static_cast<int64_t>(coef.size()) == needCoef, "coefficients has ", coef.size(), " values; ", T,
          " targets of ", x.f, " features need ", needCoef);
  c.check(icpt.empty() || static_cast<int64_t>(icpt.size()) == T, "intercepts has ", icpt.size(),
          " values for ", T, " targets");
  // With no features any targets fit the (empty) coefficients: the output's
  // size is checked before it is allocated.
  const int64_t outN = mulChecked(x.n, T, "rows x targets");
  checkHostAllocation(static_cast<size_t>(mulChecked(outN, int64_t(sizeof(double)), "the output's bytes")),
                      "LinearRegressor's output");
  std::vector<double> y(static_cast<size_t>(outN));
  for(int64_t r = 0; r < x.n; ++r) {
    double* o = y.data() + r * T;
    for(int64_t t = 0; t < T; ++t) {
      double acc = icpt.empty() ? 0.0 : static_cast<double>(static_cast<float>(icpt[static_cast<size_t>(t)]));
      for(int64_t j = 0; j < x.f; ++j)
        acc += static_cast<double>(static_cast<float>(coef[static_cast<size_t>(t * x.f + j)])) *
               static_cast<double>(static_cast<float>(x.at(r, j)));
      o[t] = acc;
    }
    if(T >= 2) ml::transform(post, o, static_cast<size_t>(T));
    else if(post == ml::Post::probit) o[0] = ml::probit(o[0]);
  }
  c.setOutput(0, c.constant(floatMatrix(y, x.n, T)));
});

// LinearClassifier: scores = x . coefficients^T + intercepts [N, C]; the
// label is the first class of the largest score, and post_transform applies
// to the row. One coefficient row is binary (two class labels needed):
// label = labels[1] if the score s > 0 else labels[0]; scores [1 - p, p]
// with p = logistic(s) under LOGISTIC, p = s otherwise (PROBIT: [probit(s), 0]).
ONYX_ONNX_IMPORT(kOnnxLinearClassifier, "LinearClassifier", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  MlRows x = mlRows(c);
  std::vector<double> coef = c.attrFloats("coefficients"), icpt = c.attrFloats("intercepts");
  MlLabels labels = mlLabels(c, "classlabels_ints", "classlabels_strings");
  c.ignoreAttr("multi_class");  // onnxruntime ignores it too
  ml::Post post = mlPost(c);
  const int64_t C = static_cast<int64_t>(icpt.size());
  c.check(C >= 1, "intercepts is empty; it holds one value per class");
  c.check(static_cast<int64_t>(coef.size()) == C * x.f, "coefficients has ", coef.size(), " values; ", C,
          " classes of ", x.f, " features need ", C * x.f);
  const bool binary = C == 1;
  c.check(C == 1 ? labels.size() == 2 : static_cast<int64_t>(labels.size()) == C, "there are ", C,
          C == 1 ? " coefficient row (binary: it needs 2 class labels) but " : " classes but ", labels.size(),
          " class labels");
  const int64_t outC = binary ? 2 : C;
  std::vector<double> z(static_cast<size_t>(x.n * outC));
  std::vector<int64_t> idx(static_cast<size_t>(x.n));
  for(int64_t r = 0; r < x.n; ++r) {
    std::vector<double> s(static_cast<size_t>(C));
    for(int64_t k = 0; k < C; ++k) {
      double acc = static_cast<float>(icpt[static_cast<size_t>(k)]);
      for(int64_t j = 0; j < x.f; ++j)
        acc += static_cast<double>(static_cast<float>(coef[static_cast<size_t>(k * x.f + j)])) *
               static_cast<double>(static_cast<float>(x.at(r, j)));
      s[static_cast<size_t>(k)] = static_cast<float>(acc);
    }
    double* o = z.data() + r * outC;
    if(binary) {
      idx[static_cast<size_t>(r)] = s[0] > 0 ? 1 : 0;
      if(post == ml::Post::probit) {
        o[0] = ml::probit(s[0]);
        o[1] = 0;
      } else {
        double p = post == ml::Post::logistic ? ml::logistic(s[0]) : s[0];
        o[0] = 1 - p;
        o[1] = p;
      }
    } else {
      size_t best = 0;
      for(size_t k = 1; k < s.size(); ++k)
        if(s[k] > s[best]) best = k;
      idx[static_cast<size_t>(r)] = static_cast<int64_t>(best);
      std::copy(s.begin(), s.end(), o);
      ml::transform(post, o, static_cast<size_t>(C));
    }
  }
  c.setOutput(0, c.constant(labelTensor(labels, idx)));
  c.setOutput(1, c.constant(floatMatrix(z, x.n, outC)));
});

namespace {

// The trees of TreeEnsembleRegressor/Classifier: nodes by (tree id, node
// id), children by node id within the tree, weights on the leaves.
struct MlTrees {
  struct Node {
    int64_t feature = 0;
    double value = 0;
    int mode = 0;  // 0 LEQ, 1 LT, 2 GTE, 3 GT, 4 EQ, 5 NEQ, 6 LEAF
    int64_t trueNode = -1, falseNode = -1;  // indices into nodes
    bool missingTrue = false;
    std::vector<std::pair<int64_t, double>> weights;  // (target/class, weight)
  };
  std::vector<Node> nodes;
  std::vector<int64_t> roots;
};

// Reads and checks the nodes_* attributes and the weights (prefix "target"
// or "class") against `outputs` targets or classes and F features.
MlTrees mlTrees(OnnxImportCtx& c, const char* prefix, int64_t outputs, int64_t F) {
  std::vector<int64_t> treeIds = c.attrInts("nodes_treeids"), nodeIds = c.attrInts("nodes_nodeids");
  std::vector<int64_t> features = c.attrInts("nodes_featureids");
  std::vector<int64_t> trueIds = c.attrInts("nodes_truenodeids"), falseIds = c.attrInts("nodes_falsenodeids");
  std::vector<int64_t> missing = c.attrInts("nodes_missing_value_tracks_true");
  std::vector<std::string> modes = c.attrStrings("nodes_modes");
  std::vector<double> values = mlFloats(c, "nodes_values");
  if(c.hasAttr("nodes_hitrates")) c.ignoreAttr("nodes_hitrates");
  if(c.hasAttr("nodes_hitrates_as_tensor")) c.ignoreAttr("nodes_hitrates_as_tensor");
  const size_t n = nodeIds.size();
  c.check(n > 0, "nodes_nodeids is empty: the ensemble has no nodes");
  c.check(treeIds.size() == n && features.size() == n && modes.size() == n && trueIds.size() == n &&
              falseIds.size() == n && values.size() == n && (missing.empty() || missing.size() == n),
          "the nodes_* attributes must all have one entry per node (", n, ")");
  MlTrees t;
  t.nodes.resize(n);
  std::map<std::pair<int64_t, int64_t>, int64_t> at;
  for(size_t i = 0; i < n; ++i) {
    c.check(at.emplace(std::make_pair(treeIds[i], nodeIds[i]), static_cast<int64_t>(i)).second, "node ", nodeIds[i],
            " of tree ", treeIds[i], " appears twice");
  }
  static const char* kModes[] = {"BRANCH_LEQ", "BRANCH_LT", "BRANCH_GTE", "BRANCH_GT", "BRANCH_EQ", "BRANCH_NEQ", "LEAF"};
  std::vector<bool> isChild(n);
  for(size_t i = 0; i < n; ++i) {
    MlTrees::Node& nd = t.nodes[i];
    nd.mode = -1;
    for(int m = 0; m < 7; ++m)
      if(modes[i] == kModes[m]) nd.mode = m;
    c.check(nd.mode >= 0, "node ", nodeIds[i], " of tree ", treeIds[i], " has mode '", modes[i],
            "' (BRANCH_LEQ, BRANCH_LT, BRANCH_GTE, BRANCH_GT, BRANCH_EQ, BRANCH_NEQ or LEAF)");
    nd.value = static_cast<float>(values[i]);
    if(c.hasAttr("nodes_values_as_tensor")) nd.value = values[i];
    nd.missingTrue = !missing.empty() && missing[i] != 0;
    if(nd.mode == 6) continue;
    nd.feature = features[i];
    c.check(nd.feature >= 0 && nd.feature < F, "node ", nodeIds[i], " of tree ", treeIds[i], " reads feature ",
            nd.feature, " of ", F);
    for(int side = 0; side < 2; ++side) {
      int64_t id = side ? trueIds[i] : falseIds[i];
      auto it = at.find({treeIds[i], id});
      c.check(it != at.end(), "node ", nodeIds[i], " of tree ", treeIds[i], " has ", side ? "true" : "false",
              " child ", id, ", which the tree does not have");
      (side ? nd.trueNode : nd.falseNode) = it->second;
      isChild[static_cast<size_t>(it->second)] = true;
    }
  }
  for(size_t i = 0; i < n; ++i)
    if(!isChild[i]) t.roots.push_back(static_cast<int64_t>(i));
  // Cycles: every node reachable from a root at most once per walk.
  {
    std::vector<int> state(n);  // 0 new, 1 on the path, 2 done
    std::vector<std::pair<int64_t, int>> stack;
    for(int64_t r : t.roots) {
      stack.push_back({r, 0});
      while(!stack.empty()) {
        auto& [node, step] = stack.back();
        const MlTrees::Node& nd = t.nodes[static_cast<size_t>(node)];
        if(step == 0) {
          c.check(state[static_cast<size_t>(node)] != 1, "the tree of node ", nodeIds[static_cast<size_t>(node)],
                  " has a cycle");
          state[static_cast<size_t>(node)] = 1;
        }
        if(nd.mode != 6 && step < 2) {
          int64_t child = step == 0 ? nd.trueNode : nd.falseNode;
          ++step;
          if(state[static_cast<size_t>(child)] != 2) stack.push_back({child, 0});
          continue;
        }
        state[static_cast<size_t>(node)] = 2;
        stack.pop_back();
      }
    }
    for(size_t i = 0; i < n; ++i)
      c.check(state[i] == 2, "node ", nodeIds[i], " of tree ", treeIds[i], " is not reachable from a root (a cycle)");
  }
  std::string p = prefix;
  std::vector<int64_t> wTree = c.attrInts((p + "_treeids").c_str()), wNode = c.attrInts((p + "_nodeids").c_str());
  std::vector<int64_t> wIds = c.attrInts((p + "_ids").c_str());
  std::vector<double> w = mlFloats(c, p + "_weights");
  c.check(wTree.size() == wNode.size() && wIds.size() == wNode.size() && w.size() == wNode.size(), p,
          "_treeids, ", p, "_nodeids, ", p, "_ids and ", p, "_weights must have the same length");
  const bool asTensor = c.hasAttr((p + "_weights_as_tensor").c_str());
  for(size_t i = 0; i < w.size(); ++i) {
    auto it = at.find({wTree[i], wNode[i]});
    c.check(it != at.end(), p, " weight ", i, " is on node ", wNode[i], " of tree ", wTree[i], ", which does not exist");
    c.check(wIds[i] >= 0 && wIds[i] < outputs, p, " weight ", i, " is for ", p, " ", wIds[i], "; there are ", outputs);
    t.nodes[static_cast<size_t>(it->second)].weights.push_back(
        {wIds[i], asTensor ? w[i] : static_cast<double>(static_cast<float>(w[i]))});
  }
  return t;
}

}  // namespace

namespace {

// The ensemble for op tree_ensemble (ops/ml.h).
TreeEnsembleSpec mlSpec(const MlTrees& t) {
  TreeEnsembleSpec s;
  for(const auto& n : t.nodes) {
    s.feature.push_back(n.feature);
    s.threshold.push_back(n.value);
    s.mode.push_back(n.mode);
    s.trueChild.push_back(n.mode == 6 ? 0 : n.trueNode);
    s.falseChild.push_back(n.mode == 6 ? 0 : n.falseNode);
    s.missingTrue.push_back(n.missingTrue ? 1 : 0);
  }
  for(size_t i = 0; i < t.nodes.size(); ++i)
    for(const auto& [k, w] : t.nodes[i].weights) {
      s.weightNode.push_back(static_cast<int64_t>(i));
      s.weightId.push_back(k);
      s.weightValue.push_back(w);
    }
  s.roots = t.roots;
  return s;
}

// Input 0 as tree_ensemble takes it: [N, F], float32 or float64 (others cast
// to float32, as onnxruntime reads them).
Expr mlTreeInput(OnnxImportCtx& c) {
  Expr x = c.input(0);
  c.check(x->value_type() != Type::string && x->value_type() != Type::boolean, "input has element type ",
          x->value_type(), "; it must be numeric");
  c.check(x->shape().rank() == 1 || x->shape().rank() == 2, "input has shape ", x->shape(),
          "; it must be [F] or [N, F]");
  if(x->shape().rank() == 1) x = reshape(x, std::vector<int64_t>{1, x->shape()[0]});
  if(x->value_type() != Type::float32 && x->value_type() != Type::float64) x = cast(x, Type::float32);
  return x;
}

}  // namespace

// TreeEnsembleRegressor (opsets 1 and 3): each row walks every tree to a
// leaf; the leaves' weights aggregate per target (SUM, AVERAGE, MIN, MAX),
// base_values are added (when there is one per target; with one target, a
// single base value), then post_transform (rows of two or more targets;
// PROBIT also for one). A target no leaf reached reads as 0 (without its
// base value), as in onnxruntime. Float32 [N, n_targets]: one tree_ensemble
// node, trees flattened once, rows in parallel.
ONYX_ONNX_IMPORT(kOnnxTreeEnsembleRegressor, "TreeEnsembleRegressor", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  Expr x = mlTreeInput(c);
  int64_t T = c.attrInt("n_targets");
  c.check(T >= 1, "n_targets must be positive, got ", T);
  std::string aggName = c.attrString("aggregate_function", "SUM");
  int agg = aggName == "SUM" ? 0 : aggName == "AVERAGE" ? 1 : aggName == "MIN" ? 2 : aggName == "MAX" ? 3 : -1;
  c.check(agg >= 0, "aggregate_function must be SUM, AVERAGE, MIN or MAX, got '", aggName, "'");
  ml::Post post = mlPost(c);
  std::vector<double> base = mlFloats(c, "base_values");
  TreeEnsembleSpec spec = mlSpec(mlTrees(c, "target", T, x->shape()[1]));
  spec.outputs = T;
  spec.aggregate = agg;
  spec.post = post;
  spec.baseValues = base;
  Expr y = tree_ensemble(x, spec);
  c.setOutput(0, y->value_type() == Type::float32 ? y : cast(y, Type::float32));
});

// TreeEnsembleClassifier (opsets 1 and 3): the leaves' class weights sum per
// class. With more than two classes: base_values added, the label is the
// first class of the largest score, post_transform over the row. With two
// classes, onnxruntime's binary rules: weights on one class only make the
// "binary case" (all weights >= 0: label 1 when the score > 0.5, scores
// [1 - s, s] untransformed; mixed signs: label 1 when the score > 0, scores
// [-s, s], LOGISTIC giving [logistic(-s), logistic(s)]); otherwise the
// scores are transformed as a row and the label is 1 when the positive
// score is > 0 (the literal 1/0 with int labels, as onnxruntime gives).
// Scores are float32 [N, classes]; labels int64 or strings.
ONYX_ONNX_IMPORT(kOnnxTreeEnsembleClassifier, "TreeEnsembleClassifier", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  Expr x = mlTreeInput(c);
  MlLabels labels = mlLabels(c, "classlabels_int64s", "classlabels_strings");
  const int64_t C = static_cast<int64_t>(labels.size());
  c.check(C >= 2, "the classifier has ", C, " class labels; it needs at least 2");
  ml::Post post = mlPost(c);
  std::vector<double> base = mlFloats(c, "base_values");
  MlTrees trees = mlTrees(c, "class", C, x->shape()[1]);
  std::set<int64_t> classesWeighted;
  for(const auto& nd : trees.nodes)
    for(const auto& kw : nd.weights) classesWeighted.insert(kw.first);
  c.check(C > 2 || !classesWeighted.empty(), "no leaf holds a class weight");
  const bool binaryCase = C == 2 && classesWeighted.size() == 1;
  TreeEnsembleSpec spec = mlSpec(trees);
  spec.outputs = C;
  spec.post = post;
  spec.baseValues = base;
  spec.classifier = true;
  Expr y = tree_ensemble(x, spec);
  const int64_t N = x->shape()[0];
  Expr scores = slice(y, 1, 0, C);
  if(scores->value_type() != Type::float32) scores = cast(scores, Type::float32);
  Expr idx = cast(reshape(slice(y, 1, C, C + 1), std::vector<int64_t>{N}), Type::int64);
  // onnxruntime's labels for two classes: class_labels[1]/[0] in the binary
  // case, the literal 1/0 otherwise (with string labels, the index).
  const bool literal = C == 2 && !binaryCase && !labels.isString;
  std::vector<int64_t> all(static_cast<size_t>(C));
  for(int64_t k = 0; k < C; ++k) all[static_cast<size_t>(k)] = k;
  Expr label = literal ? idx : gather(c.constant(labelTensor(labels, all)), 0, idx);
  c.setOutput(0, label);
  c.setOutput(1, scores);
});

// ZipMap: each row of x [N, C] (float32) becomes a map from the class labels
// (classlabels_int64s or classlabels_strings, C of them) to the row's values:
// a sequence of N maps that share their keys. A 1-D x is one row.
ONYX_ONNX_IMPORT(kOnnxZipMap, "ZipMap", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  c.check(x->value_type() == Type::float32, "input has element type ", x->value_type(), "; it must be float32");
  c.check(x->shape().rank() == 1 || x->shape().rank() == 2, "input has shape ", x->shape(),
          "; it must be [C] or [N, C]");
  MlLabels labels = mlLabels(c, "classlabels_int64s", "classlabels_strings");
  const int64_t C = x->shape()[x->shape().rank() - 1];
  c.check(static_cast<int64_t>(labels.size()) == C, "there are ", labels.size(), " class labels for ", C,
          " columns");
  if(x->shape().rank() == 1) x = reshape(x, std::vector<int64_t>{1, C});
  std::vector<int64_t> all(static_cast<size_t>(C));
  for(int64_t k = 0; k < C; ++k) all[static_cast<size_t>(k)] = k;
  c.setOutputValue(0, OnnxValue::map(c.constant(labelTensor(labels, all)), x, OnnxValue::Kind::MapSequence));
});

// ---- encoders and vectorizers ----

namespace {

// The map input i (a Map value) as (keys, values) host tensors.
std::pair<Tensor, Tensor> mlMapInput(OnnxImportCtx& c, size_t i) {
  OnnxValue v = c.inputValue(i);
  c.check(v.kind == OnnxValue::Kind::Map, "input ", i, " must be a map");
  return {c.valueOf(v.tensor), c.valueOf(v.mapValues)};
}

std::string keyText(const Tensor& keys, int64_t k) {
  return keys->type() == Type::string ? keys->strings()[static_cast<size_t>(k)] : std::to_string(keys->get<int64_t>(k));
}

}  // namespace

// Imputer: elements equal to the replaced value (replaced_value_float, NaN
// matching NaN; replaced_value_int64 for int64 inputs) become the imputed
// value of their feature (imputed_value_floats / _int64s: one, or one per
// feature along the last axis).
ONYX_ONNX_IMPORT(kOnnxImputer, "Imputer", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  const bool isInt = x->value_type() == Type::int64;
  c.check(isInt || x->value_type() == Type::float32 || x->value_type() == Type::float64, "input has element type ",
          x->value_type(), "; it must be float32, float64 or int64");
  c.check(x->shape().rank() >= 1, "input is a scalar; it needs a feature axis");
  const int64_t F = x->shape()[x->shape().rank() - 1];
  std::vector<double> imputed;
  if(isInt) {
    for(auto v : c.attrInts("imputed_value_int64s")) imputed.push_back(static_cast<double>(v));
    c.ignoreAttr("imputed_value_floats");
  } else {
    imputed = c.attrFloats("imputed_value_floats");
    c.ignoreAttr("imputed_value_int64s");
  }
  double replaced = isInt ? static_cast<double>(c.attrInt("replaced_value_int64", 0))
                          : c.attrFloat("replaced_value_float", 0.0);
  if(isInt) c.ignoreAttr("replaced_value_float");
  else c.ignoreAttr("replaced_value_int64");
  c.check(imputed.size() == 1 || static_cast<int64_t>(imputed.size()) == F, "there are ", imputed.size(),
          " imputed values for ", F, " features (1 or one per feature)");
  Tensor iv = TensorBase::create(Shape{static_cast<int64_t>(imputed.size())}, x->value_type());
  for(size_t i = 0; i < imputed.size(); ++i) iv->setFromDouble(static_cast<int64_t>(i), imputed[i]);
  Expr hit = std::isnan(replaced) ? is_nan(x) : eq(x, replaced);
  c.setOutput(0, where(hit, c.constant(iv), x));
});

// CategoryMapper: strings to int64 (cats_strings[i] -> cats_int64s[i],
// others default_int64) or int64 to strings (others default_string).
ONYX_ONNX_IMPORT(kOnnxCategoryMapper, "CategoryMapper", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  Tensor x = c.value(0);
  std::vector<std::string> cs = c.attrStrings("cats_strings");
  std::vector<int64_t> ci = c.attrInts("cats_int64s");
  c.check(cs.size() == ci.size(), "cats_strings has ", cs.size(), " entries but cats_int64s ", ci.size());
  int64_t defInt = c.attrInt("default_int64", -1);
  std::string defStr = c.attrString("default_string", "_Unused");
  const int64_t n = x->size();
  if(x->type() == Type::string) {
    std::map<std::string, int64_t> table;
    for(size_t i = 0; i < cs.size(); ++i) table.emplace(cs[i], ci[i]);
    Tensor y = TensorBase::create(x->shape(), Type::int64);
    for(int64_t i = 0; i < n; ++i) {
      auto it = table.find(x->strings()[static_cast<size_t>(i)]);
      y->setFromDouble(i, static_cast<double>(it == table.end() ? defInt : it->second));
    }
    c.setOutput(0, c.constant(y));
    return;
  }
  c.check(x->type() == Type::int64, "input has element type ", x->type(), "; it must be string or int64");
  std::map<int64_t, std::string> table;
  for(size_t i = 0; i < cs.size(); ++i) table.emplace(ci[i], cs[i]);
  Tensor y = TensorBase::create(x->shape(), Type::string);
  for(int64_t i = 0; i < n; ++i) {
    auto it = table.find(x->get<int64_t>(i));
    y->strings()[static_cast<size_t>(i)] = it == table.end() ? defStr : it->second;
  }
  c.setOutput(0, c.constant(y));
});

// OneHotEncoder: each element (int64, or float truncated to int64, or a
// string) becomes a one-hot vector over the categories (cats_int64s or
// cats_strings): y [.., C] float32. An unknown value gives zeros, or an
// error with zeros = 0.
ONYX_ONNX_IMPORT(kOnnxOneHotEncoder, "OneHotEncoder", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  Tensor x = c.value(0);
  std::vector<int64_t> ci = c.attrInts("cats_int64s");
  std::vector<std::string> cs = c.attrStrings("cats_strings");
  c.check(ci.empty() != cs.empty(), "exactly one of cats_int64s and cats_strings must be given");
  const bool zeros = c.attrInt("zeros", 1) != 0;
  const bool strs = x->type() == Type::string;
  c.check(strs == !cs.empty(), strs ? "string input needs cats_strings" : "numeric input needs cats_int64s");
  const int64_t C = static_cast<int64_t>(strs ? cs.size() : ci.size());
  std::map<std::string, int64_t> sIdx;
  std::map<int64_t, int64_t> iIdx;
  for(int64_t k = 0; k < C; ++k) {
    if(strs) sIdx.emplace(cs[static_cast<size_t>(k)], k);
    else iIdx.emplace(ci[static_cast<size_t>(k)], k);
  }
  std::vector<int64_t> dims(x->shape().dims().begin(), x->shape().dims().end());
  dims.push_back(C);
  const int64_t n = x->size();
  std::vector<float> y(static_cast<size_t>(n * C), 0.f);
  for(int64_t i = 0; i < n; ++i) {
    int64_t k = -1;
    if(strs) {
      auto it = sIdx.find(x->strings()[static_cast<size_t>(i)]);
      if(it != sIdx.end()) k = it->second;
    } else {
      double v = x->getAsDouble(i);
      auto it = std::isfinite(v) ? iIdx.find(static_cast<int64_t>(v)) : iIdx.end();
      if(it != iIdx.end()) k = it->second;
    }
    if(k < 0) {
      c.check(zeros, "element ", i, " is not one of the categories (and zeros = 0)");
      continue;
    }
    y[static_cast<size_t>(i * C + k)] = 1.f;
  }
  c.setOutput(0, c.constant(TensorBase::fromVector(Shape(dims), y)));
});

// FeatureVectorizer: the inputs (each [N, Ci] or [N]) side by side, each
// cut or zero-padded to its inputdimensions entry: y [N, sum] float32.
ONYX_ONNX_IMPORT(kOnnxFeatureVectorizer, "FeatureVectorizer", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  std::vector<int64_t> dimsIn = c.attrInts("inputdimensions");
  c.check(dimsIn.size() == c.numInputs(), "inputdimensions has ", dimsIn.size(), " entries for ", c.numInputs(),
          " inputs");
  std::vector<Tensor> xs;
  int64_t N = -1, total = 0;
  for(size_t i = 0; i < c.numInputs(); ++i) {
    Tensor x = c.value(i);
    c.check(x->type() != Type::string && x->type() != Type::boolean, "input ", i, " has element type ", x->type(),
            "; it must be numeric");
    c.check(x->shape().rank() >= 1, "input ", i, " is a scalar");
    int64_t n = x->shape().rank() == 1 ? 1 : x->shape()[0];
    c.check(N < 0 || n == N, "input ", i, " has ", n, " rows, input 0 has ", N);
    c.check(dimsIn[i] >= 0, "inputdimensions[", i, "] is negative");
    N = n;
    total += dimsIn[i];
    xs.push_back(x);
  }
  std::vector<float> y(static_cast<size_t>(std::max<int64_t>(N, 0) * total), 0.f);
  int64_t off = 0;
  for(size_t i = 0; i < xs.size(); ++i) {
    const int64_t cols = xs[i]->size() / std::max<int64_t>(N, 1), take = std::min(cols, dimsIn[i]);
    for(int64_t r = 0; r < N; ++r)
      for(int64_t k = 0; k < take; ++k)
        y[static_cast<size_t>(r * total + off + k)] = static_cast<float>(xs[i]->getAsDouble(r * cols + k));
    off += dimsIn[i];
  }
  c.setOutput(0, c.constant(TensorBase::fromVector(Shape{std::max<int64_t>(N, 0), total}, y)));
});

// DictVectorizer: a map's values at the positions of its keys in the
// vocabulary (string_vocabulary or int64_vocabulary): y [1, V] of the map's
// value type, 0 (or "") where a word is absent.
ONYX_ONNX_IMPORT(kOnnxDictVectorizer, "DictVectorizer", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  auto [keys, values] = mlMapInput(c, 0);
  std::vector<std::string> sv = c.attrStrings("string_vocabulary");
  std::vector<int64_t> iv = c.attrInts("int64_vocabulary");
  c.check(sv.empty() != iv.empty(), "exactly one of string_vocabulary and int64_vocabulary must be given");
  const bool strs = !sv.empty();
  c.check(strs == (keys->type() == Type::string), "the map's keys are ", keys->type(), " but the vocabulary is ",
          strs ? "strings" : "int64");
  const int64_t V = static_cast<int64_t>(strs ? sv.size() : iv.size());
  Tensor y = TensorBase::create(Shape{1, V}, values->type());
  if(values->type() != Type::string) y->set(0.0);
  std::map<std::string, int64_t> at;
  for(int64_t k = 0; k < V; ++k)
    at.emplace(strs ? sv[static_cast<size_t>(k)] : std::to_string(iv[static_cast<size_t>(k)]), k);
  for(int64_t k = 0; k < keys->size(); ++k) {
    auto it = at.find(keyText(keys, k));
    if(it == at.end()) continue;
    if(values->type() == Type::string)
      y->strings()[static_cast<size_t>(it->second)] = values->strings()[static_cast<size_t>(k)];
    else y->setFromDouble(it->second, values->getAsDouble(k));
  }
  c.setOutput(0, c.constant(y));
});

// CastMap: a map from int64 keys to a tensor [1, K] in key order (map_form
// DENSE), or [1, max_map] with each value at its key and the rest 0 or
// "_Unused" (SPARSE); cast_to TO_FLOAT, TO_STRING or TO_INT64.
ONYX_ONNX_IMPORT(kOnnxCastMap, "CastMap", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  const auto kv = mlMapInput(c, 0);  // (no structured binding: C++17 lambdas cannot capture one)
  const Tensor keys = kv.first, values = kv.second;
  c.check(keys->type() == Type::int64, "the map's keys are ", keys->type(), "; CastMap takes int64 keys");
  std::string to = c.attrString("cast_to", "TO_FLOAT"), form = c.attrString("map_form", "DENSE");
  int64_t maxMap = c.attrInt("max_map", 1);
  Type t = to == "TO_FLOAT" ? Type::float32 : to == "TO_STRING" ? Type::string : to == "TO_INT64" ? Type::int64
                                                                                                 : Type::undefined;
  c.check(t != Type::undefined, "cast_to must be TO_FLOAT, TO_STRING or TO_INT64, got '", to, "'");
  c.check(form == "DENSE" || form == "SPARSE", "map_form must be DENSE or SPARSE, got '", form, "'");
  std::vector<std::pair<int64_t, int64_t>> order;  // (key, position in the map)
  for(int64_t k = 0; k < keys->size(); ++k) order.emplace_back(keys->get<int64_t>(k), k);
  std::sort(order.begin(), order.end());
  const bool sparse = form == "SPARSE";
  c.check(!sparse || maxMap >= 1, "max_map must be positive for SPARSE, got ", maxMap);
  const int64_t width = sparse ? maxMap : static_cast<int64_t>(order.size());
  Tensor y = TensorBase::create(Shape{1, width}, t);
  if(t == Type::string) {
    for(auto& e : y->strings()) e = "_Unused";
  } else {
    y->set(0.0);
  }
  auto put = [&](int64_t at, int64_t k) {
    if(t == Type::string) {
      if(values->type() == Type::string) y->strings()[static_cast<size_t>(at)] = values->strings()[static_cast<size_t>(k)];
      else {
        std::ostringstream o;
        o << values->getAsDouble(k);
        y->strings()[static_cast<size_t>(at)] = o.str();
      }
    } else if(values->type() == Type::string) {
      const std::string& s = values->strings()[static_cast<size_t>(k)];
      char* end = nullptr;
      double d = std::strtod(s.c_str(), &end);
      c.check(end && *end == 0 && !s.empty(), "map value '", s, "' is not a number");
      y->setFromDouble(at, d);
    } else {
      y->setFromDouble(at, values->getAsDouble(k));
    }
  };
  for(size_t i = 0; i < order.size(); ++i) {
    if(sparse) {
      if(order[i].first >= 0 && order[i].first < maxMap) put(order[i].first, order[i].second);
    } else {
      put(static_cast<int64_t>(i), order[i].second);
    }
  }
  c.setOutput(0, c.constant(y));
});

// ---- support vector machines ----

namespace {

struct MlKernel {
  enum Kind { linear, poly, rbf, sigmoid } kind = linear;
  double gamma = 0, coef0 = 0, degree = 0;
  double operator()(const MlRows& x, int64_t row, const std::vector<double>& sv, int64_t v) const {
    const double* s = sv.data() + v * x.f;
    double acc = 0;
    if(kind == rbf) {
      for(int64_t j = 0; j < x.f; ++j) {
        double d = static_cast<double>(static_cast<float>(x.at(row, j))) - s[j];
        acc += d * d;
      }
      return std::exp(-gamma * acc);
    }
    for(int64_t j = 0; j < x.f; ++j) acc += static_cast<double>(static_cast<float>(x.at(row, j))) * s[j];
    if(kind == poly) return std::pow(gamma * acc + coef0, degree);
    if(kind == sigmoid) return std::tanh(gamma * acc + coef0);
    return acc;
  }
};

MlKernel mlKernel(OnnxImportCtx& c) {
  MlKernel k;
  std::string t = c.attrString("kernel_type", "LINEAR");
  if(t == "LINEAR") k.kind = MlKernel::linear;
  else if(t == "POLY") k.kind = MlKernel::poly;
  else if(t == "RBF") k.kind = MlKernel::rbf;
  else if(t == "SIGMOID") k.kind = MlKernel::sigmoid;
  else c.fail("kernel_type must be LINEAR, POLY, RBF or SIGMOID, got '", t, "'");
  std::vector<double> p = c.attrFloats("kernel_params");
  c.check(p.empty() || p.size() == 3, "kernel_params has ", p.size(), " values; it holds gamma, coef0, degree");
  if(p.size() == 3) {
    k.gamma = static_cast<float>(p[0]);
    k.coef0 = static_cast<float>(p[1]);
    k.degree = static_cast<float>(p[2]);
  }
  return k;
}

std::vector<double> asFloats(std::vector<double> v) {
  for(auto& e : v) e = static_cast<float>(e);
  return v;
}

// libsvm's pairwise coupling (Wu, Lin and Weng's second method): class
// probabilities p [C] from the pairwise ones r [C x C].
void coupleProbabilities(int64_t C, const std::vector<double>& r, double* p) {
  std::vector<double> Q(static_cast<size_t>(C * C), 0.0), Qp(static_cast<size_t>(C), 0.0);
  const double eps = 0.005 / static_cast<double>(C);
  for(int64_t i = 0; i < C; ++i) {
    p[i] = 1.0 / static_cast<double>(C);
    for(int64_t j = 0; j < i; ++j) {
      Q[static_cast<size_t>(i * C + i)] += r[static_cast<size_t>(j * C + i)] * r[static_cast<size_t>(j * C + i)];
      Q[static_cast<size_t>(i * C + j)] = Q[static_cast<size_t>(j * C + i)];
    }
    for(int64_t j = i + 1; j < C; ++j) {
      Q[static_cast<size_t>(i * C + i)] += r[static_cast<size_t>(j * C + i)] * r[static_cast<size_t>(j * C + i)];
      Q[static_cast<size_t>(i * C + j)] = -r[static_cast<size_t>(j * C + i)] * r[static_cast<size_t>(i * C + j)];
    }
  }
  for(int iter = 0; iter < 100; ++iter) {
    double pQp = 0;
    for(int64_t i = 0; i < C; ++i) {
      Qp[static_cast<size_t>(i)] = 0;
      for(int64_t j = 0; j < C; ++j) Qp[static_cast<size_t>(i)] += Q[static_cast<size_t>(i * C + j)] * p[j];
      pQp += p[i] * Qp[static_cast<size_t>(i)];
    }
    double maxErr = 0;
    for(int64_t i = 0; i < C; ++i) maxErr = std::max(maxErr, std::fabs(Qp[static_cast<size_t>(i)] - pQp));
    if(maxErr < eps) break;
    for(int64_t i = 0; i < C; ++i) {
      double qii = Q[static_cast<size_t>(i * C + i)];
      double diff = (-Qp[static_cast<size_t>(i)] + pQp) / qii;
      p[i] += diff;
      pQp = (pQp + diff * (diff * qii + 2 * Qp[static_cast<size_t>(i)])) / (1 + diff) / (1 + diff);
      for(int64_t j = 0; j < C; ++j) {
        Qp[static_cast<size_t>(j)] = (Qp[static_cast<size_t>(j)] + diff * Q[static_cast<size_t>(i * C + j)]) / (1 + diff);
        p[j] /= (1 + diff);
      }
    }
  }
}

}  // namespace

// SVMRegressor: score = sum_v coefficients[v] * K(x, support_vector v) +
// rho[0] (n_supports > 0), or x . coefficients + rho[0] (linear); one_class
// gives +1 / -1 by the score's sign; PROBIT applies to the score. [N, 1]
// float32.
ONYX_ONNX_IMPORT(kOnnxSVMRegressor, "SVMRegressor", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  MlRows x = mlRows(c);
  MlKernel k = mlKernel(c);
  std::vector<double> coef = asFloats(c.attrFloats("coefficients")), sv = asFloats(c.attrFloats("support_vectors"));
  std::vector<double> rho = asFloats(c.attrFloats("rho"));
  const int64_t nSv = c.attrInt("n_supports", 0);
  const bool oneClass = c.attrInt("one_class", 0) != 0;
  ml::Post post = mlPost(c);
  c.check(rho.size() == 1, "rho has ", rho.size(), " values; a regressor has one");
  if(nSv > 0) {
    const int64_t needSv = mulChecked(nSv, x.f, "n_supports x features");  // n_supports is an attribute
    c.check(static_cast<int64_t>(sv.size()) == needSv, "support_vectors has ", sv.size(), " values; ", nSv,
            " vectors of ", x.f, " features need ", needSv);
    c.check(static_cast<int64_t>(coef.size()) == nSv, "coefficients has ", coef.size(), " values for ", nSv,
            " support vectors");
  } else {
    c.check(static_cast<int64_t>(coef.size()) == x.f, "coefficients has ", coef.size(), " values for ", x.f,
            " features (linear)");
  }
  std::vector<double> y(static_cast<size_t>(x.n));
  for(int64_t r = 0; r < x.n; ++r) {
    double s = rho[0];
    if(nSv > 0) {
      for(int64_t v = 0; v < nSv; ++v) s += coef[static_cast<size_t>(v)] * k(x, r, sv, v);
    } else {
      MlKernel lin;
      s += lin(x, r, coef, 0);
    }
    if(oneClass) s = s > 0 ? 1.0 : -1.0;
    if(post == ml::Post::probit) s = ml::probit(s);
    y[static_cast<size_t>(r)] = s;
  }
  c.setOutput(0, c.constant(floatMatrix(y, x.n, 1)));
});

// SVMClassifier (onnxruntime's semantics): linear (no support vectors:
// scores [N, C] = x . coefficients_c + rho[0]) or SVC (one-vs-one over the
// support vectors of vectors_per_class, each pair's score voting; with
// prob_a/prob_b, Platt-scaled pairwise probabilities coupled into class
// probabilities [N, C]; without, the pair scores [N, C(C-1)/2], or [N, 2]
// for two classes). The label is the class with most votes (SVC) or the
// largest score (linear); two classes follow onnxruntime's binary rules.
ONYX_ONNX_IMPORT(kOnnxSVMClassifier, "SVMClassifier", 1).inDomain(kMl).importer([](OnnxImportCtx& c) {
  MlRows x = mlRows(c);
  MlKernel k = mlKernel(c);
  MlLabels labels = mlLabels(c, "classlabels_ints", "classlabels_strings");
  std::vector<double> coef = asFloats(c.attrFloats("coefficients")), sv = asFloats(c.attrFloats("support_vectors"));
  std::vector<double> rho = asFloats(c.attrFloats("rho"));
  std::vector<double> pa = asFloats(c.attrFloats("prob_a")), pb = asFloats(c.attrFloats("prob_b"));
  std::vector<int64_t> perClass = c.attrInts("vectors_per_class");
  ml::Post post = mlPost(c);
  const int64_t C = static_cast<int64_t>(labels.size());
  c.check(C >= 2, "the classifier has ", C, " class labels; it needs at least 2");
  c.check(pa.size() == pb.size(), "prob_a has ", pa.size(), " values but prob_b ", pb.size());
  c.check(!coef.empty(), "coefficients is empty");
  int64_t V = 0;
  std::vector<int64_t> start;
  for(auto n : perClass) {
    c.check(n >= 0, "vectors_per_class has a negative count");
    start.push_back(V);
    V = addChecked(V, n, "vectors_per_class's sum");
  }
  const bool svc = V > 0;
  const int64_t pairs = C * (C - 1) / 2;
  const bool proba = !pa.empty();
  bool allPositive = true;
  for(double v : coef) allPositive &= v >= 0;
  if(svc) {
    c.check(static_cast<int64_t>(perClass.size()) == C, "vectors_per_class has ", perClass.size(), " entries for ", C,
            " classes");
    // (vectors_per_class holds attribute counts: their sum may be near 2^63)
    const int64_t needSv = mulChecked(V, x.f, "support vectors x features");
    const int64_t needCoef = mulChecked(C - 1, V, "(classes - 1) x support vectors");
    c.check(static_cast<int64_t>(sv.size()) == needSv, "support_vectors has ", sv.size(), " values; ", V,
            " vectors of ", x.f, " features need ", needSv);
    c.check(static_cast<int64_t>(coef.size()) >= needCoef, "coefficients has ", coef.size(), " values; ", C - 1,
            " rows of ", V, " support vectors need ", needCoef);
    c.check(static_cast<int64_t>(rho.size()) >= pairs, "rho has ", rho.size(), " values for ", pairs, " class pairs");
    c.check(!proba || static_cast<int64_t>(pa.size()) >= pairs, "prob_a has ", pa.size(), " values for ", pairs,
            " class pairs");
  } else {
    c.check(static_cast<int64_t>(coef.size()) == C * x.f, "coefficients has ", coef.size(), " values; ", C,
            " classes of ", x.f, " features need ", C * x.f);
    c.check(!rho.empty(), "rho is empty");
  }
  const int64_t width = svc && !proba ? (C > 2 ? pairs : 2) : C;
  const int64_t nScores = svc && !proba ? pairs : C;
  int extra = -1;
  if(svc && !proba && C <= 2) extra = post == ml::Post::none ? 2 : 0;
  std::vector<double> z(static_cast<size_t>(x.n * width), 0.0);
  std::vector<int64_t> idx(static_cast<size_t>(x.n));
  for(int64_t r = 0; r < x.n; ++r) {
    double* o = z.data() + r * width;
    std::vector<double> scores(static_cast<size_t>(std::max(nScores, C)), 0.0);
    std::vector<int64_t> votes;
    if(!svc) {
      for(int64_t cl = 0; cl < C; ++cl) {
        MlKernel lin;
        scores[static_cast<size_t>(cl)] = static_cast<float>(lin(x, r, coef, cl) + rho[0]);
      }
    } else {
      std::vector<double> kv(static_cast<size_t>(V));
      for(int64_t v = 0; v < V; ++v) kv[static_cast<size_t>(v)] = static_cast<float>(k(x, r, sv, v));
      votes.assign(static_cast<size_t>(C), 0);
      int64_t p = 0;
      for(int64_t i = 0; i < C - 1; ++i)
        for(int64_t j = i + 1; j < C; ++j, ++p) {
          double sum = 0;
          for(int64_t m = 0; m < perClass[static_cast<size_t>(i)]; ++m)
            sum += coef[static_cast<size_t>((j - 1) * V + start[static_cast<size_t>(i)] + m)] *
                   kv[static_cast<size_t>(start[static_cast<size_t>(i)] + m)];
          for(int64_t m = 0; m < perClass[static_cast<size_t>(j)]; ++m)
            sum += coef[static_cast<size_t>(i * V + start[static_cast<size_t>(j)] + m)] *
                   kv[static_cast<size_t>(start[static_cast<size_t>(j)] + m)];
          sum += rho[static_cast<size_t>(p)];
          scores[static_cast<size_t>(p)] = static_cast<float>(sum);
          ++votes[static_cast<size_t>(sum > 0 ? i : j)];
        }
      if(proba) {
        std::vector<double> pr(static_cast<size_t>(C * C), 0.0);
        int64_t q = 0;
        for(int64_t i = 0; i < C - 1; ++i)
          for(int64_t j = i + 1; j < C; ++j, ++q) {
            double v = 1 - ml::logistic(scores[static_cast<size_t>(q)] * pa[static_cast<size_t>(q)] + pb[static_cast<size_t>(q)]);
            v = std::min(std::max(v, 1e-7), 1 - 1e-7);
            pr[static_cast<size_t>(i * C + j)] = v;
            pr[static_cast<size_t>(j * C + i)] = 1 - v;
          }
        coupleProbabilities(C, pr, scores.data());
      }
    }
    int64_t best = 0;
    double maxWeight = 0;
    if(!votes.empty()) {
      for(int64_t cl = 1; cl < C; ++cl)
        if(votes[static_cast<size_t>(cl)] > votes[static_cast<size_t>(best)]) best = cl;
    } else {
      for(int64_t cl = 1; cl < C; ++cl)
        if(scores[static_cast<size_t>(cl)] > scores[static_cast<size_t>(best)]) best = cl;
      maxWeight = scores[static_cast<size_t>(best)];
    }
    if(C == 2 && !proba) {
      if(allPositive && maxWeight >= 0.5) best = 1;
      else if(maxWeight > 0 && !allPositive) best = 1;
    }
    idx[static_cast<size_t>(r)] = best;
    // The scores out.
    if(nScores > 1) {
      std::copy(scores.begin(), scores.begin() + nScores, o);
      ml::transform(post, o, static_cast<size_t>(nScores));
    } else if(post == ml::Post::probit) {
      o[0] = ml::probit(scores[0]);
    } else if(extra == 0 || extra == 1) {
      o[0] = 1 - scores[0];
      o[1] = scores[0];
    } else {
      o[0] = -scores[0];
      o[1] = scores[0];
    }
  }
  c.setOutput(0, c.constant(labelTensor(labels, idx)));
  c.setOutput(1, c.constant(floatMatrix(z, x.n, width)));
});

}  // namespace onyx
