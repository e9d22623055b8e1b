#include <onyx/train/optimizers.h>

#include <cmath>

#include <onyx/backend/cpu/parallel.h>
#include <onyx/core/device_backend.h>
#include <onyx/core/dispatch.h>
#include <onyx/graph/expression_graph.h>

namespace onyx {

double OptimizerBase::update(Ptr<ExpressionGraph> graph) {
  ONYX_CHECK(graph, "Optimizer::update: null graph");
  return update(*graph);
}

namespace {
// Sum of the squares of a host gradient's elements, in double.
double sumSquares(const TensorBase& g) {
  double sq = 0;
  dispatchFloat(g.type(), "optimizer", [&](auto tag) {
    using T = typename decltype(tag)::type;
    const T* p = g.data<T>();
    for(int64_t i = 0; i < g.size(); ++i) {
      double v = static_cast<double>(static_cast<typename ComputeOf<T>::type>(p[i]));
      sq += v * v;
    }
  });
  return sq;
}
}  // namespace

double OptimizerBase::update(ExpressionGraph& graph) {
  double norm = 0;
  updateWith(graph, 1.0, &norm, false);  // non-finite gradients step too: no loss scale to back off
  return norm;
}

bool OptimizerBase::updateIfFinite(ExpressionGraph& graph, double gradScale, double* norm) {
  return updateWith(graph, gradScale, norm, true);
}

bool OptimizerBase::updateWith(ExpressionGraph& graph, double gradScale, double* normOut, bool skipNonFinite) {
  // Global L2 norm over all trainable gradients, for clipping and reporting.
  double sq = 0;
  std::vector<Expr> params;
  std::map<size_t, std::vector<DeviceBackend::Squares>> onGpu;  // by device: one read-back each
  for(auto& p : *graph.params()) {
    if(!p->trainable()) continue;
    ONYX_CHECK(p->grad(), "Optimizer::update: param '", p->name(), "' has no gradient; run backward() first");
    ONYX_CHECK(isFloat(p->value_type()), "Optimizer::update: param '", p->name(), "' has type ", p->value_type(),
               "; only float params can be trained");
    const TensorBase& g = *p->grad();
    if(g.onHost()) sq += sumSquares(g);
    else onGpu[g.getDeviceId().no].push_back({g.type(), g.raw(), g.size()});
    params.push_back(p);
  }
  for(const auto& kv : onGpu) sq += gpuBackend().sumSquares(kv.first, kv.second);
  double norm = std::sqrt(sq) * std::fabs(gradScale);
  if(normOut) *normOut = norm;
  if(skipNonFinite && !std::isfinite(norm)) return false;
  double scale = gradScale * ((opt_.clipNorm > 0 && norm > opt_.clipNorm) ? opt_.clipNorm / norm : 1.0);
  ++step_;
  for(auto& p : params) updateParam(p->name(), *p->val(), *p->grad(), scale);
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

void OptimizerBase::step(const std::string& name, TensorBase& value, const TensorBase& grad, const UpdateRule& rule) {
  ONYX_ASSERT(value.getDeviceId() == grad.getDeviceId() && value.type() == grad.type() &&
                  value.shape() == grad.shape(),
              "param '", name, "' (", value.type(), " ", value.shape(), " on ", value.getDeviceId().toString(),
              ") and its gradient (", grad.type(), " ", grad.shape(), " on ", grad.getDeviceId().toString(),
              ") differ");
  float* s[2] = {nullptr, nullptr};
  for(int k = 0; k < rule.slots(); ++k) s[k] = slot(name, rule.slotName(k), value)->data<float>();
  bool half = value.type() == Type::float16 || value.type() == Type::bfloat16;
  float* m = half && opt_.masterWeights ? master(name, value)->data<float>() : nullptr;
  if(!value.onHost()) {
    gpuBackend().optimizerStep(value.getDeviceId().no, value.type(), rule, value.raw(), grad.raw(), m, s[0], s[1],
                               value.size());
    return;
  }
  dispatchFloat(value.type(), "optimizer", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* w = value.data<T>();
    const T* g = grad.data<T>();
    int64_t n = value.size();
    host::parallelFor(n, n * 4, [&](int64_t b, int64_t e) {
      for(int64_t i = b; i < e; ++i) updateElement(rule, i, w, g, m, s[0], s[1]);
    });
  });
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

void Sgd::updateParam(const std::string& name, TensorBase& value, const TensorBase& grad, double scale) {
  step(name, value, grad, ruleFor(opt_.momentum == 0 ? UpdateRule::sgd : UpdateRule::momentum, opt_, scale));
}

void Adagrad::updateParam(const std::string& name, TensorBase& value, const TensorBase& grad, double scale) {
  step(name, value, grad, ruleFor(UpdateRule::adagrad, opt_, scale));
}

void Adam::updateParam(const std::string& name, TensorBase& value, const TensorBase& grad, double scale) {
  UpdateRule r = ruleFor(UpdateRule::adam, opt_, scale);
  double t = static_cast<double>(step_);
  r.c1 = 1 - std::pow(opt_.beta1, t);
  r.c2 = 1 - std::pow(opt_.beta2, t);
  step(name, value, grad, r);
}

void AdamW::updateParam(const std::string& name, TensorBase& value, const TensorBase& grad, double scale) {
  UpdateRule r = ruleFor(UpdateRule::adamw, opt_, scale);
  double t = static_cast<double>(step_);
  r.c1 = 1 - std::pow(opt_.beta1, t);
  r.c2 = 1 - std::pow(opt_.beta2, t);
  step(name, value, grad, r);
}

}  // namespace onyx
