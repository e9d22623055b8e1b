// ONNX attention ops as composites of src/ops/attention.cpp's functions:
// Attention, FlexAttention (ai.onnx.preview), RotaryEmbedding,
// LinearAttention and CausalConvWithState.
#include <cmath>
#include <string>
#include <vector>

#include <onyx/converters/onnx_rules.h>
#include <onyx/graph/expression_graph.h>
#include <onyx/ops/attention.h>
#include <onyx/ops/elementwise.h>
#include <onyx/ops/layout.h>
#include <onyx/ops/linalg.h>
#include <onyx/ops/nn.h>
#include <onyx/ops/shape.h>

namespace onyx {

namespace {

// [B, L, H * d] -> [B, H, L, d]
Expr splitHeads(OnnxImportCtx& c, Expr x, int64_t heads, const char* what) {
  const Shape& s = x->shape();
  c.check(heads > 0 && s[2] % heads == 0, what, " of shape ", s, ": the last dim is not a multiple of ", heads,
          " heads");
  return transpose(reshape(x, std::vector<int64_t>{s[0], s[1], heads, s[2] / heads}), {0, 2, 1, 3});
}

}  // namespace

// Attention (opsets 23-24; 25 adds sliding windows). 3-D inputs
// [B, L, heads * size] are split into heads; a past cache is concatenated in
// front of k and v (present_key/value) and shifts the causal frontier.
ONYX_ONNX_IMPORT(kOnnxAttention, "Attention", 23).importer([](OnnxImportCtx& c) {
  Expr q = c.input(0), k = c.input(1), v = c.input(2);
  const int rank = q->shape().rank();
  c.check((rank == 3 || rank == 4) && k->shape().rank() == rank && v->shape().rank() == rank,
          "Q, K and V must all be 3-D or all 4-D, got ", q->shape(), ", ", k->shape(), " and ", v->shape());
  const int64_t qHeads = c.attrInt("q_num_heads", 0), kvHeads = c.attrInt("kv_num_heads", 0);
  if(rank == 3) {
    c.check(qHeads > 0 && kvHeads > 0, "3-D inputs need the q_num_heads and kv_num_heads attributes");
    q = splitHeads(c, q, qHeads, "Q");
    k = splitHeads(c, k, kvHeads, "K");
    v = splitHeads(c, v, kvHeads, "V");
  }
  AttentionOptions o;
  Expr mask = c.hasInput(3) ? c.input(3) : nullptr;
  const bool hasPastK = c.hasInput(4), hasPastV = c.hasInput(5);
  c.check(hasPastK == hasPastV, "past_key and past_value must be given together");
  if(hasPastK) {
    Expr pk = c.input(4), pv = c.input(5);
    c.check(pk->shape().rank() == 4 && pv->shape().rank() == 4, "past_key and past_value must be 4-D, got ",
            pk->shape(), " and ", pv->shape());
    o.offset = pk->shape()[2];
    k = concat({pk, k}, 2);
    v = concat({pv, v}, 2);
  }
  if(c.hasInput(6)) {
    c.check(!hasPastK, "nonpad_kv_seqlen cannot be combined with past_key/past_value");
    o.kvLengths = c.input(6);
  }
  o.scale = c.attrFloat("scale", 0.0);
  o.softcap = c.attrFloat("softcap", 0.0);
  o.causal = c.attrInt("is_causal", 0) != 0;
  o.leftWindow = c.attrInt("left_window_size", -1);
  o.rightWindow = c.attrInt("right_window_size", -1);
  c.check(o.leftWindow >= -1 && o.rightWindow >= -1, "window sizes must be -1 or >= 0");
  if(c.hasAttr("softmax_precision")) {
    o.softmaxType = static_cast<Type>(c.attrInt("softmax_precision"));
    c.check(isFloat(o.softmaxType), "softmax_precision must be a float type, got ", o.softmaxType);
  }
  const int64_t mode = c.attrInt("qk_matmul_output_mode", 0);
  c.check(mode >= 0 && mode <= 3, "qk_matmul_output_mode must be 0..3, got ", mode);
  AttentionResult r = attention_full(q, k, v, mask, o);
  Expr y = r.y;
  if(rank == 3) {
    const Shape& ys = y->shape();  // [B, Hq, L, Ev]
    y = reshape(transpose(y, {0, 2, 1, 3}), std::vector<int64_t>{ys[0], ys[2], ys[1] * ys[3]});
  }
  c.setOutput(0, y);
  if(c.numOutputs() > 1 && c.wantsOutput(1)) c.setOutput(1, k);
  if(c.numOutputs() > 2 && c.wantsOutput(2)) c.setOutput(2, v);
  if(c.numOutputs() > 3 && c.wantsOutput(3)) {
    Expr qk[] = {r.scores, r.capped, r.biased, r.probs};
    c.setOutput(3, qk[mode]);
  }
});

// FlexAttention (ai.onnx.preview 1): attention on 4-D inputs whose scores and
// probabilities may be rewritten by the score_mod / prob_mod subgraphs. The
// softmax runs in softmax_precision (default float32, float64 for float64).
ONYX_ONNX_IMPORT(kOnnxFlexAttention, "FlexAttention", 1).inDomain("ai.onnx.preview").importer([](OnnxImportCtx& c) {
  Expr q = c.input(0), k = c.input(1), v = c.input(2);
  const Shape &qs = q->shape(), &ks = k->shape(), &vs = v->shape();
  c.check(qs.rank() == 4 && ks.rank() == 4 && vs.rank() == 4, "Q, K and V must be 4-D, got ", qs, ", ", ks, " and ",
          vs);
  c.check(ks[3] == qs[3] && vs[1] == ks[1] && vs[2] == ks[2], "K ", ks, " and V ", vs, " do not fit Q ", qs);
  c.check(ks[1] > 0 && qs[1] % ks[1] == 0, "query heads (", qs[1], ") must be a multiple of key/value heads (", ks[1],
          ")");
  const Type t = q->value_type();
  double scale = c.attrFloat("scale", 0.0);
  if(scale == 0) scale = 1.0 / std::sqrt(double(qs[3]));
  Type st = t == Type::float64 ? Type::float64 : Type::float32;
  if(c.hasAttr("softmax_precision")) st = static_cast<Type>(c.attrInt("softmax_precision"));
  c.check(isFloat(st), "softmax_precision must be a float type, got ", st);
  const int64_t rep = qs[1] / ks[1];
  if(rep > 1) {  // each key/value head serves rep consecutive query heads
    auto repeatHeads = [&](Expr x) {
      const Shape& s = x->shape();
      return reshape(expand(unsqueeze(x, {2}), Shape{s[0], s[1], rep, s[2], s[3]}),
                     std::vector<int64_t>{s[0], s[1] * rep, s[2], s[3]});
    };
    k = repeatHeads(k);
    v = repeatHeads(v);
  }
  const bool exactScale = t != Type::float64 || double(static_cast<float>(scale)) == scale;
  Expr scores = cast(dot(exactScale ? q : q * scale, k, false, true, exactScale ? static_cast<float>(scale) : 1.f), st);
  auto modify = [&](const char* name, Expr x) {
    if(!c.hasAttr(name)) return x;
    c.check(c.subgraphNumInputs(name) == 1 && c.subgraphNumOutputs(name) == 1, name,
            " must have one input and one output");
    std::vector<OnnxValue> out = c.subgraph(name, {OnnxValue::of(x)});
    c.check(out.size() == 1 && out[0].kind == OnnxValue::Kind::Tensor, name, " must return one tensor");
    Expr y = out[0].tensor;
    c.check(y->shape() == x->shape(), name, " changed the shape ", x->shape(), " to ", y->shape());
    return cast(y, st);
  };
  scores = modify("score_mod", scores);
  Expr probs = modify("prob_mod", softmax(scores, -1));
  c.setOutput(0, cast(matmul(probs, cast(v, st)), t));
});

ONYX_ONNX_IMPORT(kOnnxRotaryEmbedding, "RotaryEmbedding", 23).importer([](OnnxImportCtx& c) {
  Expr x = c.input(0);
  const int64_t heads = c.attrInt("num_heads", 0), dim = c.attrInt("rotary_embedding_dim", 0);
  c.check(x->shape().rank() == 4 || heads > 0, "a 3-D input needs the num_heads attribute");
  c.check(dim >= 0, "rotary_embedding_dim must be >= 0, got ", dim);
  c.setOutput(0, rotary_embedding(x, c.input(1), c.input(2), c.hasInput(3) ? c.input(3) : nullptr,
                                  c.attrInt("interleaved", 0) != 0, dim, heads));
});

ONYX_ONNX_IMPORT(kOnnxLinearAttention, "LinearAttention", 27).importer([](OnnxImportCtx& c) {
  c.attrInt("chunk_size", 0);  // a tuning hint for chunked kernels; the result does not depend on it
  const int64_t qh = c.attrInt("q_num_heads"), kvh = c.attrInt("kv_num_heads");
  const std::string rule = c.attrString("update_rule", "gated_delta");
  c.check(rule == "linear" || rule == "gated" || rule == "delta" || rule == "gated_delta", "unknown update_rule '",
          rule, "'");
  const bool gated = rule == "gated" || rule == "gated_delta", delta = rule == "delta" || rule == "gated_delta";
  c.check(gated == c.hasInput(4), "update_rule '", rule, gated ? "' needs" : "' takes no", " decay (input 4)");
  c.check(delta == c.hasInput(5), "update_rule '", rule, delta ? "' needs" : "' takes no", " beta (input 5)");
  LinearAttentionResult r = linear_attention(
      c.input(0), c.input(1), c.input(2), c.hasInput(3) ? c.input(3) : nullptr, gated ? c.input(4) : nullptr,
      delta ? c.input(5) : nullptr, qh, kvh, c.attrFloat("scale", 0.0), rule);
  c.setOutput(0, r.output);
  if(c.numOutputs() > 1 && c.wantsOutput(1)) c.setOutput(1, r.state);
});

ONYX_ONNX_IMPORT(kOnnxCausalConvWithState, "CausalConvWithState", 27).importer([](OnnxImportCtx& c) {
  const std::string act = c.attrString("activation", "none");
  c.check(act == "none" || act == "silu" || act == "swish", "unknown activation '", act, "' (none, silu, swish)");
  CausalConvResult r = causal_conv_with_state(c.input(0), c.input(1), c.hasInput(2) ? c.input(2) : nullptr,
                                              c.hasInput(3) ? c.input(3) : nullptr, act);
  c.setOutput(0, r.y);
  if(c.numOutputs() > 1 && c.wantsOutput(1)) c.setOutput(1, r.state);
});

}  // namespace onyx
