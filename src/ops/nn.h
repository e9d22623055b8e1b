// Expression operators of src/ops/nn.cpp.
#pragma once
#include <vector>

#include <onyx/graph/node.h>

namespace onyx {

}  // namespace onyx
