#include <onyx/train/optimizers.h>

#include <cmath>

#include <onyx/backend/cpu/parallel.h>
#include <onyx/core/dispatch.h>
#include <onyx/graph/expression_graph.h>

namespace onyx {

double OptimizerBase::update(Ptr<ExpressionGraph> graph) {
  ONYX_CHECK(graph, "Optimizer::update: null graph");
  return update(*graph);
}

double OptimizerBase::update(ExpressionGraph& graph) {
  // Global L2 norm over all trainable gradients, for clipping and reporting.
  double sq = 0;
  std::vector<Expr> params;
  for(auto& p : *graph.params()) {
    if(!p->trainable()) continue;
    ONYX_CHECK(p->grad(), "Optimizer::update: param '", p->name(), "' has no gradient; run backward() first");
    ONYX_CHECK(isFloat(p->value_type()), "Optimizer::update: param '", p->name(), "' has type ", p->value_type(),
               "; only float params can be trained");
    const TensorBase& g = *p->grad();
    for(int64_t i = 0; i < g.size(); ++i) {
      double v = g.getAsDouble(i);
      sq += v * v;
    }
    params.push_back(p);
  }
  double norm = std::sqrt(sq);
  double scale = (opt_.clipNorm > 0 && norm > opt_.clipNorm) ? opt_.clipNorm / norm : 1.0;
  ++step_;
  for(auto& p : params) updateParam(p->name(), *p->val(), *p->grad(), scale);
  return norm;
}

Tensor& OptimizerBase::slot(const std::string& param, const std::string& slot, const TensorBase& like) {
  Tensor& t = state_[param + "/" + slot];
  if(!t || t->shape() != like.shape()) {
    t = TensorBase::create(like.shape(), Type::float32, like.getDeviceId());
    t->set(0.0);
  }
  return t;
}

namespace {
// Applies fn(i, w, g) -> new w over all elements, in float math (double
// for float64 params).
template <class Fn>
void forEach(TensorBase& value, const TensorBase& grad, double scale, Fn fn) {
  dispatchFloat(value.type(), "optimizer", [&](auto tag) {
    using T = typename decltype(tag)::type;
    T* w = value.data<T>();
    const T* g = grad.data<T>();
    int64_t n = value.size();
    host::parallelFor(n, n * 4, [&](int64_t b, int64_t e) {
      for(int64_t i = b; i < e; ++i) {
        double wi = static_cast<double>(static_cast<typename ComputeOf<T>::type>(w[i]));
        double gi = static_cast<double>(static_cast<typename ComputeOf<T>::type>(g[i])) * scale;
        w[i] = static_cast<T>(static_cast<typename ComputeOf<T>::type>(fn(i, wi, gi)));
      }
    });
  });
}
}  // namespace

void Sgd::updateParam(const std::string& name, TensorBase& value, const TensorBase& grad, double scale) {
  double lr = opt_.lr, mu = opt_.momentum, wd = opt_.weightDecay;
  if(mu == 0) {
    forEach(value, grad, scale, [&](int64_t, double w, double g) { return w - lr * (g + wd * w); });
    return;
  }
  float* v = slot(name, "momentum", value)->data<float>();
  forEach(value, grad, scale, [&](int64_t i, double w, double g) {
    double m = mu * v[i] + (g + wd * w);
    v[i] = static_cast<float>(m);
    return w - lr * m;
  });
}

void Adagrad::updateParam(const std::string& name, TensorBase& value, const TensorBase& grad, double scale) {
  double lr = opt_.lr, eps = opt_.adagradEps, wd = opt_.weightDecay;
  float* acc = slot(name, "sum_sq", value)->data<float>();
  forEach(value, grad, scale, [&](int64_t i, double w, double g) {
    g += wd * w;
    double a = acc[i] + g * g;
    acc[i] = static_cast<float>(a);
    return w - lr * g / (std::sqrt(a) + eps);
  });
}

void Adam::updateParam(const std::string& name, TensorBase& value, const TensorBase& grad, double scale) {
  double lr = opt_.lr, b1 = opt_.beta1, b2 = opt_.beta2, eps = opt_.eps, wd = opt_.weightDecay;
  float* m = slot(name, "m", value)->data<float>();
  float* v = slot(name, "v", value)->data<float>();
  double t = static_cast<double>(step_);
  double c1 = 1 - std::pow(b1, t), c2 = 1 - std::pow(b2, t);
  forEach(value, grad, scale, [&](int64_t i, double w, double g) {
    g += wd * w;
    double mi = b1 * m[i] + (1 - b1) * g;
    double vi = b2 * v[i] + (1 - b2) * g * g;
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    return w - lr * (mi / c1) / (std::sqrt(vi / c2) + eps);
  });
}

void AdamW::updateParam(const std::string& name, TensorBase& value, const TensorBase& grad, double scale) {
  double lr = opt_.lr, b1 = opt_.beta1, b2 = opt_.beta2, eps = opt_.eps, wd = opt_.weightDecay;
  float* m = slot(name, "m", value)->data<float>();
  float* v = slot(name, "v", value)->data<float>();
  double t = static_cast<double>(step_);
  double c1 = 1 - std::pow(b1, t), c2 = 1 - std::pow(b2, t);
  forEach(value, grad, scale, [&](int64_t i, double w, double g) {
    double mi = b1 * m[i] + (1 - b1) * g;
    double vi = b2 * v[i] + (1 - b2) * g * g;
    m[i] = static_cast<float>(mi);
    v[i] = static_cast<float>(vi);
    return w - lr * wd * w - lr * (mi / c1) / (std::sqrt(vi / c2) + eps);
  });
}

}  // namespace onyx
