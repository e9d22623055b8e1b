// Harness cases for src/ops/quant.cpp. Inputs are exact in binary (scales
// 0.5, 0.25, 2) so that x / scale is the same in float32 and double and the
// half-to-even ties are real ties.
#include <algorithm>
#include <cmath>

#include <onyx/ops/quant.h>

#include "ops/harness.h"

namespace onyx {
namespace test {
namespace {

using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;


// saturate(round(x / s) + zp) into [lo, hi], all three broadcast.
Ref refQuantize(Rs x, double lo, double hi) {
  return refBroadcast(x, [lo, hi](const std::vector<double>& v) {
    double q = roundHalfEven(v[0] / v[1]) + v[2];
    return std::min(hi, std::max(lo, q));
  });
}

// Ties at .5 (0.25 / 0.5, 0.75 / 0.5, 1.25 / 0.5, -0.25 / 0.5, -0.75 / 0.5),
// ordinary values and both saturation ends.
ONYX_OP_CASE({"quantize_linear", "uint8_per_tensor_ties_saturate",
              {constantInput(values({2, 5}, {0.25, 0.75, 1.25, -0.25, -0.75, 3.0, -2.5, 100.0, -100.0, 0.0})),
               constantInput(values({}, {0.5})), intValues({}, {10})},
              [](Xs x) { return quantize_linear(x[0], x[1], cast(x[2], Type::uint8)); },
              [](Rs x) { return refQuantize(x, 0, 255); },
              /*gradcheck=*/false});
// Per-row scale and zero point ([3, 1] against x [3, 4]) into int8.
ONYX_OP_CASE({"quantize_linear", "int8_per_row",
              {constantInput(values({3, 4}, {1.0, -1.0, 2.5, 7.5, 0.25, -0.75, 30.0, -40.0, 3.0, 5.0, -9.0, 1000.0})),
               constantInput(values({3, 1}, {0.5, 0.25, 2.0})), intValues({3, 1}, {0, -3, 100})},
              [](Xs x) { return quantize_linear(x[0], x[1], cast(x[2], Type::int8)); },
              [](Rs x) { return refQuantize(x, -128, 127); },
              /*gradcheck=*/false});
// Per-column parameters ([4]) into int16.
ONYX_OP_CASE({"quantize_linear", "int16_per_column",
              {constantInput(values({2, 4}, {1.0, -1.0, 2.5, 200.0, 9000.0, -0.75, 30.0, -40.0})),
               constantInput(values({4}, {0.5, 0.25, 2.0, 0.125})), intValues({4}, {0, -3, 100, 32000})},
              [](Xs x) { return quantize_linear(x[0], x[1], cast(x[2], Type::int16)); },
              [](Rs x) { return refQuantize(x, -32768, 32767); },
              /*gradcheck=*/false});

// dequantize_linear: uint8 per tensor, with the scale's gradient.
ONYX_OP_CASE({"dequantize_linear", "uint8_per_tensor_scale_grad",
              {intValues({2, 3}, {0, 17, 255, 128, 3, 200}), in({1, 3}, 0.1, 1), intValues({}, {128})},
              [](Xs x) { return dequantize_linear(cast(x[0], Type::uint8), x[1], cast(x[2], Type::uint8)); },
              [](Rs x) { return refBroadcast(x, [](const std::vector<double>& v) { return (v[0] - v[2]) * v[1]; }); }});
// int8 per output channel ([3, 1] against W [3, 4]), both ends of the range.
ONYX_OP_CASE({"dequantize_linear", "int8_per_row",
              {intValues({3, 4}, {-128, 127, 0, 5, -1, 2, -3, 4, 100, -100, 50, -50}), in({3, 1}, 0.1, 1),
               intValues({3, 1}, {0, -3, 7})},
              [](Xs x) { return dequantize_linear(cast(x[0], Type::int8), x[1], cast(x[2], Type::int8)); },
              [](Rs x) { return refBroadcast(x, [](const std::vector<double>& v) { return (v[0] - v[2]) * v[1]; }); }});

// qlinear_add: y = saturate(round(act((a - az) as + (b - bz) bs) / ys) + yz).
Ref refQAdd(Rs x, const QLinearAddParams& p, double lo, double hi) {
  return refBroadcast(x, [p, lo, hi](const std::vector<double>& v) {
    double s = (v[0] - p.aZeroPoint) * p.aScale + (v[1] - p.bZeroPoint) * p.bScale;
    if(p.relu) s = std::max(s, 0.0);
    return std::min(hi, std::max(lo, roundHalfEven(s / p.yScale) + p.yZeroPoint));
  });
}

// uint8 with ties at .5 (sums of quarters over y_scale 0.5), both
// saturation ends and a broadcast row.
ONYX_OP_CASE({"qlinear_add", "uint8_broadcast_ties_saturate",
              {intValues({2, 4}, {0, 255, 128, 129, 3, 250, 1, 131}), intValues({1, 4}, {128, 255, 0, 127})},
              [](Xs x) {
                QLinearAddParams p{0.25f, 0.5f, 0.5f, 128, 120, 100, false};
                return qlinear_add(cast(x[0], Type::uint8), cast(x[1], Type::uint8), p);
              },
              [](Rs x) { return refQAdd(x, {0.25f, 0.5f, 0.5f, 128, 120, 100, false}, 0, 255); },
              /*gradcheck=*/false});
// int8 with relu: negative sums go to the zero point.
ONYX_OP_CASE({"qlinear_add", "int8_relu",
              {intValues({3, 2}, {-128, 127, 0, -5, 60, -60}), intValues({3, 2}, {-128, 127, 3, 4, -100, 100})},
              [](Xs x) {
                QLinearAddParams p{0.5f, 0.25f, 2.0f, -3, 5, -10, true};
                return qlinear_add(cast(x[0], Type::int8), cast(x[1], Type::int8), p);
              },
              [](Rs x) { return refQAdd(x, {0.5f, 0.25f, 2.0f, -3, 5, -10, true}, -128, 127); },
              /*gradcheck=*/false});

}  // namespace
}  // namespace test
}  // namespace onyx
