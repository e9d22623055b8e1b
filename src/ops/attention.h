// Attention-style composites (src/ops/attention.cpp): scaled dot-product
// attention with grouped heads, masks, causal and sliding windows, soft
// capping; rotary position embeddings; linear attention recurrences; a
// causal depthwise convolution with carried state. The family has no
// registry op of its own: the composites are built from registry ops (matmul,
// softmax, where, ...), so gradients come with them.
#pragma once
#include <cstdint>
#include <string>

#include <onyx/core/types.h>
#include <onyx/graph/node.h>

namespace onyx {

struct AttentionOptions {
  double scale = 0;      // applied to q . k; 0: 1 / sqrt(head_size)
  double softcap = 0;    // > 0: scores become softcap * tanh(scores / softcap) (before the mask)
  bool causal = false;   // query i attends key j only if j <= i + offset
  int64_t offset = 0;    // keys before the query block (a cache's length); see kvLengths
  // Sliding window (-1: unbounded): query i attends key j only if
  // -rightWindow <= (i + offset) - j <= leftWindow.
  int64_t leftWindow = -1, rightWindow = -1;
  // Optional int32/int64 [batch]: keys j >= kvLengths[b] are masked, and the
  // offset of batch entry b becomes kvLengths[b] - q_len (ONNX nonpad_kv_seqlen).
  Expr kvLengths;
  Type softmaxType = Type::undefined;  // element type of the softmax (default: q's)
};

// Intermediate values of attention(), for ONNX's qk_matmul_output.
struct AttentionResult {
  Expr y;          // [B, Hq, L, Ev]
  Expr scores;     // scale * q . k^T                    [B, Hq, L, S]
  Expr capped;     // after the soft cap                 [B, Hq, L, S]
  Expr biased;     // after adding the mask              [B, Hq, L, S]
  Expr probs;      // after the softmax (q's type)       [B, Hq, L, S]
};

// softmax(scale * q . k^T + bias) . v with q [B, Hq, L, E], k [B, Hkv, S, E],
// v [B, Hkv, S, Ev]; Hq a multiple of Hkv (grouped-query attention: query
// head h reads key/value head h / (Hq / Hkv)). `mask` broadcasts to
// [B, Hq, L, S']: bool (true attends) or float (added to the scores); a last
// dim S' < S is padded with masked positions. A query row with every key
// masked gives zeros (not NaN).
AttentionResult attention_full(Expr q, Expr k, Expr v, Expr mask = nullptr, const AttentionOptions& o = {});
inline Expr attention(Expr q, Expr k, Expr v, Expr mask = nullptr, const AttentionOptions& o = {}) {
  return attention_full(q, k, v, mask, o).y;
}

// Rotary position embedding (ONNX RotaryEmbedding): x [B, H, S, D], or
// [B, S, H * D] with numHeads given; cos/sin [B, S, R/2], or [P, R/2] indexed
// by positionIds [B, S] when given. The first R = rotaryDim (0: D) features
// of each head are rotated in pairs (i, i + R/2), or (2i, 2i + 1) when
// interleaved; the rest pass through.
Expr rotary_embedding(Expr x, Expr cos, Expr sin, Expr positionIds = nullptr, bool interleaved = false,
                      int64_t rotaryDim = 0, int64_t numHeads = 0);

// Linear attention (ONNX LinearAttention), run as its recurrence over time:
// with state S [B, Hkv, dk, dv] per step t,
//   gated:  S = S * exp(decay_t)
//   delta:  v_t = beta_t * (v_t - S^T k_t)
//   S = S + k_t v_t^T;   out_t = scale * S^T q_t   (query head h reads state h / (Hq / Hkv))
// q [B, T, Hq * dk], k [B, T, Hkv * dk], v [B, T, Hkv * dv], decay [B, T, Hkv * dk] or
// [B, T, Hkv] (update rules "gated", "gated_delta"), beta [B, T, Hkv] or [B, T, 1]
// ("delta", "gated_delta"), pastState [B, Hkv, dk, dv] or null (zeros).
// Computes in float32 (float64 for float64 inputs). Returns {output [B, T, Hq * dv], state}.
struct LinearAttentionResult {
  Expr output, state;
};
LinearAttentionResult linear_attention(Expr q, Expr k, Expr v, Expr pastState, Expr decay, Expr beta,
                                       int64_t qNumHeads, int64_t kvNumHeads, double scale = 0,
                                       const std::string& updateRule = "gated_delta");

// Causal depthwise 1-D convolution with a carried state (ONNX
// CausalConvWithState): x [B, C, L], weight [C, 1, K], bias [C] or null,
// pastState [B, C, K-1] or null (zeros) is prepended; activation "none",
// "silu" or "swish". Returns {y [B, C, L], the last K-1 positions of the
// padded input}.
struct CausalConvResult {
  Expr y, state;
};
CausalConvResult causal_conv_with_state(Expr x, Expr weight, Expr bias = nullptr, Expr pastState = nullptr,
                                        const std::string& activation = "none");

}  // namespace onyx
