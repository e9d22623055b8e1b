// Element-wise expression operators (src/ops/elementwise.cpp).
#pragma once
#include <onyx/graph/node.h>

namespace onyx {

// Arithmetic with ONNX/numpy broadcasting; scalar forms use a rank-0 constant
// of the tensor's element type.
Expr operator+(Expr a, Expr b);
Expr operator-(Expr a, Expr b);
Expr operator*(Expr a, Expr b);
Expr operator/(Expr a, Expr b);
Expr operator+(Expr a, double b);
Expr operator+(double a, Expr b);
Expr operator-(Expr a, double b);
Expr operator-(double a, Expr b);
Expr operator*(Expr a, double b);
Expr operator*(double a, Expr b);
Expr operator/(Expr a, double b);
Expr operator/(double a, Expr b);
Expr operator-(Expr a);
Expr plus(Expr a, Expr b);
Expr minus(Expr a, Expr b);
Expr mul(Expr a, Expr b);
Expr div(Expr a, Expr b);
Expr neg(Expr a);

Expr abs(Expr x);
Expr sign(Expr x);
Expr sin(Expr x);
Expr cos(Expr x);

// Element type conversion.
Expr cast(Expr x, Type to);

}  // namespace onyx
