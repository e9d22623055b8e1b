// Cases for lstm_sequence (src/ops/recurrent.cpp), against ONNX's LSTM
// equations written out step by step over doubles. The op is not
// differentiable (the training import unrolls LSTM), so no gradient check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "ops/harness.h"

#include <onyx/ops/recurrent.h>

namespace onyx {
namespace test {
namespace {

using Xs = const std::vector<Expr>&;
using Rs = const std::vector<Ref>&;

struct LstmCfg {
  std::string direction;
  double clip = 0;
  bool inputForget = false, peepholes = false, cellState = false;
};

// x [seq, batch, in], W [D, 4H, in], R [D, 4H, H], B [D, 8H], h0/c0 [D, batch, H], P [D, 3H].
Ref refLstm(Rs x, const LstmCfg& cfg) {
  const int64_t seq = x[0].shape[0], batch = x[0].shape[1], in = x[0].shape[2];
  const int64_t D = x[2].shape[0], H = x[2].shape[2];
  Ref y = refOfShape({seq + (cfg.cellState ? 1 : 0), D, batch, H});
  auto sig = [](double v) { return 1 / (1 + std::exp(-v)); };
  auto cl = [&](double v) { return cfg.clip > 0 ? std::min(std::max(v, -cfg.clip), cfg.clip) : v; };
  for(int64_t d = 0; d < D; ++d) {
    bool reverse = cfg.direction == "reverse" || d == 1;
    std::vector<double> h(static_cast<size_t>(batch * H)), c(h.size());
    for(int64_t k = 0; k < batch * H; ++k) {
      h[size_t(k)] = x[4][d * batch * H + k];
      c[size_t(k)] = x[5][d * batch * H + k];
    }
    for(int64_t s = 0; s < seq; ++s) {
      int64_t t = reverse ? seq - 1 - s : s;
      std::vector<double> hn(h.size()), cn(h.size());
      for(int64_t b = 0; b < batch; ++b)
        for(int64_t j = 0; j < H; ++j) {
          double g[4];
          for(int64_t q = 0; q < 4; ++q) {
            int64_t row = q * H + j;
            double v = x[3][d * 8 * H + row] + x[3][d * 8 * H + 4 * H + row];
            for(int64_t i = 0; i < in; ++i) v += x[0][(t * batch + b) * in + i] * x[1][(d * 4 * H + row) * in + i];
            for(int64_t i = 0; i < H; ++i) v += h[size_t(b * H + i)] * x[2][(d * 4 * H + row) * H + i];
            g[q] = v;
          }
          double cp = c[size_t(b * H + j)];
          auto p = [&](int64_t q) { return cfg.peepholes ? x[6][d * 3 * H + q * H + j] : 0.0; };
          double ig = sig(cl(g[0] + p(0) * cp));
          double fg = cfg.inputForget ? 1 - ig : sig(cl(g[2] + p(2) * cp));
          double cc = fg * cp + ig * std::tanh(cl(g[3]));
          double og = sig(cl(g[1] + p(1) * cc));
          cn[size_t(b * H + j)] = cc;
          hn[size_t(b * H + j)] = og * std::tanh(cc);
        }
      h = hn;
      c = cn;
      for(int64_t k = 0; k < batch * H; ++k) y[(t * D + d) * batch * H + k] = h[size_t(k)];
    }
    if(cfg.cellState)
      for(int64_t k = 0; k < batch * H; ++k) y[(seq * D + d) * batch * H + k] = c[size_t(k)];
  }
  return y;
}

OpCase lstmCase(const std::string& name, const LstmCfg& cfg, int64_t D, int64_t batch = 2, int64_t H = 3) {
  const int64_t seq = 4, inSize = 3;
  OpCase c;
  c.op = "lstm_sequence";
  c.name = name;
  c.inputs = {in({seq, batch, inSize}, -2, 2), in({D, 4 * H, inSize}), in({D, 4 * H, H}), in({D, 8 * H}),
              in({D, batch, H}), in({D, batch, H})};
  if(cfg.peepholes) c.inputs.push_back(in({D, 3 * H}));
  c.build = [cfg](Xs x) {
    return lstm_sequence(x[0], x[1], x[2], x[3], x[4], x[5], cfg.peepholes ? x[6] : nullptr, cfg.direction, cfg.clip,
                         cfg.inputForget, cfg.cellState);
  };
  c.reference = [cfg](Rs x) { return refLstm(x, cfg); };
  c.gradcheck = false;
  return c;
}

[[maybe_unused]] const bool registered = [] {
  cases().push_back(lstmCase("forward", {"forward"}, 1));
  cases().push_back(lstmCase("reverse_peepholes_cell_state", {"reverse", 0, false, true, true}, 1));
  cases().push_back(lstmCase("bidirectional_clip_input_forget_cell_state", {"bidirectional", 0.7, true, false, true}, 2));
  // The float32 few-rows product (few_rows_gemm.h): 4 + 1 rows, 4H = 28
  // gate columns (a full panel of 24 and a partial one), both directions.
  cases().push_back(lstmCase("bidirectional_batch5_hidden7", {"bidirectional"}, 2, 5, 7));
  return true;
}();

}  // namespace
}  // namespace test
}  // namespace onyx
