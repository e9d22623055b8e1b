// ONNX RNN, GRU and LSTM imports, unrolled over the sequence into graph
// expressions (matmuls, slices, element-wise gates), so the gradients come
// from those building blocks. Per direction the input projection X . W^T
// (plus the biases that can be folded into it) is one matmul over all time
// steps; each step then adds H . R^T and applies the gates.
//
// In inference an LSTM with the default activations and no sequence_lens
// is instead one lstm_sequence op (src/ops/recurrent.cpp), which runs each
// step as one GEMM on buffers allocated once.
//
// sequence_lens is supported as a tensor (not read at import): steps at or
// past a sequence's length leave its state unchanged and write zeros to Y,
// and the reverse direction of each sequence starts at its own last step.
#include <algorithm>
#include <cctype>
#include <string>
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/layout.h>
#include <onyx/ops/linalg.h>
#include <onyx/ops/recurrent.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/slicing.h>

namespace onyx {

namespace {

enum class Cell { Rnn, Gru, Lstm };

// An activation of the ONNX recurrent ops with its alpha and beta.
struct Act {
  std::string name;  // lower case
  double alpha = 0, beta = 0;
};

std::string lower(std::string s) {
  for(auto& ch : s) ch = static_cast<char>(std::tolower(static_cast<unsigned char>(ch)));
  return s;
}

Expr apply(const Act& a, Expr x) {
  const std::string& n = a.name;
  if(n == "sigmoid") return sigmoid(x);
  if(n == "tanh") return tanh(x);
  if(n == "relu") return relu(x);
  if(n == "affine") return x * a.alpha + a.beta;
  if(n == "leakyrelu") return leaky_relu(x, static_cast<float>(a.alpha));
  if(n == "thresholdedrelu") return where(gt(x, a.alpha), x, 0.0);
  if(n == "scaledtanh") return tanh(x * a.beta) * a.alpha;
  if(n == "hardsigmoid") return clip(x * a.alpha + a.beta, 0.0, 1.0);
  if(n == "elu") return elu(x, static_cast<float>(a.alpha));
  if(n == "softsign") return x / (abs(x) + 1.0);
  if(n == "softplus") return softplus(x);
  ONYX_ASSERT(false, "unchecked activation ", n);
  return x;
}

// The node's activations: `perDir` per direction (defaults if absent), with
// activation_alpha/activation_beta consumed in order by the activations that
// take them.
std::vector<Act> readActivations(OnnxImportCtx& c, int numDir, const std::vector<std::string>& defaults) {
  const size_t perDir = defaults.size();
  std::vector<std::string> names;
  if(c.hasAttr("activations")) names = c.attrStrings("activations");
  if(names.empty())
    for(int d = 0; d < numDir; ++d) names.insert(names.end(), defaults.begin(), defaults.end());
  if(names.size() == perDir && numDir == 2) names.insert(names.end(), names.begin(), names.end());
  c.check(names.size() == perDir * size_t(numDir), "activations: expected ", perDir * size_t(numDir), " names (",
          perDir, " per direction), got ", names.size());
  std::vector<double> alphas = c.attrFloats("activation_alpha"), betas = c.attrFloats("activation_beta");
  size_t ia = 0, ib = 0;
  std::vector<Act> acts;
  for(const auto& raw : names) {
    Act a;
    a.name = lower(raw);
    double da = 0, db = 0;
    bool usesA = true, usesB = false;
    if(a.name == "affine") da = 1, usesB = true;
    else if(a.name == "leakyrelu") da = 0.01;
    else if(a.name == "thresholdedrelu" || a.name == "elu") da = 1;
    else if(a.name == "scaledtanh") da = 1, db = 1, usesB = true;
    else if(a.name == "hardsigmoid") da = 0.2, db = 0.5, usesB = true;
    else if(a.name == "sigmoid" || a.name == "tanh" || a.name == "relu" || a.name == "softsign" ||
            a.name == "softplus")
      usesA = false;
    else
      c.fail("activation '", raw, "' is not supported (Sigmoid, Tanh, Relu, Affine, LeakyRelu, ThresholdedRelu, "
             "ScaledTanh, HardSigmoid, Elu, Softsign, Softplus)");
    a.alpha = usesA && ia < alphas.size() ? alphas[ia++] : da;
    a.beta = usesB && ib < betas.size() ? betas[ib++] : db;
    acts.push_back(a);
  }
  return acts;
}

struct Spec {
  Cell cell;
  int64_t seq = 0, batch = 0, inSize = 0, H = 0;
  int gates = 1;
  bool hasClip = false;
  double clip = 0;
  bool linearBeforeReset = false;  // GRU
  bool inputForget = false;        // LSTM
};

struct DirOut {
  std::vector<Expr> ys;  // per time step, [batch, H], in time order
  Expr h, c;
};

// One direction over the whole sequence. x: [seq, batch, in]; W: [G*H, in];
// R: [G*H, H]; B: [2*G*H] or null; P: [3H] or null; h0/c0: [batch, H];
// lens: [batch, 1] int or null.
DirOut runDirection(const Spec& s, Expr x, Expr W, Expr R, Expr B, Expr P, Expr h0, Expr c0, Expr lens,
                    bool reverse, const Act* acts) {
  const int64_t H = s.H, GH = s.gates * H;
  auto clipped = [&](Expr e) { return s.hasClip ? clip(e, -s.clip, s.clip) : e; };
  // Input projection of all steps at once, with the foldable biases.
  Expr xw = dot(reshape(x, std::vector<int64_t>{s.seq * s.batch, s.inSize}), W, false, true);
  Expr rbh;  // GRU: the recurrent bias of the candidate gate, not foldable
  if(B) {
    Expr bw = slice(B, 0, 0, GH), br = slice(B, 0, GH, 2 * GH);
    if(s.cell == Cell::Gru) {
      rbh = slice(br, 0, 2 * H, 3 * H);
      xw = xw + concat({slice(bw, 0, 0, 2 * H) + slice(br, 0, 0, 2 * H), slice(bw, 0, 2 * H, 3 * H)}, 0);
    } else {
      xw = xw + (bw + br);
    }
  }
  Expr Rzr, Rh;
  if(s.cell == Cell::Gru && !s.linearBeforeReset) {
    Rzr = slice(R, 0, 0, 2 * H);
    Rh = slice(R, 0, 2 * H, 3 * H);
  }
  Expr Pi, Po, Pf;
  if(P) {
    Pi = slice(P, 0, 0, H);
    Po = slice(P, 0, H, 2 * H);
    Pf = slice(P, 0, 2 * H, 3 * H);
  }

  DirOut out;
  out.ys.resize(static_cast<size_t>(s.seq));
  Expr h = h0, c = c0;
  for(int64_t k = 0; k < s.seq; ++k) {
    const int64_t t = reverse ? s.seq - 1 - k : k;
    Expr xt = slice(xw, 0, t * s.batch, (t + 1) * s.batch);  // [batch, G*H]
    Expr hn, cn;
    if(s.cell == Cell::Rnn) {
      hn = apply(acts[0], clipped(xt + dot(h, R, false, true)));
    } else if(s.cell == Cell::Gru) {
      std::vector<Expr> xg = split(xt, 1, {H, H, H});
      Expr z, r, cand;
      if(!s.linearBeforeReset) {
        std::vector<Expr> hg = split(dot(h, Rzr, false, true), 1, {H, H});
        z = apply(acts[0], clipped(xg[0] + hg[0]));
        r = apply(acts[0], clipped(xg[1] + hg[1]));
        Expr rh = dot(r * h, Rh, false, true);
        cand = xg[2] + (rbh ? rh + rbh : rh);
      } else {
        std::vector<Expr> hg = split(dot(h, R, false, true), 1, {H, H, H});
        z = apply(acts[0], clipped(xg[0] + hg[0]));
        r = apply(acts[0], clipped(xg[1] + hg[1]));
        cand = xg[2] + r * (rbh ? hg[2] + rbh : hg[2]);
      }
      Expr hh = apply(acts[1], clipped(cand));
      hn = hh + z * (h - hh);  // (1 - z) * hh + z * h
    } else {
      std::vector<Expr> g = split(xt + dot(h, R, false, true), 1, {H, H, H, H});  // i, o, f, c
      Expr gi = P ? g[0] + Pi * c : g[0];
      Expr i = apply(acts[0], clipped(gi));
      Expr f = s.inputForget ? 1.0 - i : apply(acts[0], clipped(P ? g[2] + Pf * c : g[2]));
      Expr cc = apply(acts[1], clipped(g[3]));
      cn = f * c + i * cc;
      Expr o = apply(acts[0], clipped(P ? g[1] + Po * cn : g[1]));
      hn = o * apply(acts[2], cn);
    }
    if(lens) {
      Expr live = gt(lens, double(t));  // [batch, 1]
      out.ys[static_cast<size_t>(t)] = where(live, hn, 0.0);
      hn = where(live, hn, h);
      if(cn) cn = where(live, cn, c);
    } else {
      out.ys[static_cast<size_t>(t)] = hn;
    }
    h = hn;
    c = cn;
  }
  out.h = h;
  out.c = c;
  return out;
}

void importRecurrent(OnnxImportCtx& c, Cell cell) {
  Spec s;
  s.cell = cell;
  s.gates = cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4;
  auto has = [&](size_t i) { return c.numInputs() > i && c.hasInput(i); };
  Expr x = c.input(0), W = c.input(1), R = c.input(2);
  const Type ft = x->value_type();
  c.check(isFloat(ft), "X has element type ", ft, "; it must be a float type");

  const std::string direction = c.attrString("direction", "forward");
  c.check(direction == "forward" || direction == "reverse" || direction == "bidirectional", "direction '",
          direction, "' is not one of forward, reverse, bidirectional");
  const int numDir = direction == "bidirectional" ? 2 : 1;
  const int64_t layout = c.opset() >= 14 ? c.attrInt("layout", 0) : 0;
  c.check(layout == 0 || layout == 1, "layout must be 0 or 1, got ", layout);
  if(c.hasAttr("output_sequence")) c.ignoreAttr("output_sequence");  // opset 1: Y is produced when wanted
  if(c.hasAttr("clip")) {
    s.hasClip = true;
    s.clip = c.attrFloat("clip", 0.0);
    c.check(s.clip > 0, "clip must be > 0, got ", s.clip);
  }
  if(cell == Cell::Gru) s.linearBeforeReset = c.attrInt("linear_before_reset", 0) != 0;
  if(cell == Cell::Lstm) s.inputForget = c.attrInt("input_forget", 0) != 0;
  std::vector<Act> acts = readActivations(c, numDir,
                                          cell == Cell::Rnn   ? std::vector<std::string>{"Tanh"}
                                          : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                              : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"});

  c.check(x->shape().rank() == 3, "X must have rank 3, got shape ", x->shape());
  if(layout == 1) x = transpose(x, {1, 0, 2});
  s.seq = x->shape().dims()[0];
  s.batch = x->shape().dims()[1];
  s.inSize = x->shape().dims()[2];
  c.check(R->shape().rank() == 3, "R must have rank 3, got shape ", R->shape());
  s.H = c.hasAttr("hidden_size") ? c.attrInt("hidden_size", 0) : R->shape().dims()[2];
  const int64_t H = s.H;
  c.check(H > 0 && H == R->shape().dims()[2], "hidden_size ", H, " must be > 0 and match R's last dim ",
          R->shape().dims()[2]);
  const int64_t GH = s.gates * H;  // no overflow: H is a dim of R
  c.check(W->shape() == Shape({numDir, GH, s.inSize}), "W must have shape [", numDir, ", ", GH, ", ", s.inSize,
          "], got ", W->shape());
  c.check(R->shape() == Shape({numDir, GH, H}), "R must have shape [", numDir, ", ", GH, ", ", H, "], got ",
          R->shape());
  Expr B = has(3) ? c.input(3) : nullptr;
  if(B) c.check(B->shape() == Shape({numDir, 2 * GH}), "B must have shape [", numDir, ", ", 2 * GH, "], got ", B->shape());
  Expr lens;
  if(has(4)) {
    lens = c.input(4);
    c.check(isInt(lens->value_type()) && lens->shape() == Shape({s.batch}), "sequence_lens must be integers of shape [",
            s.batch, "], got ", lens->value_type(), " ", lens->shape());
    lens = reshape(lens, std::vector<int64_t>{s.batch, 1});
  }
  // initial_h / initial_c: [numDir, batch, H] ([batch, numDir, H] in layout 1).
  auto state = [&](size_t i, const char* name) -> Expr {
    if(!has(i)) return nullptr;
    Expr e = c.input(i);
    if(layout == 1 && e->shape().rank() == 3) e = transpose(e, {1, 0, 2});
    c.check(e->shape() == Shape({numDir, s.batch, H}), name, " must have shape [", numDir, ", ", s.batch, ", ", H,
            "] (batch first in layout 1), got ", c.input(i)->shape());
    return e;
  };
  Expr h0 = state(5, "initial_h");
  Expr c0 = cell == Cell::Lstm ? state(6, "initial_c") : nullptr;
  Expr P = cell == Cell::Lstm && has(7) ? c.input(7) : nullptr;
  if(P) c.check(P->shape() == Shape({numDir, 3 * H}), "P must have shape [", numDir, ", ", 3 * H, "], got ", P->shape());

  auto wants = [&](size_t i) { return c.numOutputs() > i && c.wantsOutput(i); };
  // Inference runs ONNX's own LSTM (default activations, no sequence_lens) as
  // one op: a GEMM per step in place, instead of a dozen small nodes per step.
  bool defaultActs = cell == Cell::Lstm;
  for(size_t i = 0; defaultActs && i < acts.size(); ++i) defaultActs = acts[i].name == (i % 3 == 0 ? "sigmoid" : "tanh");
  if(defaultActs && !c.training() && !lens && (ft == Type::float32 || ft == Type::float64)) {
    auto zerosOf = [&](Shape shape) { return c.graph().zeros(shape, ft); };
    const bool wantCell = wants(2);
    Expr z = lstm_sequence(x, W, R, B ? B : zerosOf(Shape({numDir, 2 * GH})), h0 ? h0 : zerosOf(Shape({numDir, s.batch, H})),
                           c0 ? c0 : zerosOf(Shape({numDir, s.batch, H})), P, direction, s.hasClip ? s.clip : 0.0,
                           s.inputForget, wantCell);
    Expr Y = wantCell ? slice(z, 0, 0, s.seq) : z;  // [seq, numDir, batch, H]
    if(wants(0)) c.setOutput(0, layout == 1 ? transpose(Y, {2, 0, 1, 3}) : Y);
    auto perDir = [&](Expr e) { return layout == 1 ? transpose(e, {1, 0, 2}) : e; };  // e: [numDir, batch, H]
    if(wants(1)) {
      std::vector<Expr> last;
      for(int d = 0; d < numDir; ++d) {
        int64_t t = direction == "reverse" || d == 1 ? 0 : s.seq - 1;
        last.push_back(reshape(slice(slice(Y, 0, t, t + 1), 1, d, d + 1), std::vector<int64_t>{1, s.batch, H}));
      }
      c.setOutput(1, perDir(concat(last, 0)));
    }
    if(wantCell) c.setOutput(2, perDir(reshape(slice(z, 0, s.seq, s.seq + 1), std::vector<int64_t>{numDir, s.batch, H})));
    return;
  }

  auto pick = [](Expr e, int d) -> Expr {  // direction d of a [numDir, ...] tensor, without the first dim
    if(!e) return nullptr;
    std::vector<int64_t> rest(e->shape().dims().begin() + 1, e->shape().dims().end());
    return reshape(slice(e, 0, d, d + 1), rest);
  };
  Expr zeros = c.graph().zeros(Shape({s.batch, H}), ft);
  std::vector<DirOut> outs;
  for(int d = 0; d < numDir; ++d) {
    bool reverse = direction == "reverse" || d == 1;
    Expr hd = h0 ? pick(h0, d) : zeros;
    Expr cd = cell == Cell::Lstm ? (c0 ? pick(c0, d) : zeros) : nullptr;
    outs.push_back(runDirection(s, x, pick(W, d), pick(R, d), pick(B, d), pick(P, d), hd, cd, lens, reverse,
                                &acts[static_cast<size_t>(d) * acts.size() / size_t(numDir)]));
  }

  if(wants(0)) {
    std::vector<Expr> perDir;
    for(auto& o : outs)
      perDir.push_back(reshape(concat(o.ys, 0), std::vector<int64_t>{s.seq, 1, s.batch, H}));
    Expr Y = numDir == 1 ? perDir[0] : concat(perDir, 1);  // [seq, numDir, batch, H]
    c.setOutput(0, layout == 1 ? transpose(Y, {2, 0, 1, 3}) : Y);
  }
  auto finalState = [&](size_t i, bool cellState) {
    if(!wants(i)) return;
    std::vector<Expr> parts;
    for(auto& o : outs) parts.push_back(reshape(cellState ? o.c : o.h, std::vector<int64_t>{1, s.batch, H}));
    Expr e = numDir == 1 ? parts[0] : concat(parts, 0);  // [numDir, batch, H]
    c.setOutput(i, layout == 1 ? transpose(e, {1, 0, 2}) : e);
  };
  finalState(1, false);
  if(cell == Cell::Lstm) finalState(2, true);
}

}  // namespace

// Opsets 1-6 differ only in attributes read above (output_sequence);
// 14 adds layout; 22 adds types.
ONYX_ONNX_IMPORT(kOnnxRnn, "RNN", 1).importer([](OnnxImportCtx& c) { importRecurrent(c, Cell::Rnn); });
ONYX_ONNX_IMPORT(kOnnxGru, "GRU", 1).importer([](OnnxImportCtx& c) { importRecurrent(c, Cell::Gru); });
ONYX_ONNX_IMPORT(kOnnxLstm, "LSTM", 1).importer([](OnnxImportCtx& c) { importRecurrent(c, Cell::Lstm); });

}  // namespace onyx
