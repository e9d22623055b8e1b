// Layout (src/ops/layout.cpp): x's elements moved to new positions, whole.
// Every op here moves elements without arithmetic, so all element types work
// (bool and integers included). Negative axes count from the end.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <onyx/graph/node.h>

namespace onyx {

// Output dim i is input dim perm[i]; an empty perm reverses the dims (ONNX).
Expr transpose(Expr x, const std::vector<int>& perm = {});

// Joins tensors of one type and rank along `axis` (other dims must match);
// split (slicing.h) is its inverse.
Expr concat(const std::vector<Expr>& xs, int axis);

// ONNX DepthToSpace on NCHW: mode "DCR" (depth-column-row) or "CRD"; and
// its inverse SpaceToDepth (mode from opset 28).
Expr depth_to_space(Expr x, int64_t blocksize, const std::string& mode = "DCR");
Expr space_to_depth(Expr x, int64_t blocksize, const std::string& mode = "DCR");

}  // namespace onyx
