// Graph passes: rewrites of a built graph that keep its outputs' values
// (up to float rounding, stated per pass) and do less work. A Session runs
// them once per input-shape signature, after import and before the first
// forward(), at the level SessionOptions::optimization names; the graph it
// caches is the rewritten one. Each pass is a file of this folder; its rule
// and the condition under which it is legal are stated here, once.
//
// Every pass takes `keep`, the nodes whose values are observed from outside
// (graph outputs): those are never removed or merged away, and an
// intermediate a fusion stops materialising must have no reader outside the
// fused chain and must not be kept.
//
//   std::vector<Expr> outputs = {y};
//   PassCounts fired = optimizeGraph(*graph, outputs, OptLevel::all);
//   for(auto& [pass, n] : fired) std::cout << pass << ": " << n << "\n";
#pragma once
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include <onyx/graph/expression_graph.h>

namespace onyx {

// As onnxruntime's graph optimization levels: none runs no pass; basic the
// exact, device-independent ones (constant folding, no-op elimination,
// pruning); all adds the fusions into fused kernels.
enum class OptLevel { none, basic, all };
// "none" | "basic" | "all"; anything else is an onyx::Error naming the choices.
OptLevel parseOptLevel(const std::string& s);
const char* optLevelName(OptLevel level);

// Each pass that fired and how many rewrites it made, in the order run.
using PassCounts = std::vector<std::pair<std::string, size_t>>;

// Runs the passes of `level` in order, then prune. Fusions into kernels
// that exist only on the CPU (fused_conv) run only on CPU graphs, and none
// of the fusions run on graphs built for training (they would change which
// values autodiff sees).
// cpuKernels false leaves out the rewrites into CPU-kernel ops that have no
// ONNX form (fuse_conv, blocked_layout): for a graph that is to be exported
// (onnx-export --optimized).
// `disabled` names passes not to run (as onnxruntime's disabled
// optimizers; to measure what one pass buys); an unknown name is an
// onyx::Error listing the passes.
PassCounts optimizeGraph(ExpressionGraph& g, const std::vector<Expr>& keep, OptLevel level, bool cpuKernels = true,
                         const std::vector<std::string>& disabled = {});
// The fusions that keep a training graph's gradients, for a graph built
// for training (not inference) before forward(): each fused op has its
// own backward, so autodiff differentiates the fused node where it would
// have differentiated the chain (fuse_gelu: gelu, whose gradient is one
// gelu_grad pass where the chain's was about fifteen element-wise nodes;
// fuse_transpose_matmul: no transpose forward nor of the gradient
// backward; fuse_matmul_add: affine, the bias written under the GEMM's
// output instead of a pass of its own), then prune. `disabled` as
// optimizeGraph's (a name of passNames(); those not
// among these four have nothing to leave out here). `keep` as optimizeGraph's (the outputs the loss reads, the
// buffers' next values); a node the caller means to read or differentiate
// besides them must be in it too.
PassCounts optimizeTrainingGraph(ExpressionGraph& g, const std::vector<Expr>& keep,
                                 const std::vector<std::string>& disabled = {});
// The passes optimizeGraph runs at level all, in order.
const std::vector<std::string>& passNames();

// fuse_qdq: quantize_linear(conv(dequantize_linear(xq), dequantize_linear(wq)
// [, dequantize_linear(bq)])) with 8-bit xq, wq and output, x's and y's
// scale and zero point one constant value each, w's one or one per output
// channel, and the bias (if any) int32 with zero point 0 and scale x_scale *
// w_scale (float32, as onnxruntime's quantizer writes it) becomes one
// qlinear_conv (ONNX QLinearConv): the QDQ form of a quantized model runs as
// int8. Legal when the conv has no other reader and is not kept; the result
// is QLinearConv's (an integer sum, requantized once) where the float chain
// rounded the dequantized products and sums to float32 first: an output may
// differ by one unit of y's scale. CPU inference graphs only, and first: constant folding would
// otherwise turn a constant's dequantize_linear into float weights.
// It also drops the pair around a max pool: quantize_linear(max_pool(
// dequantize_linear(xq))) with the same one scale (in [2^-60, 2^60]) and
// zero point on both ends becomes max_pool(xq), exactly (dequantizing is
// increasing, and requantizing a dequantized 8-bit value gives it back).
// And a classifier's Gemm, affine(dequantize_linear(xq), dequantize_linear(
// wq int8 [N, K]), bias [N]) with transB, becomes matmul_integer_to_float
// on the int8 weights (float32 rounding apart).
size_t fuseQdq(ExpressionGraph& g, const std::vector<Expr>& keep);
// fuse_qlinear_add: QuantizeLinear(Relu?(Add(DequantizeLinear(a),
// DequantizeLinear(b)))) with one constant scale and zero point each, a, b
// and y of one 8-bit type, the add (and relu) read only by the next op
// becomes one qlinear_add (the residual adds of QDQ models). Legal because
// qlinear_add computes the same float32 steps: exact. CPU kernels only (an
// internal op, never exported), before int8_layout, which keeps its
// operands channels-last.
size_t fuseQLinearAdd(ExpressionGraph& g, const std::vector<Expr>& keep);
// fuse_matmul_integer_float: cast(matmul_integer(A, B, a_zp, b_zp), float32)
// * s [+ bias], what onnxruntime's quantize_dynamic writes for each MatMul
// (MatMulInteger -> Cast -> Mul by a_scale * b_scale -> Add of the bias),
// becomes one matmul_integer_to_float (onnxruntime's MatMulIntegerToFloat):
// one pass converts, scales and biases the int32 product instead of three. s is one
// value or one per column (when it is a * b of a one-value a, a and b become
// the op's a_scale and b_scale; otherwise a_scale 1, b_scale s), the bias
// float32 [N]. Legal when the product, the cast (and the mul, when the add is
// taken) have no other reader and are not kept; exact (the same float32
// multiply and add, in the same order). CPU kernels only.
size_t fuseMatmulIntegerFloat(ExpressionGraph& g, const std::vector<Expr>& keep);
// fold_constants: an op node all of whose inputs are constants (and that is
// not stochastic) becomes a constant holding its value, computed once.
// Legal for any deterministic op; skipped where the value would be much
// larger than its inputs (an Expand of a scalar to a large shape), which
// would trade a cheap op for resident memory, except dequantize_linear (a
// quantized model's float weights, read every run). Exact (the same kernel
// runs).
size_t foldConstants(ExpressionGraph& g, const std::vector<Expr>& keep);

// eliminate_noops: reshape/flatten/expand to the input's own shape, cast to
// the input's own type and transpose by the identity permutation read their
// input instead; reshape of reshape and transpose of transpose become one
// op (none when the permutations cancel). Exact.
size_t eliminateNoOps(ExpressionGraph& g, const std::vector<Expr>& keep);

// fold_batch_norm: conv (constant W, constant or no bias) followed by
// channel_affine (inference batch norm, constant s and t) becomes one conv
// with W' = W * s[co] and b' = b * s + t. Legal when the conv has no other
// reader and is not kept; W' rounds once more than W then s (float rounding).
size_t foldBatchNorm(ExpressionGraph& g, const std::vector<Expr>& keep);

// fuse_gelu: x * 0.5 * (1 + erf(x / sqrt(2))) as exporters write it (any
// association of the two products, division by sqrt(2) or multiplication
// by 1/sqrt(2)) becomes gelu(x). Legal when the intermediates have no other
// reader and are not kept. Within gelu's stated accuracy (vecmath.h).
size_t fuseGelu(ExpressionGraph& g, const std::vector<Expr>& keep);
// fuse_transpose_matmul: matmul(transpose(a), b) where the transpose swaps
// a's last two dims (and keeps the others) becomes matmul(a, b) with transA
// flipped; likewise for b. PyTorch exports nn.Linear inside attention and
// K^T in attention scores this way. Legal when the transpose has no other
// reader and is not kept; exact (the GEMM reads the operand transposed).
// Training graphs too: matmul's backward gives a's gradient directly.
size_t fuseTransposeMatmul(ExpressionGraph& g, const std::vector<Expr>& keep);

// fuse_matmul_add: matmul(x, W) + b with a 2-D W and b broadcasting to the
// product's shape (a bias [N] or [1, N]) becomes affine(x, W, b): the bias
// is written first and the GEMM accumulates onto it. Legal when the matmul
// has no other reader and is not kept; the sum rounds in another order.
size_t fuseMatmulAdd(ExpressionGraph& g, const std::vector<Expr>& keep);

// fuse_conv: conv -> [activation] -> [add residual -> [relu]] becomes one
// fused_conv, where the activation is relu, leaky_relu, clip (finite
// bounds), hard_sigmoid, hard_swish, swish, gelu, sigmoid, tanh, or
// x * sigmoid(x) written as sigmoid + mul (SiLU as PyTorch exports it), and
// the residual is the add's other input, of the conv's shape and type.
// Legal when every intermediate (the conv, the activation and the add) has
// exactly one consumer in the chain and is not kept. Float types only.
// Rewrites each chain in place (its last node becomes the fused_conv, the
// others are retired); returns how many were fused.
size_t fuseConvEpilogues(ExpressionGraph& g, const std::vector<Expr>& keep);

// fuse_squeeze_excite: the squeeze-and-excitation ops of EfficientNet-style
// blocks, read by convolutions, move into them: mean(x) over the spatial
// axes (keepdims) read only by a convolution as its image becomes that
// convolution with x_mean (the convolution of x's spatial mean), and x * s
// with s [N, C, 1, 1] read only by a convolution as its image becomes that
// convolution with x_scale s (of x times s). Then x's readers are all
// convolutions and blocked_layout can keep it in oneDNN's layout: the
// reorders around the squeeze-and-excitation ops go. Legal when the mean or
// mul has no other reader and is not kept; the product is the mul's own
// float32 product, the mean sums in double in another order. Float32 2-D
// convolutions, CPU only, before blocked_layout.
size_t fuseSqueezeExcite(ExpressionGraph& g, const std::vector<Expr>& keep);

// fuse_channel_affine: concat along the channels -> channel_affine (an
// inference batch norm) reads the concatenation's inputs in place (one
// channel_affine of parts), and channel_affine -> relu becomes one
// channel_affine with relu: DenseNet's concat -> BatchNorm -> Relu as one
// pass over the features instead of three. Legal when the concat (the
// affine) has no other reader than the affine (the relu) and is not kept;
// exact (the same multiply-add and relu per element). CPU only (the op has
// no GPU kernel), before blocked_layout, which keeps the fused op blocked.
size_t fuseChannelAffine(ExpressionGraph& g, const std::vector<Expr>& keep);

// blocked_layout: a float32 2-D convolution's output that only
// convolutions read (as their image or residual) and that is not kept stays
// in oneDNN's channel-blocked layout (nChw8c with AVX2, nChw16c with
// AVX-512; channel counts a multiple of the block): the writer and its
// readers become fused_conv nodes whose x_block / y_block / residual_block
// say so, and the reorders in and out of the plain layout around each
// convolution go. A 2-D max_pool or average_pool, a channel_affine, a relu
// or a concat along the channels (each input's a multiple of the block)
// whose image inputs all stay blocked may be read so too, and stays blocked
// itself (its `block`; relu does not see the layout) under the same rule
// (SqueezeNet's fire modules and pools; DenseNet's concatenations, batch
// norms and transitions). Legal because no other op ever reads such a
// value; exact (the same kernels and sums; the pools, the affine and the
// concatenation compute the same values in either layout). CPU only;
// returns the number of tensors kept blocked.
size_t blockConvChains(ExpressionGraph& g, const std::vector<Expr>& keep);
// int8_layout: a value written by a 2-D qlinear_conv (whose oneDNN int8
// and float paths both read and write NHWC), or by an element-wise op of
// such values (quantize/dequantize per tensor, add, mul,
// activations: inputs of one shape or one value), stays channels-last
// (NHWC, oneDNN's int8 layout) when every reader is such an op or a
// qlinear_conv reading it as x: those qlinear_conv nodes get x_nhwc /
// y_nhwc, and the reorders around each convolution go. Legal because
// element-wise ops over same-shaped tensors do not see the layout and no
// other op reads such a value; exact. CPU only; returns the number of
// convolution outputs kept channels-last.
size_t int8Layout(ExpressionGraph& g, const std::vector<Expr>& keep);

}  // namespace onyx
