// Attention family: the composites of attention.h (their ONNX imports,
// Attention, RotaryEmbedding, LinearAttention, CausalConvWithState and
// FlexAttention, are in converters/import_attention.cpp).
// The composites only chain registry ops, so they run on every device and
// differentiate like any expression.
#include <onyx/ops/attention.h>

#include <cmath>
#include <limits>
#include <vector>

#include <onyx/graph/expression_graph.h>
#include <onyx/graph/node_initializers.h>
#include <onyx/ops/convolution.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/layout.h>
#include <onyx/ops/linalg.h>
#include <onyx/ops/nn.h>
#include <onyx/ops/reduce.h>
#include <onyx/ops/shape.h>
#include <onyx/ops/slicing.h>

namespace onyx {

namespace {

constexpr double kNegInf = -std::numeric_limits<double>::infinity();

// reshape with a braced list of dims
Expr reshapeTo(Expr x, const std::vector<int64_t>& dims) { return reshape(x, dims); }

}  // namespace

// ---------------------------------------------------------------- attention

AttentionResult attention_full(Expr q, Expr k, Expr v, Expr mask, const AttentionOptions& o) {
  ExpressionGraph* g = q->graph();
  const Shape &qs = q->shape(), &ks = k->shape(), &vs = v->shape();
  ONYX_CHECK(qs.rank() == 4 && ks.rank() == 4 && vs.rank() == 4,
             "attention: q, k and v must be 4-D [batch, heads, sequence, head_size], got ", qs, ", ", ks, " and ", vs);
  const int64_t B = qs[0], Hq = qs[1], L = qs[2], E = qs[3];
  const int64_t Hkv = ks[1], S = ks[2], Ev = vs[3];
  ONYX_CHECK(ks[0] == B && vs[0] == B, "attention: batch sizes differ: q ", qs, ", k ", ks, ", v ", vs);
  ONYX_CHECK(ks[3] == E, "attention: q and k head sizes differ: q ", qs, ", k ", ks);
  ONYX_CHECK(vs[1] == Hkv && vs[2] == S, "attention: k ", ks, " and v ", vs, " differ in heads or sequence length");
  ONYX_CHECK(Hkv > 0 && Hq % Hkv == 0, "attention: query heads (", Hq, ") must be a multiple of key/value heads (",
             Hkv, ")");
  const Type t = q->value_type();
  ONYX_CHECK(isFloat(t) && k->value_type() == t && v->value_type() == t,
             "attention: q, k and v must share one float type, got ", q->value_type(), ", ", k->value_type(), ", ",
             v->value_type());
  const int64_t rep = Hq / Hkv;
  const double scale = o.scale != 0 ? o.scale : 1.0 / std::sqrt(double(E));

  AttentionResult r;
  // Grouped heads: the rep query heads of one key/value head are stacked
  // along the sequence, so k and v are never copied per query head.
  // dot's scale is a float: float64 inputs scale q in double instead.
  const bool exactScale = t != Type::float64 || double(static_cast<float>(scale)) == scale;
  Expr qs2 = exactScale ? q : q * scale;
  Expr s = dot(rep == 1 ? qs2 : reshapeTo(qs2, {B, Hkv, rep * L, E}), k, false, true,
               exactScale ? static_cast<float>(scale) : 1.f);
  if(rep > 1) s = reshapeTo(s, {B, Hq, L, S});
  r.scores = s;
  if(o.softcap > 0) s = tanh(s / o.softcap) * o.softcap;
  r.capped = s;

  // Additive bias: 0 where attended, -inf where masked (float masks add).
  Expr bias;
  bool mayMaskRows = false;  // whether some query row may have every key masked
  if(mask) {
    const Shape& ms = mask->shape();
    ONYX_CHECK(ms.rank() >= 1 && ms.rank() <= 4 && ms[-1] <= S, "attention: mask of shape ", ms,
               " does not broadcast to [", B, ", ", Hq, ", ", L, ", ", S, "]");
    Expr mb = mask->value_type() == Type::boolean ? where(mask, g->scalar(0, t), kNegInf) : cast(mask, t);
    if(ms[-1] < S) {
      std::vector<int64_t> pads(static_cast<size_t>(2 * ms.rank()), 0);
      pads.back() = S - ms[-1];
      mb = pad(mb, pads, "constant", kNegInf);
    }
    bias = mb;
    mayMaskRows = true;
  }
  const bool windowed = o.leftWindow >= 0 || o.rightWindow >= 0;
  if(o.causal || windowed) {
    auto allowed = [&](int64_t d) {  // d = query position - key position
      return (!o.causal || d >= 0) && (o.leftWindow < 0 || d <= o.leftWindow) &&
             (o.rightWindow < 0 || -d <= o.rightWindow);
    };
    Expr cb;
    if(!o.kvLengths) {
      std::vector<double> b(static_cast<size_t>(L * S));
      for(int64_t i = 0; i < L; ++i) {
        bool any = false;
        for(int64_t j = 0; j < S; ++j) {
          bool a = allowed(i + o.offset - j);
          any = any || a;
          b[static_cast<size_t>(i * S + j)] = a ? 0.0 : kNegInf;
        }
        mayMaskRows = mayMaskRows || !any;
      }
      cb = g->constant(Shape{L, S}, inits::fromVector(b), t);
    } else {
      // Per batch entry: d = i - j + kvLengths[b] - L.
      std::vector<int64_t> dv(static_cast<size_t>(L * S));
      for(int64_t i = 0; i < L; ++i)
        for(int64_t j = 0; j < S; ++j) dv[static_cast<size_t>(i * S + j)] = i - j - L;
      Expr d = g->constant(Shape{L, S}, inits::fromVector(dv), Type::int64) +
               reshapeTo(cast(o.kvLengths, Type::int64), {B, 1, 1, 1});
      Expr ok;
      auto both = [&](Expr c) { ok = ok ? logical_and(ok, c) : c; };
      if(o.causal) both(ge(d, 0.0));
      if(o.leftWindow >= 0) both(le(d, double(o.leftWindow)));
      if(o.rightWindow >= 0) both(ge(d, double(-o.rightWindow)));
      cb = where(ok, g->scalar(0, t), kNegInf);
      mayMaskRows = true;
    }
    bias = bias ? bias + cb : cb;
  }
  if(o.kvLengths) {
    ONYX_CHECK(o.kvLengths->shape().elements() == B, "attention: kvLengths must hold one length per batch entry (",
               B, "), got shape ", o.kvLengths->shape());
    std::vector<int64_t> jv(static_cast<size_t>(S));
    for(int64_t j = 0; j < S; ++j) jv[static_cast<size_t>(j)] = j;
    Expr valid = lt(g->constant(Shape{S}, inits::fromVector(jv), Type::int64),
                    reshapeTo(cast(o.kvLengths, Type::int64), {B, 1, 1, 1}));
    Expr pb = where(valid, g->scalar(0, t), kNegInf);
    bias = bias ? bias + pb : pb;
    mayMaskRows = true;
  }

  Expr biased = bias ? s + bias : s;
  r.biased = biased;
  // Rows whose bias is -inf everywhere attend nothing: they get a finite
  // softmax input (so no NaN reaches values or gradients) and zero weights.
  Expr rowMasked;
  if(bias && mayMaskRows) {
    rowMasked = is_inf(max(bias, -1), true, false);
    biased = where(rowMasked, g->scalar(0, t), biased);
  }
  Type st = o.softmaxType == Type::undefined ? t : o.softmaxType;
  ONYX_CHECK(isFloat(st), "attention: the softmax type must be a float type, got ", st);
  Expr p = cast(softmax(cast(biased, st), -1), t);
  if(rowMasked) p = where(rowMasked, g->scalar(0, t), p);
  r.probs = p;
  Expr y = matmul(rep == 1 ? p : reshapeTo(p, {B, Hkv, rep * L, S}), v);
  r.y = rep == 1 ? y : reshapeTo(y, {B, Hq, L, Ev});
  return r;
}

// ---------------------------------------------------------------- rotary embedding

Expr rotary_embedding(Expr x, Expr cosC, Expr sinC, Expr positionIds, bool interleaved, int64_t rotaryDim,
                      int64_t numHeads) {
  const Shape& xs = x->shape();
  const int rank = xs.rank();
  ONYX_CHECK(rank == 3 || rank == 4, "rotary_embedding: x must be [B, H, S, D] or [B, S, H * D], got ", xs);
  Expr h = x;  // [B, H, S, D], or [B, S, H, D] for 3-D x
  int64_t D;
  if(rank == 4) {
    D = xs[3];
  } else {
    ONYX_CHECK(numHeads > 0 && xs[2] % numHeads == 0, "rotary_embedding: a 3-D x ", xs,
               " needs numHeads dividing its last dim, got ", numHeads);
    D = xs[2] / numHeads;
    h = reshapeTo(x, {xs[0], xs[1], numHeads, D});
  }
  const int64_t R = rotaryDim > 0 ? rotaryDim : D, half = R / 2;
  ONYX_CHECK(R <= D && R % 2 == 0, "rotary_embedding: the rotary dim ", R, " must be even and at most the head size ",
             D);
  if(positionIds) {
    cosC = gather(cosC, 0, positionIds);
    sinC = gather(sinC, 0, positionIds);
  }
  ONYX_CHECK(cosC->shape().rank() == 3 && cosC->shape()[-1] == half && sinC->shape() == cosC->shape(),
             "rotary_embedding: cos and sin must be [B, S, ", half, "] (after position ids), got ", cosC->shape(),
             " and ", sinC->shape());
  // [B, S, R/2] -> [B, 1, S, R/2] or [B, S, 1, R/2]
  Expr cs = cast(unsqueeze(cosC, {rank == 4 ? 1 : 2}), x->value_type());
  Expr sn = cast(unsqueeze(sinC, {rank == 4 ? 1 : 2}), x->value_type());
  Expr xr = R == D ? h : slice(h, 3, 0, R);
  Expr x1 = interleaved ? slice(xr, 3, 0, R, 2) : slice(xr, 3, 0, half);
  Expr x2 = interleaved ? slice(xr, 3, 1, R, 2) : slice(xr, 3, half, R);
  Expr re = cs * x1 - sn * x2, im = sn * x1 + cs * x2;
  Expr out;
  if(interleaved) {
    Shape rs = xr->shape();
    out = reshape(concat({unsqueeze(re, {4}), unsqueeze(im, {4})}, 4), rs);
  } else {
    out = concat({re, im}, 3);
  }
  if(R < D) out = concat({out, slice(h, 3, R, D)}, 3);
  return rank == 4 ? out : reshape(out, xs);
}

// ---------------------------------------------------------------- linear attention

LinearAttentionResult linear_attention(Expr q, Expr k, Expr v, Expr pastState, Expr decay, Expr beta,
                                       int64_t qNumHeads, int64_t kvNumHeads, double scale,
                                       const std::string& updateRule) {
  const bool gated = updateRule == "gated" || updateRule == "gated_delta";
  const bool delta = updateRule == "delta" || updateRule == "gated_delta";
  ONYX_CHECK(gated || delta || updateRule == "linear", "linear_attention: unknown update rule '", updateRule,
             "' (linear, gated, delta, gated_delta)");
  ONYX_CHECK(gated == bool(decay), "linear_attention: update rule '", updateRule,
             gated ? "' needs decay" : "' takes no decay");
  ONYX_CHECK(delta == bool(beta), "linear_attention: update rule '", updateRule,
             delta ? "' needs beta" : "' takes no beta");
  ONYX_CHECK(qNumHeads > 0 && kvNumHeads > 0 && qNumHeads % kvNumHeads == 0, "linear_attention: query heads (",
             qNumHeads, ") must be a positive multiple of key/value heads (", kvNumHeads, ")");
  const Shape &qs = q->shape(), &ks = k->shape(), &vs = v->shape();
  ONYX_CHECK(qs.rank() == 3 && ks.rank() == 3 && vs.rank() == 3,
             "linear_attention: query, key and value must be [B, T, heads * size], got ", qs, ", ", ks, " and ", vs);
  const int64_t B = qs[0], T = qs[1], Hkv = kvNumHeads, grp = qNumHeads / kvNumHeads;
  ONYX_CHECK(qs[2] % qNumHeads == 0 && vs[2] % Hkv == 0, "linear_attention: feature dims ", qs[2], " and ", vs[2],
             " are not multiples of the head counts");
  const int64_t dk = qs[2] / qNumHeads, dv = vs[2] / Hkv;
  ONYX_CHECK(ks[0] == B && vs[0] == B && ks[1] == T && vs[1] == T && ks[2] == Hkv * dk,
             "linear_attention: key ", ks, " and value ", vs, " do not fit query ", qs);
  const Type outType = q->value_type();
  const Type ct = outType == Type::float64 ? Type::float64 : Type::float32;
  const Type stateType = pastState ? pastState->value_type() : outType;
  if(scale == 0) scale = 1.0 / std::sqrt(double(dk));

  // Time-major views, computed in ct.
  Expr q5 = reshapeTo(cast(q, ct), {B, T, Hkv, grp, dk});
  Expr k4 = reshapeTo(cast(k, ct), {B, T, Hkv, dk});
  Expr v4 = reshapeTo(cast(v, ct), {B, T, Hkv, dv});
  Expr gate;  // exp(decay) as [B, T, Hkv, dk or 1, 1]
  if(gated) {
    const Shape& ds = decay->shape();
    ONYX_CHECK(ds.rank() == 3 && ds[0] == B && ds[1] == T && (ds[2] == Hkv || ds[2] == Hkv * dk),
               "linear_attention: decay must be [", B, ", ", T, ", ", Hkv, " or ", Hkv * dk, "], got ", ds);
    gate = exp(reshapeTo(cast(decay, ct), {B, T, Hkv, ds[2] / Hkv, 1}));
  }
  Expr b5;  // beta as [B, T, Hkv or 1, 1, 1]
  if(delta) {
    const Shape& bs = beta->shape();
    ONYX_CHECK(bs.rank() == 3 && bs[0] == B && bs[1] == T && (bs[2] == Hkv || bs[2] == 1),
               "linear_attention: beta must be [", B, ", ", T, ", ", Hkv, " or 1], got ", bs);
    b5 = reshapeTo(cast(beta, ct), {B, T, bs[2], 1, 1});
  }
  Expr state;
  if(pastState) {
    ONYX_CHECK((pastState->shape() == Shape{B, Hkv, dk, dv}), "linear_attention: past state must be [", B, ", ",
               Hkv, ", ", dk, ", ", dv, "], got ", pastState->shape());
    state = cast(pastState, ct);
  } else {
    state = q->graph()->zeros(Shape{B, Hkv, dk, dv}, ct);
  }
  auto step = [&](Expr x, int64_t t) {  // x[:, t] without the time dim
    Shape s = x->shape();
    std::vector<int64_t> d;
    for(int i = 0; i < s.rank(); ++i)
      if(i != 1) d.push_back(s[i]);
    return reshape(slice(x, 1, t, t + 1), d);
  };
  std::vector<Expr> outs;
  for(int64_t t = 0; t < T; ++t) {
    Expr kt = step(k4, t);  // [B, Hkv, dk]
    Expr vt = reshapeTo(step(v4, t), {B, Hkv, 1, dv});
    if(gated) state = state * step(gate, t);
    if(delta) {
      Expr retrieved = matmul(reshapeTo(kt, {B, Hkv, 1, dk}), state);  // [B, Hkv, 1, dv]
      vt = step(b5, t) * (vt - retrieved);
    }
    state = state + reshapeTo(kt, {B, Hkv, dk, 1}) * vt;
    outs.push_back(reshapeTo(matmul(step(q5, t), state), {B, 1, qNumHeads * dv}));  // [B, Hkv, grp, dv]
  }
  Expr out = T == 1 ? outs[0] : concat(outs, 1);
  return {cast(out * scale, outType), cast(state, stateType)};
}

// ---------------------------------------------------------------- causal conv with state

CausalConvResult causal_conv_with_state(Expr x, Expr weight, Expr bias, Expr pastState,
                                        const std::string& activation) {
  const Shape &xs = x->shape(), &ws = weight->shape();
  ONYX_CHECK(xs.rank() == 3, "causal_conv_with_state: x must be [B, C, L], got ", xs);
  ONYX_CHECK(ws.rank() == 3 && ws[0] == xs[1] && ws[1] == 1 && ws[2] >= 1,
             "causal_conv_with_state: weight must be [C, 1, K] with C = ", xs[1], ", got ", ws);
  ONYX_CHECK(activation == "none" || activation == "silu" || activation == "swish",
             "causal_conv_with_state: unknown activation '", activation, "' (none, silu, swish)");
  const int64_t B = xs[0], C = xs[1], L = xs[2], K = ws[2];
  Expr padded = x;
  if(pastState) {
    ONYX_CHECK((pastState->shape() == Shape{B, C, K - 1}), "causal_conv_with_state: past state must be [", B, ", ",
               C, ", ", K - 1, "], got ", pastState->shape());
    if(K > 1) padded = concat({pastState, x}, 2);
  } else if(K > 1) {
    padded = concat({x->graph()->zeros(Shape{B, C, K - 1}, x->value_type()), x}, 2);
  }
  ConvOptions co;
  co.group = C;
  Expr y = conv(padded, weight, bias, co);
  if(activation != "none") y = swish(y);
  Expr state = K > 1 ? slice(padded, 2, L, L + K - 1) : slice(x, 2, 0, 0);
  return {y, state};
}

}  // namespace onyx
