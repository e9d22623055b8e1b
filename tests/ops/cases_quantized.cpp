// Harness cases for src/ops/quantized.cpp: qlinear_conv against a
// reference written as index loops over exact integers, with ONNX's
// requantization (the factor x_scale * w_scale / y_scale in float32, the
// product in double, round half to even, saturation).
#include <cmath>

#include <onyx/ops/quantized.h>

#include "ops/harness.h"
#include "ops/window_refs.h"

namespace onyx {
namespace test {
namespace {

using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;

// x [N, C, H, W], the eight parameters of QLinearConv and an optional bias;
// y saturated into [lo, hi].
Ref refQConv(Rs in, const Geo& g, double lo, double hi) {
  const Ref &x = in[0], &w = in[3];
  const int64_t N = x.shape[0], C = x.shape[1], M = w.shape[0], Cg = w.shape[1];
  const V img{x.shape[2], x.shape[3]}, k{w.shape[2], w.shape[3]};
  V pos(2);
  for(size_t i = 0; i < 2; ++i) {
    int64_t span = (k[i] - 1) * at(g.dilations, i, 1) + 1;
    pos[i] = (img[i] + at(g.pads, i, 0) + at(g.pads, i + 2, 0) - span) / at(g.strides, i, 1) + 1;
  }
  Ref y{{N, M, pos[0], pos[1]}, {}};
  y.v.assign(size_t(N * M * pos[0] * pos[1]), 0);
  const int64_t Mg = M / g.group;
  (void)C;
  forEachIndex({N, M, pos[0], pos[1]}, [&](const V& o) {
    const int64_t n = o[0], m = o[1], grp = m / Mg;
    double acc = in.size() > 8 ? in[8][m] : 0;
    forEachIndex({Cg, k[0], k[1]}, [&](const V& t) {
      V p;
      if(!tapPos({o[2], o[3]}, {t[1], t[2]}, img, g, p)) return;
      double xv = x[flatAt(x.shape, {n, grp * Cg + t[0], p[0], p[1]})] - in[2][0];
      double wv = w[flatAt(w.shape, {m, t[0], t[1], t[2]})] - in[5][in[5].size() == 1 ? 0 : m];
      acc += xv * wv;
    });
    const float S = float(in[1][0]) * float(in[4][in[4].size() == 1 ? 0 : m]) / float(in[6][0]);
    double v = roundHalfEven(acc * double(S)) + in[7][0];
    y[flatAt(y.shape, o)] = std::min(hi, std::max(lo, v));
  });
  return y;
}

Expr f32(Expr e) { return cast(e, Type::float32); }

// uint8 x and y, int8 weights per tensor with a zero point, an int32 bias,
// stride 1 and pads 1.
ONYX_OP_CASE({"qlinear_conv", "u8_per_tensor_bias",
              {ints({2, 3, 5, 5}, 0, 255), constantInput(values({}, {0.02})), intValues({}, {117}),
               ints({4, 3, 3, 3}, -127, 127), constantInput(values({}, {0.004})), intValues({}, {3}),
               constantInput(values({}, {0.75})), intValues({}, {100}), ints({4}, -3000, 3000)},
              [](Xs x) {
                ConvOptions o;
                o.pads = {1, 1, 1, 1};
                return qlinear_conv(cast(x[0], Type::uint8), f32(x[1]), cast(x[2], Type::uint8), cast(x[3], Type::int8),
                                    f32(x[4]), cast(x[5], Type::int8), f32(x[6]), cast(x[7], Type::uint8),
                                    cast(x[8], Type::int32), o);
              },
              [](Rs x) {
                Geo g;
                g.pads = {1, 1, 1, 1};
                return refQConv(x, g, 0, 255);
              },
              /*gradcheck=*/false});
// int8 x and y, weights per output channel, two groups, stride 2, no bias.
ONYX_OP_CASE({"qlinear_conv", "s8_per_channel_grouped_strided",
              {ints({1, 4, 7, 7}, -128, 127), constantInput(values({}, {0.05})), intValues({}, {-9}),
               ints({6, 2, 3, 3}, -128, 127), constantInput(values({6}, {0.01, 0.002, 0.003, 0.004, 0.005, 0.02})),
               intValues({6}, {0, 0, 1, -1, 0, 2}), constantInput(values({}, {1.5})), intValues({}, {-5})},
              [](Xs x) {
                ConvOptions o;
                o.strides = {2, 2};
                o.group = 2;
                return qlinear_conv(cast(x[0], Type::int8), f32(x[1]), cast(x[2], Type::int8), cast(x[3], Type::int8),
                                    f32(x[4]), cast(x[5], Type::int8), f32(x[6]), cast(x[7], Type::int8), nullptr, o);
              },
              [](Rs x) {
                Geo g;
                g.strides = {2, 2};
                g.group = 2;
                return refQConv(x, g, -128, 127);
              },
              /*gradcheck=*/false});

// matmul_integer: uint8 A [2, 3, 5] with a zero point, int8 B [5, 4] with one
// per column; int32 output, exact.
ONYX_OP_CASE({"matmul_integer", "u8_s8_per_column",
              {ints({2, 3, 5}, 0, 255), ints({5, 4}, -128, 127), intValues({}, {131}), intValues({4}, {0, 3, -7, 100})},
              [](Xs x) {
                return matmul_integer(cast(x[0], Type::uint8), cast(x[1], Type::int8), cast(x[2], Type::uint8),
                                      cast(x[3], Type::int8));
              },
              [](Rs x) {
                const int64_t rows = 6, K = 5, N = 4;
                Ref y{{2, 3, 4}, std::vector<double>(size_t(rows * N), 0)};
                for(int64_t r = 0; r < rows; ++r)
                  for(int64_t n = 0; n < N; ++n)
                    for(int64_t k = 0; k < K; ++k) y[r * N + n] += (x[0][r * K + k] - x[2][0]) * (x[1][k * N + n] - x[3][n]);
                return y;
              },
              /*gradcheck=*/false});

// matmul_integer_to_float: the same product in float32, scaled by a_scale *
// b_scale (per column here, in float32 as the op states) plus a bias; int8 A
// with a zero point, uint8 B.
ONYX_OP_CASE({"matmul_integer_to_float", "s8_u8_per_column_bias",
              {ints({2, 3, 5}, -128, 127), ints({5, 4}, 0, 255), constantInput(values({}, {0.031})),
               constantInput(values({4}, {0.002, 0.5, 0.0007, 1.25})), intValues({}, {-3}),
               intValues({4}, {128, 0, 255, 77}), constantInput(values({4}, {0.5, -2.0, 3.25, 0.0}))},
              [](Xs x) {
                return matmul_integer_to_float(cast(x[0], Type::int8), cast(x[1], Type::uint8), f32(x[2]), f32(x[3]),
                                               cast(x[4], Type::int8), cast(x[5], Type::uint8), f32(x[6]));
              },
              [](Rs x) {
                const int64_t rows = 6, K = 5, N = 4;
                Ref y{{2, 3, 4}, std::vector<double>(size_t(rows * N), 0)};
                for(int64_t r = 0; r < rows; ++r)
                  for(int64_t n = 0; n < N; ++n) {
                    double acc = 0;
                    for(int64_t k = 0; k < K; ++k) acc += (x[0][r * K + k] - x[4][0]) * (x[1][k * N + n] - x[5][n]);
                    const float s = float(x[2][0]) * float(x[3][n]);
                    y[r * N + n] = double(float(float(acc) * s) + float(x[6][n]));
                  }
                return y;
              },
              /*gradcheck=*/false});
// One scale, no bias, uint8 A and int8 B, zero points left out.
ONYX_OP_CASE({"matmul_integer_to_float", "u8_s8_per_tensor",
              {ints({4, 6}, 0, 255), ints({6, 3}, -128, 127), constantInput(values({}, {0.1})),
               constantInput(values({}, {0.05}))},
              [](Xs x) {
                return matmul_integer_to_float(cast(x[0], Type::uint8), cast(x[1], Type::int8), f32(x[2]), f32(x[3]));
              },
              [](Rs x) {
                const int64_t rows = 4, K = 6, N = 3;
                Ref y{{4, 3}, std::vector<double>(size_t(rows * N), 0)};
                const float s = float(x[2][0]) * float(x[3][0]);
                for(int64_t r = 0; r < rows; ++r)
                  for(int64_t n = 0; n < N; ++n) {
                    double acc = 0;
                    for(int64_t k = 0; k < K; ++k) acc += x[0][r * K + k] * x[1][k * N + n];
                    y[r * N + n] = double(float(acc) * s);
                  }
                return y;
              },
              /*gradcheck=*/false});

}  // namespace
}  // namespace test
}  // namespace onyx
