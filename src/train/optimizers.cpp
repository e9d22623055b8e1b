#include <onyx/train/optimizers.h>

#include <algorithm>
#include <cmath>

#include <onyx/backend/cpu/element.h>  // host::sumInFour
#include <onyx/backend/cpu/parallel.h>
#include <onyx/core/device_backend.h>
#include <onyx/core/dispatch.h>
#include <onyx/graph/expression_graph.h>

namespace onyx {

Ptr<OptimizerBase> optimizerByName(const std::string& name, const OptimizerOptions& o) {
  if(name == "sgd") return Optimizer<Sgd>(o);
  if(name == "adagrad") return Optimizer<Adagrad>(o);
  if(name == "adam") return Optimizer<Adam>(o);
  if(name == "adamw") return Optimizer<AdamW>(o);
  return nullptr;
}

double OptimizerBase::update(Ptr<ExpressionGraph> graph) {
  ONYX_CHECK(graph, "Optimizer::update: null graph");
  return update(*graph);
}

double OptimizerBase::update(ExpressionGraph& graph) {
  double norm = 0;
  updateWith(graph, 1.0, &norm, false);  // non-finite gradients step too: no loss scale to back off
  return norm;
}

bool OptimizerBase::updateIfFinite(ExpressionGraph& graph, double gradScale, double* norm) {
  return updateWith(graph, gradScale, norm, true);
}

namespace {

// One param's step: its name, weights, gradient, state slots and master copy.
struct HostParam {
  const std::string* name;
  TensorBase* w;
  const TensorBase* g;
  float* s0;
  float* s1;
  float* master;
};

// The host params as pieces of at most kPiece elements: one parallel loop
// over all of them (a ResNet's 62 params, most of them small, are one
// region, not 62), and each piece's sum of squares kept apart and added in
// piece order, so the norm does not depend on the thread count.
constexpr int64_t kPiece = 1 << 15;
struct Piece {
  size_t param;
  int64_t begin, end;
};

std::vector<Piece> piecesOf(const std::vector<HostParam>& ps) {
  std::vector<Piece> pieces;
  for(size_t k = 0; k < ps.size(); ++k)
    for(int64_t b = 0, n = ps[k].w->size(); b < n; b += kPiece) pieces.push_back({k, b, std::min(n, b + kPiece)});
  return pieces;
}

// Sum of the squares of g[b, e) in double: eight partial sums, which the
// compiler keeps in vector registers (four scalar chains were a tenth of
// an MLP's training step), added in a fixed order.
template <class T>
double squares(const T* g, int64_t b, int64_t e) {
  using C = typename ComputeOf<T>::type;
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  const T* p = g + b;
  const int64_t n = e - b;
  int64_t j = 0;
  for(; j + 8 <= n; j += 8)
    for(int k = 0; k < 8; ++k) {
      const double v = static_cast<double>(static_cast<C>(p[j + k]));
      acc[k] += v * v;
    }
  for(; j < n; ++j) {
    const double v = static_cast<double>(static_cast<C>(p[j]));
    acc[0] += v * v;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

// Elements [b, e) of one param under rule kind K; with `sq`, the squares of
// the gradients (as stored, before the rule's scale) summed in the same pass.
template <UpdateRule::Kind K, class T>
void stepRange(const UpdateRule& r, const HostParam& p, int64_t b, int64_t e, double* sq) {
  using C = typename ComputeOf<T>::type;
  T* w = p.w->data<T>();
  const T* g = p.g->data<T>();
  float* m = p.master;
  if(sq) *sq = squares(g, b, e);
  // The slots the kind uses (applyAs reads no other); the loops branch on
  // nothing per element, so they vectorize (omp simd: w, g and the slots
  // never overlap).
  constexpr bool one = K != UpdateRule::sgd;
  constexpr bool two = K == UpdateRule::adam || K == UpdateRule::adamw;
  float* s0 = p.s0;
  float* s1 = p.s1;
  if(m) {
#pragma omp simd
    for(int64_t i = b; i < e; ++i) {
      double nw = r.applyAs<K>(static_cast<double>(m[i]), static_cast<double>(static_cast<C>(g[i])),
                               one ? s0 + i : nullptr, two ? s1 + i : nullptr);
      m[i] = static_cast<float>(nw);
      w[i] = static_cast<T>(static_cast<C>(nw));
    }
  } else {
#pragma omp simd
    for(int64_t i = b; i < e; ++i) {
      double nw = r.applyAs<K>(static_cast<double>(static_cast<C>(w[i])), static_cast<double>(static_cast<C>(g[i])),
                               one ? s0 + i : nullptr, two ? s1 + i : nullptr);
      w[i] = static_cast<T>(static_cast<C>(nw));
    }
  }
}

template <UpdateRule::Kind K>
void stepPiece(const UpdateRule& r, const HostParam& p, const Piece& piece, double* sq) {
  dispatchFloat(p.w->type(), "optimizer", [&](auto tag) {
    stepRange<K, typename decltype(tag)::type>(r, p, piece.begin, piece.end, sq);
  });
}

// The sum of the squares of all host gradients.
double hostSquares(const std::vector<HostParam>& ps, const std::vector<Piece>& pieces, int64_t elements) {
  std::vector<double> part(pieces.size());
  host::parallelFor(static_cast<int64_t>(pieces.size()), elements, [&](int64_t b, int64_t e) {
    for(int64_t k = b; k < e; ++k) {
      const Piece& pc = pieces[static_cast<size_t>(k)];
      const TensorBase& g = *ps[pc.param].g;
      dispatchFloat(g.type(), "optimizer", [&](auto tag) {
        part[static_cast<size_t>(k)] = squares(g.data<typename decltype(tag)::type>(), pc.begin, pc.end);
      });
    }
  });
  double sq = 0;
  for(double v : part) sq += v;
  return sq;
}

// One step of every host param in one parallel pass; with `sq`, the sum of
// the squares of the gradients read on the way.
void hostStep(const UpdateRule& r, const std::vector<HostParam>& ps, const std::vector<Piece>& pieces,
              int64_t elements, double* sq) {
  std::vector<double> part(sq ? pieces.size() : 0);
  host::parallelFor(static_cast<int64_t>(pieces.size()), elements * 4, [&](int64_t b, int64_t e) {
    for(int64_t k = b; k < e; ++k) {
      const Piece& pc = pieces[static_cast<size_t>(k)];
      double* out = sq ? &part[static_cast<size_t>(k)] : nullptr;
      const HostParam& p = ps[pc.param];
      switch(r.kind) {
        case UpdateRule::sgd: stepPiece<UpdateRule::sgd>(r, p, pc, out); break;
        case UpdateRule::momentum: stepPiece<UpdateRule::momentum>(r, p, pc, out); break;
        case UpdateRule::adagrad: stepPiece<UpdateRule::adagrad>(r, p, pc, out); break;
        case UpdateRule::adam: stepPiece<UpdateRule::adam>(r, p, pc, out); break;
        case UpdateRule::adamw: stepPiece<UpdateRule::adamw>(r, p, pc, out); break;
      }
    }
  });
  if(sq) {
    *sq = 0;
    for(double v : part) *sq += v;
  }
}

}  // namespace

bool OptimizerBase::updateWith(ExpressionGraph& graph, double gradScale, double* normOut, bool skipNonFinite) {
  std::vector<HostParam> host, gpu;
  int64_t hostElements = 0;
  for(auto& p : *graph.params()) {
    if(!p->trainable()) continue;
    ONYX_CHECK(p->grad(), "Optimizer::update: param '", p->name(), "' has no gradient; run backward() first");
    ONYX_CHECK(isFloat(p->value_type()), "Optimizer::update: param '", p->name(), "' has type ", p->value_type(),
               "; only float params can be trained");
    HostParam hp{&p->name(), p->val().get(), p->grad().get(), nullptr, nullptr, nullptr};
    const TensorBase &v = *hp.w, &g = *hp.g;
    ONYX_ASSERT(v.getDeviceId() == g.getDeviceId() && v.type() == g.type() && v.shape() == g.shape(), "param '",
                p->name(), "' (", v.type(), " ", v.shape(), " on ", v.getDeviceId().toString(), ") and its gradient (",
                g.type(), " ", g.shape(), " on ", g.getDeviceId().toString(), ") differ");
    if(v.onHost()) {
      host.push_back(hp);
      hostElements += v.size();
    } else {
      gpu.push_back(hp);
    }
  }
  std::vector<Piece> pieces = piecesOf(host);

  // Global L2 norm over all trainable gradients, for clipping, the
  // non-finite check and reporting. With neither clipping nor the check it
  // needs no pass of its own: the step's pass sums the squares.
  const bool normFirst = skipNonFinite || opt_.clipNorm > 0;
  double gpuSq = 0;
  if(!gpu.empty()) {
    std::map<size_t, std::vector<DeviceBackend::Squares>> onGpu;  // by device: one read-back each
    for(const auto& p : gpu) onGpu[p.g->getDeviceId().no].push_back({p.g->type(), p.g->raw(), p.g->size()});
    for(const auto& kv : onGpu) gpuSq += gpuBackend().sumSquares(kv.first, kv.second);
  }
  double hostSq = normFirst ? hostSquares(host, pieces, hostElements) : 0;
  double scale = gradScale;
  if(normFirst) {
    double norm = std::sqrt(hostSq + gpuSq) * std::fabs(gradScale);
    if(normOut) *normOut = norm;
    if(skipNonFinite && !std::isfinite(norm)) return false;
    if(opt_.clipNorm > 0 && norm > opt_.clipNorm) scale *= opt_.clipNorm / norm;
  }
  ++step_;
  const UpdateRule r = rule(scale);
  // The state slots and master copies, made on a param's first step (not on
  // a skipped one), exist before the parallel pass.
  for(auto* list : {&host, &gpu})
    for(HostParam& p : *list) {
      float* s[2] = {nullptr, nullptr};
      for(int k = 0; k < r.slots(); ++k) s[k] = slot(*p.name, r.slotName(k), *p.w)->data<float>();
      p.s0 = s[0];
      p.s1 = s[1];
      bool half = p.w->type() == Type::float16 || p.w->type() == Type::bfloat16;
      if(half && opt_.masterWeights) p.master = master(*p.name, *p.w)->data<float>();
    }
  for(const auto& p : gpu) {
    gpuBackend().optimizerStep(p.w->getDeviceId().no, p.w->type(), r, p.w->raw(), p.g->raw(), p.master, p.s0, p.s1,
                               p.w->size());
  }
  hostStep(r, host, pieces, hostElements, normFirst ? nullptr : &hostSq);
  if(!normFirst && normOut) *normOut = std::sqrt(hostSq + gpuSq) * std::fabs(gradScale);
  return true;
}

Tensor& OptimizerBase::slot(const std::string& param, const std::string& slot, const TensorBase& like) {
  Tensor& t = state_[param + "/" + slot];
  if(!t || t->shape() != like.shape()) {
    t = TensorBase::create(like.shape(), Type::float32, like.getDeviceId());
    t->set(0.0);
  }
  return t;
}

Tensor& OptimizerBase::master(const std::string& param, const TensorBase& value) {
  Tensor& t = state_[param + "/master"];
  if(!t || t->shape() != value.shape()) {
    // The param's values in float32 (exact: every float16/bfloat16 is a float32).
    Tensor src = value.onHost() ? Tensor() : value.hostCopy();
    const TensorBase& v = src ? *src : value;
    Tensor h = TensorBase::create(value.shape(), Type::float32);
    float* m = h->data<float>();
    for(int64_t i = 0; i < v.size(); ++i) m[i] = static_cast<float>(v.getAsDouble(i));
    if(value.onHost()) t = h;
    else {
      t = TensorBase::create(value.shape(), Type::float32, value.getDeviceId());
      t->copyFrom(*h);
    }
  }
  return t;
}

namespace {
UpdateRule ruleFor(UpdateRule::Kind kind, const OptimizerOptions& o, double scale) {
  UpdateRule r;
  r.kind = kind;
  r.lr = o.lr;
  r.mu = o.momentum;
  r.beta1 = o.beta1;
  r.beta2 = o.beta2;
  r.eps = kind == UpdateRule::adagrad ? o.adagradEps : o.eps;
  r.weightDecay = o.weightDecay;
  r.gradScale = scale;
  return r;
}
}  // namespace

UpdateRule Sgd::rule(double scale) const {
  return ruleFor(opt_.momentum == 0 ? UpdateRule::sgd : UpdateRule::momentum, opt_, scale);
}

UpdateRule Adagrad::rule(double scale) const { return ruleFor(UpdateRule::adagrad, opt_, scale); }

namespace {
// Adam's rule with the bias corrections of step t.
UpdateRule adamRule(UpdateRule::Kind kind, const OptimizerOptions& o, double scale, size_t step) {
  UpdateRule r = ruleFor(kind, o, scale);
  double t = static_cast<double>(step);
  r.c1 = 1 - std::pow(o.beta1, t);
  r.c2 = 1 - std::pow(o.beta2, t);
  return r;
}
}  // namespace

UpdateRule Adam::rule(double scale) const { return adamRule(UpdateRule::adam, opt_, scale, step_); }

UpdateRule AdamW::rule(double scale) const { return adamRule(UpdateRule::adamw, opt_, scale, step_); }

}  // namespace onyx
