#include <cstring>

#include <onyx/graph/passes/passes.h>
#include <onyx/graph/passes/uses.h>

namespace onyx {

using passes::isOp;

namespace {

// A host constant's tensor, seen through reshapes (the import lines a
// per-channel scale up with x by one); null when n is none.
Tensor constantOf(Node* n) {
  while(n && isOp(n, "reshape")) n = n->child(0).get();
  if(!n || n->kind() != NodeKind::Constant) return nullptr;
  Tensor t = n->val();
  if(!t) return nullptr;
  return t->onHost() ? t : t->hostCopy();
}

bool is8Bit(Type t) { return t == Type::uint8 || t == Type::int8; }

// The same values as a new constant of shape s.
Expr reshaped(ExpressionGraph& g, const Tensor& t, const Shape& s) {
  Tensor r = TensorBase::create(s, t->type());
  std::memcpy(r->raw(), t->raw(), typeBytes(t->type(), size_t(t->size())));
  return g.constant(r);
}

// A dequantize_linear whose x is 8-bit and whose scale (float32) and zero
// point are constants of one value, or (perChannel > 1) of one value or one
// per entry of axis 0: its x and parameters.
struct Dq {
  Expr x;
  Tensor scaleT, zpT;
  // The parameters as qlinear_conv takes them: shape [] (one value) or [k].
  Expr scale(ExpressionGraph& g) const { return reshaped(g, scaleT, shapeOf(scaleT)); }
  Expr zp(ExpressionGraph& g) const { return reshaped(g, zpT, shapeOf(zpT)); }
  static Shape shapeOf(const Tensor& t) { return t->size() == 1 ? Shape() : Shape({t->size()}); }
};

bool matchDq(Node* n, int64_t perChannel, Dq& d) {
  if(!isOp(n, "dequantize_linear") || n->value_type() != Type::float32) return false;
  Expr x = n->child(0);
  if(!is8Bit(x->value_type())) return false;
  Tensor s = constantOf(n->child(1).get()), z = constantOf(n->child(2).get());
  if(!s || !z || s->type() != Type::float32) return false;
  const int64_t k = s->size();
  if(z->size() != k || (k != 1 && k != perChannel)) return false;
  if(k > 1) {  // per channel: along axis 0 of x, every other dim of the aligned parameter 1
    const Shape& ps = n->child(1)->shape();
    if(ps.rank() != x->shape().rank() || ps[0] != k || ps.elements() != k) return false;
  }
  d.x = x;
  d.scaleT = s;
  d.zpT = z;
  return true;
}

// The bias of a QDQ convolution: DequantizeLinear of int32 values with a
// zero point of 0 and the scale x_scale * w_scale[m] (float32, as the
// quantizer computes it), so that the int32 values add to the sums as they
// are. Null when the conv has none; false when it has another.
bool matchBias(Node* conv, const Dq& x, const Dq& w, int64_t M, Expr& b) {
  if(conv->numChildren() < 3) return true;
  Node* n = conv->child(2).get();
  if(!isOp(n, "dequantize_linear") || n->child(0)->value_type() != Type::int32) return false;
  Tensor s = constantOf(n->child(1).get()), z = constantOf(n->child(2).get());
  if(!s || !z || s->type() != Type::float32 || (s->size() != 1 && s->size() != M)) return false;
  for(int64_t i = 0; i < z->size(); ++i)
    if(z->getAsDouble(i) != 0) return false;
  const float xs = x.scaleT->data<float>()[0];
  for(int64_t m = 0; m < M; ++m) {
    const float ws = w.scaleT->data<float>()[w.scaleT->size() == 1 ? 0 : m];
    if(s->data<float>()[s->size() == 1 ? 0 : m] != xs * ws) return false;
  }
  b = n->child(0);
  return b->shape() == Shape({M});
}

// quantize_linear(max_pool(dequantize_linear(xq))) with the same one scale
// and zero point on both ends: max_pool(xq) on the 8-bit values. Exact:
// dequantizing is increasing (scale > 0), so the window's maximum is the
// dequantized maximum, and quantizing it again with the same parameters
// gives xq's value back (|xq - zp| <= 255 rounds to itself for a scale in
// [2^-60, 2^60]).
bool dropQdqAroundMaxPool(ExpressionGraph& g, const passes::Uses& uses, const Expr& e) {
  Node* q = e.get();
  Node* pool = q->child(0).get();
  if(!isOp(pool, "max_pool") || pool->value_type() != Type::float32 || uses.only(pool) != q) return false;
  Dq x;
  if(!matchDq(pool->child(0).get(), 1, x) || x.x->value_type() != q->value_type()) return false;
  Tensor ys = constantOf(q->child(1).get()), yz = constantOf(q->child(2).get());
  if(!ys || !yz || ys->size() != 1 || yz->size() != 1 || ys->type() != Type::float32) return false;
  const float s = ys->data<float>()[0];
  if(!(s >= 0x1p-60f && s <= 0x1p60f) || x.scaleT->data<float>()[0] != s ||
     x.zpT->getAsDouble(0) != yz->getAsDouble(0))
    return false;
  const Attrs a = pool->attrs();
  g.redefine(e, *pool->op(), {x.x},
             {{"kernel_shape", a["kernel_shape"]}, {"strides", a["strides"]}, {"pads", a["pads"]},
              {"dilations", a["dilations"]}, {"ceil_mode", a["ceil_mode"]}});
  g.retire(Expr(pool));
  return true;
}

// affine(dequantize_linear(xq), dequantize_linear(wq), bias) with transB (a
// classifier's Gemm: W [N, K]), alpha 1, xq 8-bit with one scale and zero
// point, wq int8 constant with one or one per row (output column) and a
// float32 bias [N] (or matmul without one): matmul_integer_to_float(xq,
// wq^T, ...), the exact integer sums scaled once, where the float chain
// rounded each dequantized product (the outputs agree to float32
// rounding). The int8 weights stay int8 (a quarter of the float weights'
// memory, which a batch-1 classifier is bound by).
bool qdqGemm(ExpressionGraph& g, const passes::Uses& uses, const Expr& e) {
  Node* n = e.get();
  const bool isAffine = isOp(n, "affine");
  if((!isAffine && !isOp(n, "matmul")) || n->value_type() != Type::float32 || n->shape().rank() != 2) return false;
  const Attrs a = n->attrs();
  if(a.i("transA") != 0 || a.i("transB") != 1 || a.f("alpha") != 1.0) return false;
  const int64_t N = n->shape()[1];
  Dq x, w;
  if(!matchDq(n->child(0).get(), 1, x) || !matchDq(n->child(1).get(), N, w)) return false;
  if(uses.only(n->child(1).get()) != n) return false;  // the float weights read by nothing else
  Tensor wq = constantOf(w.x.get());
  if(!wq || wq->type() != Type::int8 || wq->shape().rank() != 2 || wq->shape()[0] != N) return false;
  Expr bias;
  if(isAffine) {
    bias = n->child(2);
    if(bias->value_type() != Type::float32 || bias->shape() != Shape({N})) return false;
  }
  const int64_t K = wq->shape()[1];
  Tensor wt = TensorBase::create(Shape({K, N}), Type::int8);
  const int8_t* src = wq->data<int8_t>();
  int8_t* dst = wt->data<int8_t>();
  for(int64_t i = 0; i < N; ++i)
    for(int64_t k = 0; k < K; ++k) dst[k * N + i] = src[i * K + k];
  std::vector<Expr> in{x.x, g.constant(wt), x.scale(g), w.scale(g), x.zp(g), w.zp(g)};
  if(bias) in.push_back(bias);
  g.redefine(e, Registry::instance().get("matmul_integer_to_float"), in, {});
  return true;
}

}  // namespace

size_t fuseQdq(ExpressionGraph& g, const std::vector<Expr>& keep) {
  passes::Uses uses(g, keep);
  const OpDef& qconv = Registry::instance().get("qlinear_conv");
  size_t count = 0;
  for(const Expr& e : g.nodes()) {
    Node* q = e.get();
    if(qdqGemm(g, uses, e)) {
      ++count;
      continue;
    }
    if(!isOp(q, "quantize_linear") || !is8Bit(q->value_type())) continue;
    if(dropQdqAroundMaxPool(g, uses, e)) {
      ++count;
      continue;
    }
    Node* conv = q->child(0).get();
    if(!isOp(conv, "conv") || conv->value_type() != Type::float32 || uses.only(conv) != q) continue;
    Tensor ys = constantOf(q->child(1).get()), yz = constantOf(q->child(2).get());
    if(!ys || !yz || ys->size() != 1 || yz->size() != 1 || ys->type() != Type::float32) continue;
    const int64_t M = conv->shape()[1];
    Dq x, w;
    if(!matchDq(conv->child(0).get(), 1, x) || !matchDq(conv->child(1).get(), M, w)) continue;
    Expr b;
    if(!matchBias(conv, x, w, M, b)) continue;
    std::vector<Expr> in{x.x, x.scale(g), x.zp(g), w.x, w.scale(g), w.zp(g), reshaped(g, ys, Shape()), reshaped(g, yz, Shape())};
    if(b) in.push_back(b);
    const Attrs a = conv->attrs();
    g.redefine(e, qconv, in,
               {{"strides", a["strides"]}, {"dilations", a["dilations"]}, {"pads", a["pads"]}, {"group", a["group"]}});
    g.retire(Expr(conv));
    ++count;
  }
  return count;
}

size_t fuseQLinearAdd(ExpressionGraph& g, const std::vector<Expr>& keep) {
  passes::Uses uses(g, keep);
  size_t count = 0;
  const OpDef& qadd = Registry::instance().get("qlinear_add");
  for(const Expr& e : g.nodes()) {
    Node* q = e.get();
    if(!isOp(q, "quantize_linear") || !is8Bit(q->value_type())) continue;
    Node* relu = isOp(q->child(0).get(), "relu") ? q->child(0).get() : nullptr;
    Node* add = relu ? relu->child(0).get() : q->child(0).get();
    if(!isOp(add, "add") || add->value_type() != Type::float32 || add->shape() != q->shape()) continue;
    if(uses.only(relu ? relu : add) != q || (relu && uses.only(add) != relu)) continue;
    Tensor ys = constantOf(q->child(1).get()), yz = constantOf(q->child(2).get());
    if(!ys || !yz || ys->size() != 1 || yz->size() != 1 || ys->type() != Type::float32) continue;
    Dq a, b;
    if(!matchDq(add->child(0).get(), 1, a) || !matchDq(add->child(1).get(), 1, b)) continue;
    if(a.x->value_type() != q->value_type() || b.x->value_type() != q->value_type()) continue;
    const double az = a.zpT->getAsDouble(0), bz = b.zpT->getAsDouble(0), yzv = yz->getAsDouble(0);
    g.redefine(e, qadd, {a.x, b.x},
               {{"a_scale", AttrValue(double(a.scaleT->data<float>()[0]))},
                {"a_zero_point", AttrValue(int64_t(az))},
                {"b_scale", AttrValue(double(b.scaleT->data<float>()[0]))},
                {"b_zero_point", AttrValue(int64_t(bz))},
                {"y_scale", AttrValue(double(ys->data<float>()[0]))},
                {"y_zero_point", AttrValue(int64_t(yzv))},
                {"relu", AttrValue(int64_t(relu ? 1 : 0))}});
    if(relu) g.retire(Expr(relu));
    g.retire(Expr(add));
    ++count;
  }
  return count;
}

}  // namespace onyx
