#include <onyx/train/accumulate.h>

#include <onyx/graph/expression_graph.h>

namespace onyx {

void GradAccumulator::add(ExpressionGraph& graph, double weight) {
  for(Expr p : *graph.params()) {
    if(!p->trainable() || !p->grad()) continue;
    // The sums stay on the host in double; a gradient on a GPU is read
    // through a host copy.
    const Tensor g = p->grad()->onHost() ? p->grad() : p->grad()->hostCopy();
    Tensor& sum = sums_[p->name()];
    if(!sum) {
      sum = TensorBase::create(g->shape(), Type::float64);
      sum->set(0.0);
    }
    ONYX_CHECK(sum->shape() == g->shape(), "GradAccumulator: param '", p->name(), "' changed shape from ",
               sum->shape(), " to ", g->shape(), " between micro-batches");
    double* s = sum->data<double>();
    const int64_t n = g->size();
    if(g->type() == Type::float32) {
      const float* v = g->data<float>();
      for(int64_t i = 0; i < n; ++i) s[i] += weight * static_cast<double>(v[i]);
    } else {
      for(int64_t i = 0; i < n; ++i) s[i] += weight * g->getAsDouble(i);
    }
  }
  ++count_;
}

void GradAccumulator::apply(ExpressionGraph& graph) {
  ONYX_CHECK(count_ > 0, "GradAccumulator::apply: no micro-batch was added");
  for(Expr p : *graph.params()) {
    auto it = sums_.find(p->name());
    if(it == sums_.end() || !p->trainable()) continue;
    Tensor& grad = p->grad();
    if(!grad) grad = TensorBase::create(p->shape(), p->value_type(), p->val()->getDeviceId());
    // Written on the host, then copied to the param's device if it is a GPU.
    Tensor g = grad->onHost() ? grad : TensorBase::create(grad->shape(), grad->type());
    const double* s = it->second->data<double>();
    const int64_t n = g->size();
    if(g->type() == Type::float32) {
      float* v = g->data<float>();
      for(int64_t i = 0; i < n; ++i) v[i] = static_cast<float>(s[i]);
    } else {
      std::vector<double> all(s, s + n);
      g->set(all);
    }
    if(g != grad) grad->copyFrom(*g);
  }
  sums_.clear();
  count_ = 0;
}

}  // namespace onyx
