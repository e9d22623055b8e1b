// Element-wise expression operators: one header for the element-wise
// families of src/ops, in sections named for the file that defines them.
#pragma once
#include <onyx/graph/node.h>
#include <onyx/graph/onnx_rule.h>

namespace onyx {

// ---- arithmetic.cpp

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

// a mod b with broadcasting: the result has b's sign (Python's %), or a's
// with fmod (C's fmod and %). Integer b = 0 gives 0.
Expr mod(Expr a, Expr b, bool fmod = false);

// They overload the std names for Expr arguments.
Expr abs(Expr x);
Expr sign(Expr x);
Expr reciprocal(Expr x);
// Rounding; the gradient is 0 (almost everywhere). round() takes halfway
// cases to the even neighbour, as ONNX's Round.
Expr floor(Expr x);
Expr ceil(Expr x);
Expr round(Expr x);

// ---- math.cpp

// Math functions on float tensors. They overload the std names for Expr
// arguments.
Expr sin(Expr x);
Expr cos(Expr x);
Expr tan(Expr x);
Expr exp(Expr x);
Expr log(Expr x);
Expr sqrt(Expr x);
Expr erf(Expr x);
Expr acos(Expr x);
Expr asin(Expr x);
Expr atan(Expr x);
Expr sinh(Expr x);
Expr cosh(Expr x);
Expr asinh(Expr x);
Expr acosh(Expr x);
Expr atanh(Expr x);

// ---- activations.cpp

Expr tanh(Expr x);
Expr sigmoid(Expr x);
Expr relu(Expr x);
Expr relu_grad(Expr dy, Expr x);  // dy where x > 0, else 0: relu's gradient
Expr leaky_relu(Expr x, float alpha = 0.01f);
Expr elu(Expr x, float alpha = 1.f);
Expr selu(Expr x);  // ONNX's alpha and gamma
// Exact x * Phi(x) with the normal CDF Phi, or the tanh approximation.
Expr gelu(Expr x, bool tanhApprox = false);
Expr gelu_grad(Expr dy, Expr x, bool tanhApprox = false);  // dy * gelu'(x): gelu's gradient
Expr swish(Expr x);  // x * sigmoid(x), also called SiLU
Expr softplus(Expr x);
Expr softsign(Expr x);                                          // x / (1 + |x|)
Expr hard_sigmoid(Expr x, float alpha = 0.2f, float beta = 0.5f);  // max(0, min(1, alpha x + beta))
Expr hard_swish(Expr x);                                        // x * hard_sigmoid(x, 1/6, 1/2)
Expr mish(Expr x);                                              // x * tanh(softplus(x))
Expr thresholded_relu(Expr x, float alpha = 1.f);               // x if x > alpha else 0
Expr celu(Expr x, float alpha = 1.f);  // max(0, x) + min(0, alpha (e^(x/alpha) - 1))
// x if x >= 0 else slope * x; slope broadcasts to x's shape.
Expr prelu(Expr x, Expr slope);
// x + bias if x < -lambd, x - bias if x > lambd, else 0.
Expr shrink(Expr x, float lambd = 0.5f, float bias = 0.f);
// min(max(x, lo), hi); the gradient passes where lo < x < hi.
Expr clip(Expr x, double lo, double hi);

// ---- logic.cpp

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
// to a where cond holds and to b elsewhere. A backward rule masks its
// gradient with where(mask, dy, 0.0): the result has the broadcast shape of
// mask and dy, which GradCtx::add sums down to the input's.
Expr where(Expr cond, Expr a, Expr b);
Expr where(Expr cond, Expr a, double b);
Expr where(Expr cond, double a, Expr b);

// NaN/Inf tests on float tensors; the result is bool.
Expr is_nan(Expr x);
Expr is_inf(Expr x, bool detectNegative = true, bool detectPositive = true);

// Bitwise ops on integer tensors, with broadcasting. Shifts by a negative
// amount or by the bit width or more give 0 (-1 for a right shift of a
// negative value).
Expr bit_shift(Expr a, Expr b, bool left);
Expr bitwise_and(Expr a, Expr b);
Expr bitwise_or(Expr a, Expr b);
Expr bitwise_xor(Expr a, Expr b);
Expr bitwise_not(Expr a);

// ---- conversion.cpp

// Element type conversion (any numeric type, the storage-only float8/float4/
// int4/int2 ones included). Into float8 types, out-of-range values saturate
// to the largest finite value, or with saturate=false become NaN (inf for
// float8e5m2); roundMode steers float8e8m0 targets.
Expr cast(Expr x, Type to);
Expr cast(Expr x, Type to, bool saturate, E8M0Round roundMode = E8M0Round::up);
// ONNX BitCast: x's bytes read as element type `to`, which must have x's bit
// width (bool counts as 8 bits); same shape. Not differentiable.
Expr bitcast(Expr x, Type to);

// ---- ONNX import helpers, shared by the import rules of the element-wise
// families and the composites of converters/import_elementwise.cpp.

// Folds the ONNX node's inputs (1..n, broadcasting) with a binary op: the
// import of the variadic Sum, Mean, Max and Min (arithmetic.cpp).
Expr foldInputs(OnnxImportCtx& c, Expr (*f)(Expr, Expr));
// Cast / CastLike to `to`: saturate (19+) and round_mode (24+) steer the
// float8 targets (conversion.cpp).
void importCast(OnnxImportCtx& c, Type to);

}  // namespace onyx
