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

// x^y; both inputs differentiable (the exponent's gradient uses log(x), so
// it needs x > 0).
Expr pow(Expr x, Expr y);
Expr pow(Expr x, double y);
Expr pow(double x, Expr y);
// Element-wise min/max with broadcasting. At ties the gradient goes to the
// first input.
Expr minimum(Expr a, Expr b);
Expr minimum(Expr a, double b);
Expr minimum(double a, Expr b);
Expr maximum(Expr a, Expr b);
Expr maximum(Expr a, double b);
Expr maximum(double a, Expr b);

// Math functions. They overload the std names for Expr arguments.
Expr abs(Expr x);
Expr sign(Expr x);
Expr sin(Expr x);
Expr cos(Expr x);
Expr tan(Expr x);
Expr exp(Expr x);
Expr log(Expr x);
Expr sqrt(Expr x);
Expr reciprocal(Expr x);
Expr erf(Expr x);

// Activations.
Expr tanh(Expr x);
Expr sigmoid(Expr x);
Expr relu(Expr x);
Expr leaky_relu(Expr x, float alpha = 0.01f);
Expr elu(Expr x, float alpha = 1.f);
Expr selu(Expr x);  // ONNX's alpha and gamma
// Exact x * Phi(x) with the normal CDF Phi, or the tanh approximation.
Expr gelu(Expr x, bool tanhApprox = false);
Expr swish(Expr x);  // x * sigmoid(x), also called SiLU
Expr softplus(Expr x);
// min(max(x, lo), hi); the gradient passes where lo < x < hi.
Expr clip(Expr x, double lo, double hi);

// Comparisons with broadcasting; the result is bool.
Expr lt(Expr a, Expr b);
Expr le(Expr a, Expr b);
Expr gt(Expr a, Expr b);
Expr ge(Expr a, Expr b);
Expr eq(Expr a, Expr b);
Expr ne(Expr a, Expr b);
Expr lt(Expr a, double b);
Expr le(Expr a, double b);
Expr gt(Expr a, double b);
Expr ge(Expr a, double b);
Expr eq(Expr a, double b);
Expr ne(Expr a, double b);

// Logic on bool tensors, with broadcasting.
Expr logical_and(Expr a, Expr b);
Expr logical_or(Expr a, Expr b);
Expr logical_xor(Expr a, Expr b);
Expr logical_not(Expr a);

// cond ? a : b element-wise, all three broadcast; cond is bool. Gradients go
// to a where cond holds and to b elsewhere.
Expr where(Expr cond, Expr a, Expr b);
Expr where(Expr cond, Expr a, double b);
Expr where(Expr cond, double a, Expr b);

// Element type conversion.
Expr cast(Expr x, Type to);

}  // namespace onyx
