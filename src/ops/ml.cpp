// The classic-ML family (ops/ml.h): tree_ensemble and the score transforms
// of the ai.onnx.ml imports. The imports themselves (attribute parsing and
// checks, labels) are in converters/import_ml.cpp.
#include <onyx/ops/ml.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <set>
#include <type_traits>

#include <onyx/backend/cpu/parallel.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/graph/op_def.h>

namespace onyx {

double ml::probit(double p) {
  if(!(p > 0 && p < 1)) return p == 0 ? -INFINITY : p == 1 ? INFINITY : NAN;
  // Newton steps on erf from the logistic approximation.
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

double ml::logistic(double v) { return 1 / (1 + std::exp(-v)); }

void ml::transform(Post post, double* s, size_t n, const char* has) {
  if(has)
    for(size_t k = 0; k < n; ++k)
      if(!has[k]) s[k] = 0;
  switch(post) {
    case Post::probit:
      for(size_t k = 0; k < n; ++k) s[k] = probit(s[k]);
      break;
    case Post::logistic:
      for(size_t k = 0; k < n; ++k) s[k] = logistic(s[k]);
      break;
    case Post::softmax:
    case Post::softmaxZero: {
      // SOFTMAX_ZERO leaves (near-)zero scores out of the sum, scaled by exp(-max).
      const bool zero = post == Post::softmaxZero;
      double mx = -INFINITY, sum = 0;
      for(size_t k = 0; k < n; ++k) mx = std::max(mx, s[k]);
      for(size_t k = 0; k < n; ++k) {
        if(zero && std::fabs(s[k]) <= 1e-7) {
          s[k] *= std::exp(-mx);
          continue;
        }
        s[k] = std::exp(s[k] - mx);
        sum += s[k];
      }
      for(size_t k = 0; k < n; ++k) s[k] /= sum;
      break;
    }
    case Post::none: break;
  }
}

namespace {

// The ensemble as the kernel walks it, built once per node from its
// attributes (Node::kernelState).
struct Flat {
  struct N {
    double threshold;
    int32_t feature;
    int32_t child[2];  // false, true
    int32_t wBegin, wEnd;
    int8_t mode;
    bool missingTrue;
  };
  std::vector<N> nodes;
  // The same nodes in 16 bytes, for float32 inputs when every threshold is
  // a float (comparing in float then gives the same branches): a branch's
  // false child is the next node (depth-first layout), `a` its feature and
  // `b` its true child. A leaf with one weight whose value is a float holds
  // it inline (threshold = the value, a = its output, b = -1: no second
  // dependent load at the end of a walk); other leaves' weights are [a, b).
  struct NF {
    float threshold;
    int32_t a, b;
    int8_t mode;
    bool missingTrue;
  };
  std::vector<NF> small;
  std::vector<int64_t> roots;
  std::vector<int32_t> depth;  // by tree: the most branch nodes on a walk from its root
  int64_t steps = 0;           // the sum of depth: an upper bound of one row's steps through the ensemble
  // By tree: whether its leaves lie at about the same depth (the mean leaf
  // depth at least 80% of the deepest), so that walks in lockstep waste few
  // steps (random forests; LightGBM's leaf-wise trees are not).
  std::vector<char> balanced;
  std::vector<std::pair<int64_t, double>> weights;  // (output, value) by leaf
  std::vector<double> base;
  int64_t outputs = 1;
  int aggregate = 0;
  ml::Post post = ml::Post::none;
  bool classifier = false, binaryCase = false, allPositive = true;
  int sameMode = -1;     // the branch mode of every non-leaf node, -1 if mixed
  bool missing = false;  // some node sends NaN the true way
};

std::shared_ptr<Flat> flatten(const Attrs& a, const Node& node) {
  auto f = std::make_shared<Flat>();
  const IntList &feature = a.ints("feature"), &mode = a.ints("mode"), &t = a.ints("true_child"),
                &fc = a.ints("false_child"), &miss = a.ints("missing_true"), &wn = a.ints("weight_node"),
                &wi = a.ints("weight_id");
  const FloatList &th = a.floats("threshold"), &wv = a.floats("weight_value");
  const size_t n = feature.size();
  std::vector<std::vector<std::pair<int64_t, double>>> byNode(n);
  for(size_t k = 0; k < wn.size(); ++k) byNode[static_cast<size_t>(wn[k])].emplace_back(wi[k], wv[k]);
  // Depth first from each root, the false child right after its parent: a
  // walk mostly reads the next node, which is in the same cache line. A
  // node reached twice (a cycle, or trees sharing nodes) is an error, so a
  // walk always ends.
  std::vector<int32_t> newIndex(n, -1);
  std::vector<size_t> order;
  std::vector<size_t> stack;
  for(int64_t r : a.ints("roots")) {
    stack.push_back(static_cast<size_t>(r));
    while(!stack.empty()) {
      size_t i = stack.back();
      stack.pop_back();
      ONYX_CHECK(newIndex[i] < 0, "tree_ensemble '", node.name(), "': node ", i,
                 " is reached twice (a cycle, or trees that share nodes)");
      newIndex[i] = static_cast<int32_t>(order.size());
      order.push_back(i);
      if(mode[i] != 6) {
        stack.push_back(static_cast<size_t>(t[i]));   // after the false subtree
        stack.push_back(static_cast<size_t>(fc[i]));  // next
      }
    }
  }
  f->nodes.resize(order.size());
  for(size_t j = 0; j < order.size(); ++j) {
    const size_t i = order[j];
    Flat::N& d = f->nodes[j];
    d.feature = static_cast<int32_t>(feature[i]);
    d.threshold = th[i];
    d.mode = static_cast<int8_t>(mode[i]);
    d.missingTrue = !miss.empty() && miss[i] != 0;
    d.child[0] = d.mode == 6 ? 0 : newIndex[static_cast<size_t>(fc[i])];
    d.child[1] = d.mode == 6 ? 0 : newIndex[static_cast<size_t>(t[i])];
    d.wBegin = static_cast<int32_t>(f->weights.size());
    for(auto& w : byNode[i]) f->weights.push_back(w);
    d.wEnd = static_cast<int32_t>(f->weights.size());
    f->missing |= d.missingTrue;
    if(d.mode != 6) {
      if(f->sameMode == -1) f->sameMode = d.mode;
      else if(f->sameMode != d.mode) f->sameMode = -2;
    }
  }
  if(f->sameMode < 0) f->sameMode = -1;
  bool floatExact = true;
  for(const auto& d : f->nodes)
    floatExact &= d.mode == 6 || std::isnan(d.threshold) ||
                  static_cast<double>(static_cast<float>(d.threshold)) == d.threshold;
  bool nextIsFalse = true;
  for(size_t j = 0; j < f->nodes.size(); ++j)
    nextIsFalse &= f->nodes[j].mode == 6 || f->nodes[j].child[0] == static_cast<int32_t>(j + 1);
  if(floatExact && nextIsFalse)
    for(const auto& d : f->nodes) {
      if(d.mode != 6) {
        f->small.push_back({static_cast<float>(d.threshold), d.feature, d.child[1], d.mode, d.missingTrue});
        continue;
      }
      if(d.wEnd - d.wBegin == 1) {
        const auto& [k, v] = f->weights[static_cast<size_t>(d.wBegin)];
        if(k >= 0 && k <= std::numeric_limits<int32_t>::max() && static_cast<double>(static_cast<float>(v)) == v) {
          f->small.push_back({static_cast<float>(v), static_cast<int32_t>(k), -1, d.mode, false});
          continue;
        }
      }
      f->small.push_back({0.0f, d.wBegin, d.wEnd, d.mode, false});
    }
  for(int64_t r : a.ints("roots")) f->roots.push_back(newIndex[static_cast<size_t>(r)]);
  // From the leaves up (in the depth-first layout every child comes after
  // its parent): each node's height, its leaves and the sum of their depths
  // below it.
  const size_t nn = f->nodes.size();
  std::vector<int32_t> height(nn, 0);
  std::vector<double> leaves(nn, 1), depthSum(nn, 0);
  for(size_t j = nn; j-- > 0;) {
    const Flat::N& d = f->nodes[j];
    if(d.mode == 6) continue;
    const size_t c0 = static_cast<size_t>(d.child[0]), c1 = static_cast<size_t>(d.child[1]);
    height[j] = 1 + std::max(height[c0], height[c1]);
    leaves[j] = leaves[c0] + leaves[c1];
    depthSum[j] = depthSum[c0] + depthSum[c1] + leaves[j];
  }
  for(int64_t r : f->roots) {
    const size_t j = static_cast<size_t>(r);
    f->depth.push_back(height[j]);
    f->steps += height[j];
    f->balanced.push_back(depthSum[j] >= 0.8 * leaves[j] * height[j]);
  }
  f->base = a.floats("base_values");
  f->outputs = a.i("outputs");
  f->aggregate = static_cast<int>(a.i("aggregate"));
  f->post = static_cast<ml::Post>(a.i("post"));
  f->classifier = a.i("classifier") != 0;
  std::set<int64_t> ids(wi.begin(), wi.end());
  for(double v : wv) f->allPositive &= !(v < 0);
  f->binaryCase = f->classifier && f->outputs == 2 && ids.size() == 1;
  return f;
}

// The leaf a row reaches from `root`: with one comparison for every node of
// the ensemble (Mode >= 0, the common case: LightGBM and scikit-learn write
// BRANCH_LEQ throughout) the switch leaves the inner loop.
// Whether a node sends value v its true way (mode as in TreeEnsembleSpec;
// Mode >= 0: every node's mode, known at compile time).
template <int Mode, bool Missing, class V>
inline bool goesTrue(int mode, bool missingTrue, V v, V threshold) {
  bool t;
  switch(Mode >= 0 ? Mode : mode) {
    case 0: t = v <= threshold; break;
    case 1: t = v < threshold; break;
    case 2: t = v >= threshold; break;
    case 3: t = v > threshold; break;
    case 4: t = v == threshold; break;
    default: t = v != threshold; break;
  }
  // Bitwise, not short-circuit: no branch on the data.
  if constexpr(Missing) return t | (missingTrue & (v != v));
  else return t;
}

template <int Mode, bool Missing, class T>
const Flat::N& leafOf(const Flat& f, const T* row, int64_t root) {
  const Flat::N* nodes = f.nodes.data();
  const Flat::N* n = &nodes[root];
  while(n->mode != 6) {
    const double v = static_cast<double>(row[n->feature]);
    const bool t = goesTrue<Mode, Missing>(n->mode, n->missingTrue, v, n->threshold);
    n = &nodes[n->child[t ? 1 : 0]];
  }
  return *n;
}

// One row of a regressor: aggregate, base values, post transform (as the
// TreeEnsembleRegressor import states).
void finishRegressor(const Flat& f, double* o, char* has) {
  const int64_t T = f.outputs;
  const double nTrees = static_cast<double>(f.roots.size());
  if(T == 1) {
    if(f.aggregate == 1) o[0] /= nTrees;
    o[0] += f.base.size() == 1 ? f.base[0] : 0.0;
    if(f.post == ml::Post::probit) o[0] = ml::probit(o[0]);
    return;
  }
  const bool useBase = static_cast<int64_t>(f.base.size()) == T;
  for(int64_t k = 0; k < T; ++k) {
    if(f.aggregate == 1) o[k] /= nTrees;
    if(useBase) o[k] += f.base[static_cast<size_t>(k)];
  }
  ml::transform(f.post, o, static_cast<size_t>(T), has);
}

// One row of a classifier: the scores into o [C], the label's class index
// into o[C] (onnxruntime's rules, as the TreeEnsembleClassifier import
// states).
void finishClassifier(const Flat& f, double* s, char* has, double* o) {
  const int64_t C = f.outputs;
  const auto& base = f.base;
  if(C > 2) {
    for(size_t k = 0; k < base.size() && k < static_cast<size_t>(C); ++k) {
      s[k] = has[k] ? s[k] + base[k] : base[k];
      has[k] = 1;
    }
    int64_t best = -1;
    for(int64_t k = 0; k < C; ++k)
      if(has[k] && (best < 0 || s[k] > s[best])) best = k;
    std::copy(s, s + C, o);
    ml::transform(f.post, o, static_cast<size_t>(C), has);
    o[C] = static_cast<double>(std::max<int64_t>(best, 0));
    return;
  }
  size_t count = 2;
  int extra = -1;  // onnxruntime's add_second_class
  if(base.size() == 2) {
    if(has[1]) {
      s[1] = base[1] + s[0];
      s[0] = -s[1];
    } else {
      s[1] += base[1];
      s[0] += base[0];
    }
    has[1] = 1;
  } else if(base.size() == 1) {
    s[0] += base[0];
    if(!has[1]) count = 1;
  } else {
    if(base.empty()) extra = 3;
    if(!has[1]) count = 1;
  }
  double pos = count == 2 && has[1] ? s[1] : (has[0] ? s[0] : 0.0);
  int64_t idx;
  if(f.binaryCase) {
    if(f.allPositive) extra = pos > 0.5 ? 0 : 1;
    else extra = pos > 0 ? 2 : 3;
    idx = extra == 0 || extra == 2 ? 1 : 0;
  } else {
    idx = pos > 0 ? 1 : 0;
  }
  if(count == 2) {
    o[0] = s[0];
    o[1] = s[1];
    ml::transform(f.post, o, 2, has);
  } else if(f.post == ml::Post::probit) {
    o[0] = ml::probit(s[0]);
    o[1] = 0;
  } else if(extra == 0 || extra == 1) {
    o[0] = 1 - s[0];
    o[1] = s[0];
  } else if(extra == 2 || extra == 3) {
    o[0] = f.post == ml::Post::logistic ? ml::logistic(-s[0]) : -s[0];
    o[1] = f.post == ml::Post::logistic ? ml::logistic(s[0]) : s[0];
  } else {
    o[0] = s[0];
    o[1] = 0;
  }
  o[2] = static_cast<double>(idx);
}

// Adds v to a score a (h: whether it has one yet): summed for classifiers
// and SUM/AVERAGE, the smallest or largest for MIN/MAX.
inline void combine(const Flat& f, double& a, char& h, double v) {
  if(f.classifier || f.aggregate <= 1) a += v;
  else if(f.aggregate == 2) a = h && a < v ? a : v;
  else a = h && a > v ? a : v;
  h = 1;
}

// Adds a leaf's weights [wBegin, wEnd) to one row's scores s and flags has
// (outputs entries each).
inline void addLeaf(const Flat& f, int64_t wBegin, int64_t wEnd, double* s, char* has) {
  for(int64_t w = wBegin; w < wEnd; ++w) {
    const auto& [k, v] = f.weights[static_cast<size_t>(w)];
    combine(f, s[k], has[k], v);
  }
}

// Adds a leaf of the 16-byte nodes to one row's scores (as addLeaf).
inline void addLeaf(const Flat& f, const Flat::NF* n, double* s, char* has) {
  if(n->b < 0) combine(f, s[n->a], has[n->a], static_cast<double>(n->threshold));
  else addLeaf(f, n->a, n->b, s, has);
}

// The leaf one walk over the 16-byte nodes reaches from root.
template <int Mode, bool Missing>
inline const Flat::NF* walkOne(const Flat::NF* nodes, const float* row, int64_t root) {
  const Flat::NF* n = nodes + root;
  while(n->mode != 6) n = goesTrue<Mode, Missing>(n->mode, n->missingTrue, row[n->a], n->threshold) ? nodes + n->b : n + 1;
  return n;
}

// The leaves reached by kLanes walks over the 16-byte nodes (walk l: row
// rows[l] from root roots[l]), advanced in lockstep: each walk is a chain of
// dependent loads, and independent chains overlap in the CPU where one walk
// at a time waits on each load.
constexpr int kLanes = 8;

template <int Mode, bool Missing>
inline void walkLanes(const Flat::NF* nodes, const float* const* rows, const int64_t* roots, int32_t steps,
                      const Flat::NF** leaf) {
  const Flat::NF* p[kLanes];
  for(int l = 0; l < kLanes; ++l) p[l] = nodes + roots[l];
  // `steps` is the deepest walk's length: a walk that reaches its leaf
  // earlier stays there (a leaf's `a` is not a feature, so it reads feature 0).
  for(int32_t d = 0; d < steps; ++d)
    for(int l = 0; l < kLanes; ++l) {
      const Flat::NF* n = p[l];
      const bool isLeaf = n->mode == 6;
      const bool t = goesTrue<Mode, Missing>(n->mode, n->missingTrue, rows[l][isLeaf ? 0 : n->a], n->threshold);
      const Flat::NF* next = t ? nodes + n->b : n + 1;
      p[l] = isLeaf ? n : next;
    }
  for(int l = 0; l < kLanes; ++l) leaf[l] = p[l];
}

// Adds trees [t0, t1) of the ensemble, for rows [0, rows) of x (F features
// each), into s / has (rows x outputs). Many rows: each tree takes the rows
// in groups of kLanes (the tree stays in cache); few rows: each row takes
// the trees in groups of kLanes (in lockstep when all of them are balanced).
template <int Mode, bool Missing, class T>
void scoreTrees(const Flat& f, const T* x, int64_t rows, int64_t F, int64_t t0, int64_t t1, double* s, char* has) {
  const int64_t K = f.outputs;
  if constexpr(std::is_same<T, float>::value) {
    if(!f.small.empty()) {
      const Flat::NF* nodes = f.small.data();
      const float* rp[kLanes];
      int64_t roots[kLanes];
      const Flat::NF* leaf[kLanes];
      if(rows >= kLanes) {
        for(int64_t j = t0; j < t1; ++j) {
          const int64_t root = f.roots[static_cast<size_t>(j)];
          if(!f.balanced[static_cast<size_t>(j)]) {
            // Walks of unequal lengths: one row at a time (lockstep lanes
            // would all walk as deep as the deepest leaf).
            for(int64_t i = 0; i < rows; ++i) {
              const Flat::NF* n = walkOne<Mode, Missing>(nodes, x + i * F, root);
              addLeaf(f, n, s + i * K, has + i * K);
            }
            continue;
          }
          for(int64_t i0 = 0; i0 < rows; i0 += kLanes) {
            const int m = static_cast<int>(std::min<int64_t>(kLanes, rows - i0));
            for(int l = 0; l < kLanes; ++l) {  // lanes past the rows repeat the first (ignored)
              rp[l] = x + (i0 + (l < m ? l : 0)) * F;
              roots[l] = root;
            }
            walkLanes<Mode, Missing>(nodes, rp, roots, f.depth[static_cast<size_t>(j)], leaf);
            for(int l = 0; l < m; ++l) addLeaf(f, leaf[l], s + (i0 + l) * K, has + (i0 + l) * K);
          }
        }
      } else {
        for(int64_t i = 0; i < rows; ++i)
          for(int64_t j0 = t0; j0 < t1; j0 += kLanes) {
            const int m = static_cast<int>(std::min<int64_t>(kLanes, t1 - j0));
            bool even = true;
            for(int l = 0; l < m; ++l) even &= f.balanced[static_cast<size_t>(j0 + l)] != 0;
            if(!even) {  // walks of unequal lengths: one tree at a time (as for many rows)
              for(int l = 0; l < m; ++l) {
                const Flat::NF* n = walkOne<Mode, Missing>(nodes, x + i * F, f.roots[static_cast<size_t>(j0 + l)]);
                addLeaf(f, n, s + i * K, has + i * K);
              }
              continue;
            }
            int32_t steps = 0;
            for(int l = 0; l < kLanes; ++l) {  // lanes past the trees repeat the first (ignored)
              const size_t j = static_cast<size_t>(j0 + (l < m ? l : 0));
              rp[l] = x + i * F;
              roots[l] = f.roots[j];
              steps = std::max(steps, f.depth[j]);
            }
            walkLanes<Mode, Missing>(nodes, rp, roots, steps, leaf);
            for(int l = 0; l < m; ++l) addLeaf(f, leaf[l], s + i * K, has + i * K);
          }
      }
      return;
    }
  }
  for(int64_t j = t0; j < t1; ++j)
    for(int64_t i = 0; i < rows; ++i) {
      const Flat::N& leaf = leafOf<Mode, Missing>(f, x + i * F, f.roots[static_cast<size_t>(j)]);
      addLeaf(f, leaf.wBegin, leaf.wEnd, s + i * K, has + i * K);
    }
}

// Rows [0, rows) of scores s / has finished (aggregate, base values, post
// transform, the label's index) into y (width entries a row).
template <class T>
void finishRows(const Flat& f, int64_t rows, double* s, char* has, T* y) {
  const int64_t K = f.outputs, width = f.classifier ? K + 1 : K;
  std::vector<double> o(static_cast<size_t>(width));
  for(int64_t i = 0; i < rows; ++i) {
    double* si = s + i * K;
    char* hi = has + i * K;
    if(f.classifier) {
      finishClassifier(f, si, hi, o.data());
    } else {
      std::copy(si, si + K, o.begin());
      finishRegressor(f, o.data(), hi);
    }
    for(int64_t k = 0; k < width; ++k) y[i * width + k] = static_cast<T>(o[static_cast<size_t>(k)]);
  }
}

template <int Mode, bool Missing, class T>
void evaluateAs(const Flat& f, const T* x, int64_t N, int64_t F, T* y) {
  const int64_t K = f.outputs, width = f.classifier ? K + 1 : K;
  const int64_t trees = static_cast<int64_t>(f.roots.size());
  // A step of a walk (a dependent load, a compare) costs about as much as
  // kStepWork elements of an element-wise kernel, the unit of parallelFor's
  // grain: one row through a few hundred trees is worth a second thread.
  constexpr int64_t kStepWork = 16;
  // (Each factor capped at the grain: only whether it is reached matters.)
  const int64_t work = std::min(N, host::kParallelGrain) * std::min(f.steps * kStepWork, host::kParallelGrain);
  constexpr int64_t kBlock = 64;  // rows walked through one tree before the next (the tree stays in cache)
  if(N > kBlock) {
    // Blocks of rows in parallel, each through every tree in order.
    host::parallelFor((N + kBlock - 1) / kBlock, work, [&](int64_t lo, int64_t hi) {
      std::vector<double> s(static_cast<size_t>(kBlock * K));
      std::vector<char> has(static_cast<size_t>(kBlock * K));
      for(int64_t blk = lo; blk < hi; ++blk) {
        const int64_t r0 = blk * kBlock, rows = std::min(kBlock, N - r0);
        std::fill(s.begin(), s.end(), 0.0);
        std::fill(has.begin(), has.end(), 0);
        scoreTrees<Mode, Missing>(f, x + r0 * F, rows, F, 0, trees, s.data(), has.data());
        finishRows(f, rows, s.data(), has.data(), y + r0 * width);
      }
    });
    return;
  }
  // Few rows: chunks of trees in parallel, each into its own partial
  // scores, which are then combined in chunk order (the same sums whatever
  // the thread count).
  constexpr int64_t kChunk = 16;
  const int64_t chunks = std::max<int64_t>(1, (trees + kChunk - 1) / kChunk);
  const size_t per = static_cast<size_t>(N * K);
  std::vector<double> part(per * static_cast<size_t>(chunks), 0.0);
  std::vector<char> partHas(per * static_cast<size_t>(chunks), 0);
  host::parallelFor(chunks, work, [&](int64_t lo, int64_t hi) {
    for(int64_t c = lo; c < hi; ++c)
      scoreTrees<Mode, Missing>(f, x, N, F, c * kChunk, std::min(trees, (c + 1) * kChunk),
                                part.data() + per * static_cast<size_t>(c), partHas.data() + per * static_cast<size_t>(c));
  });
  std::vector<double> s(per, 0.0);
  std::vector<char> has(per, 0);
  for(int64_t c = 0; c < chunks; ++c)
    for(size_t e = 0; e < per; ++e) {
      const size_t pe = per * static_cast<size_t>(c) + e;
      if(partHas[pe]) combine(f, s[e], has[e], part[pe]);
    }
  finishRows(f, N, s.data(), has.data(), y);
}

template <class T>
void evaluate(const Flat& f, const T* x, int64_t N, int64_t F, T* y) {
  if(f.missing) {
    if(f.sameMode == 0) evaluateAs<0, true>(f, x, N, F, y);
    else evaluateAs<-1, true>(f, x, N, F, y);
  } else {
    if(f.sameMode == 0) evaluateAs<0, false>(f, x, N, F, y);
    else if(f.sameMode == 1) evaluateAs<1, false>(f, x, N, F, y);
    else evaluateAs<-1, false>(f, x, N, F, y);
  }
}

}  // namespace

ONYX_OP(kTreeEnsemble, "tree_ensemble")
    .doc("a tree ensemble on x [N, F] (float32/float64): regressor y [N, outputs] or classifier y [N, outputs + 1] "
         "(scores, then the label's class index), x's type, with onnxruntime's aggregation and post transforms "
         "(TreeEnsembleRegressor/Classifier import into it)")
    .inputs(1)
    .attr("feature", IntList{})
    .attr("threshold", FloatList{})
    .attr("mode", IntList{})
    .attr("true_child", IntList{})
    .attr("false_child", IntList{})
    .attr("missing_true", IntList{})
    .attr("roots", IntList{})
    .attr("weight_node", IntList{})
    .attr("weight_id", IntList{})
    .attr("weight_value", FloatList{})
    .attr("base_values", FloatList{})
    .attr("outputs", int64_t(1))
    .attr("aggregate", int64_t(0))
    .attr("post", int64_t(0))
    .attr("classifier", int64_t(0))
    .infer([](InferCtx& c) {
      const Shape& xs = c.shapeOf(0);
      c.check(xs.rank() == 2, "x must be [N, F]");
      c.check(c.typeOf(0) == Type::float32 || c.typeOf(0) == Type::float64, "x must be float32 or float64");
      const int64_t n = static_cast<int64_t>(c.attrs.ints("feature").size()), K = c.attrs.i("outputs");
      c.check(K >= 1, "outputs must be positive");
      constexpr int64_t kMax = (int64_t(1) << 31) - 1;  // the kernel's node, feature and weight indices are int32
      c.check(n <= kMax && static_cast<int64_t>(c.attrs.ints("weight_node").size()) <= kMax, "more than ", kMax,
              " nodes or weights");
      c.check(static_cast<int64_t>(c.attrs.ints("mode").size()) == n &&
                  static_cast<int64_t>(c.attrs.floats("threshold").size()) == n &&
                  static_cast<int64_t>(c.attrs.ints("true_child").size()) == n &&
                  static_cast<int64_t>(c.attrs.ints("false_child").size()) == n &&
                  (c.attrs.ints("missing_true").empty() ||
                   static_cast<int64_t>(c.attrs.ints("missing_true").size()) == n),
              "the node attributes must have one entry per node (", n, ")");
      for(int64_t i = 0; i < n; ++i) {
        int64_t m = c.attrs.ints("mode")[static_cast<size_t>(i)];
        c.check(m >= 0 && m <= 6, "node ", i, " has mode ", m);
        if(m == 6) continue;
        int64_t f = c.attrs.ints("feature")[static_cast<size_t>(i)];
        c.check(f >= 0 && f < xs[1] && f <= kMax, "node ", i, " reads feature ", f, " of ", xs[1]);
        for(const char* side : {"true_child", "false_child"}) {
          int64_t ch = c.attrs.ints(side)[static_cast<size_t>(i)];
          c.check(ch >= 0 && ch < n, "node ", i, " has ", side, " ", ch, " out of range");
        }
      }
      for(int64_t r : c.attrs.ints("roots")) c.check(r >= 0 && r < n, "root ", r, " out of range");
      const IntList &wn = c.attrs.ints("weight_node"), &wi = c.attrs.ints("weight_id");
      c.check(wn.size() == wi.size() && wn.size() == c.attrs.floats("weight_value").size(),
              "weight_node, weight_id and weight_value must have the same length");
      for(size_t k = 0; k < wn.size(); ++k)
        c.check(wn[k] >= 0 && wn[k] < n && wi[k] >= 0 && wi[k] < K, "weight ", k, " is out of range");
      c.shape = Shape{xs[0], c.attrs.i("classifier") ? K + 1 : K};
      c.type = c.typeOf(0);
    })
    .cpu([](KernelCtx& c) {
      auto& state = c.node.kernelState();
      if(!state) state = flatten(c.attrs, c.node);
      const Flat& f = *std::static_pointer_cast<Flat>(state);
      const TensorBase& x = *c.in[0];
      const int64_t N = x.shape()[0], F = x.shape()[1];
      if(x.type() == Type::float64) evaluate(f, x.data<double>(), N, F, c.out.data<double>());
      else evaluate(f, x.data<float>(), N, F, c.out.data<float>());
    })
    .gpuOnHost("no GPU form yet: trees are walked on the host (a GPU kernel per row block would come with a GPU to "
               "measure it on)")
    .notDifferentiable("piecewise constant in x (trees)")
    .noOnnx("internal: the import of TreeEnsembleRegressor/Classifier; exporting it back is not supported yet");

Expr tree_ensemble(Expr x, const TreeEnsembleSpec& s) {
  auto ints = [](const std::vector<int64_t>& v) { return AttrValue(IntList(v.begin(), v.end())); };
  std::vector<std::pair<std::string, AttrValue>> attrs = {
      {"feature", ints(s.feature)},
      {"threshold", AttrValue(FloatList(s.threshold))},
      {"mode", ints(s.mode)},
      {"true_child", ints(s.trueChild)},
      {"false_child", ints(s.falseChild)},
      {"missing_true", ints(s.missingTrue)},
      {"roots", ints(s.roots)},
      {"weight_node", ints(s.weightNode)},
      {"weight_id", ints(s.weightId)},
      {"weight_value", AttrValue(FloatList(s.weightValue))},
      {"base_values", AttrValue(FloatList(s.baseValues))},
      {"outputs", AttrValue(s.outputs)},
      {"aggregate", AttrValue(int64_t(s.aggregate))},
      {"post", AttrValue(int64_t(static_cast<int>(s.post)))},
      {"classifier", AttrValue(int64_t(s.classifier ? 1 : 0))}};
  return x->graph()->make(kTreeEnsemble, std::vector<Expr>{x}, attrs);
}

}  // namespace onyx
