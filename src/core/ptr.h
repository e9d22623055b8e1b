#pragma once
#include <memory>
#include <utility>

namespace onyx {

// Shared ownership for long-lived objects (graphs, tensors, optimizers).
// Graph nodes are NOT held this way: they live in the graph's arena (see Expr).
template <class T>
using Ptr = std::shared_ptr<T>;

template <class T, class... Args>
Ptr<T> New(Args&&... args) {
  return std::make_shared<T>(std::forward<Args>(args)...);
}

}  // namespace onyx
