#!/usr/bin/env python3
"""Builds small real-architecture ONNX models for tests and benchmarks.

    python3 models/onnx/make_models.py --out /tmp/models

Writes resnet.onnx, mobilenet.onnx, bert.onnx and mlp.onnx (float32 weights
from a fixed seed, opset 17, symbolic batch dim "N"), each checked with
onnx.checker.check_model(full_check=True). The same module gives the inputs
the tests and the benchmark feed them (make_inputs).

Architectures:
  resnet    ResNet-style: conv/batchnorm/relu stem, maxpool, three basic
            residual blocks (the last two with stride 2 and a 1x1 projection),
            global average pool, flatten, gemm. Input float32[N,3,32,32].
  mobilenet MobileNet-v1 style: conv stem, depthwise (group=C) + pointwise
            conv blocks, each conv followed by BatchNormalization and Relu6
            (Clip 0..6), global average pool, flatten, gemm. Input float32[N,3,32,32].
  bert      BERT-style encoder: token (Gather) + position embeddings,
            LayerNormalization, 2 layers of multi-head self-attention
            (MatMul+Add projections, Reshape/Transpose into heads, scaled
            Q.K^T, Softmax, context, output projection) and a Gelu (via Erf)
            feed-forward block, each with a residual and LayerNormalization.
            Input int64[N,16] token ids in [0, 100).
  mlp       3-layer perceptron (Gemm, MatMul+Add, Relu, Tanh, Softmax).
            Input float32[N,64].
"""
import argparse
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

OPSET = 17
SEED = 20240601

BERT_VOCAB = 100
BERT_SEQ = 16
BERT_HIDDEN = 64
BERT_HEADS = 4
BERT_FFN = 256
BERT_LAYERS = 2


class Builder:
    """Collects nodes and initializers; names values uniquely."""

    def __init__(self, seed):
        self.rng = np.random.default_rng(seed)
        self.nodes = []
        self.inits = []
        self.count = {}

    def name(self, base):
        n = self.count.get(base, 0)
        self.count[base] = n + 1
        return f"{base}_{n}"

    def const(self, base, array):
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(array), name))
        return name

    def weight(self, base, shape, fan_in, gain=1.0):
        w = self.rng.standard_normal(shape) * (gain / np.sqrt(fan_in))
        return self.const(base, w.astype(np.float32))

    def uniform(self, base, shape, lo, hi):
        return self.const(base, self.rng.uniform(lo, hi, shape).astype(np.float32))

    def op(self, op_type, inputs, n_out=1, **attrs):
        outs = [self.name(op_type.lower()) for _ in range(n_out)]
        self.nodes.append(helper.make_node(op_type, inputs, outs, name=self.name("n_" + op_type), **attrs))
        return outs[0] if n_out == 1 else outs

    # ---- layers ----
    def conv(self, x, cin, cout, k, stride=1, group=1, bias=False):
        w = self.weight("conv_w", (cout, cin // group, k, k), fan_in=(cin // group) * k * k, gain=np.sqrt(2.0))
        ins = [x, w]
        if bias:
            ins.append(self.uniform("conv_b", (cout,), -0.1, 0.1))
        pad = k // 2
        return self.op("Conv", ins, kernel_shape=[k, k], strides=[stride, stride],
                       pads=[pad, pad, pad, pad], group=group)

    def batchnorm(self, x, c):
        scale = self.uniform("bn_scale", (c,), 0.5, 1.5)
        bias = self.uniform("bn_bias", (c,), -0.2, 0.2)
        mean = self.uniform("bn_mean", (c,), -0.2, 0.2)
        var = self.uniform("bn_var", (c,), 0.5, 1.5)
        return self.op("BatchNormalization", [x, scale, bias, mean, var], epsilon=1e-5, momentum=0.9)

    def relu6(self, x):
        lo = self.const("clip_min", np.array(0.0, dtype=np.float32))
        hi = self.const("clip_max", np.array(6.0, dtype=np.float32))
        return self.op("Clip", [x, lo, hi])

    def linear(self, x, din, dout, gain=1.0):
        """MatMul + Add (x: [..., din])."""
        w = self.weight("lin_w", (din, dout), fan_in=din, gain=gain)
        b = self.uniform("lin_b", (dout,), -0.1, 0.1)
        return self.op("Add", [self.op("MatMul", [x, w]), b])

    def gemm(self, x, din, dout, trans_b=True, gain=1.0):
        shape = (dout, din) if trans_b else (din, dout)
        w = self.weight("gemm_w", shape, fan_in=din, gain=gain)
        b = self.uniform("gemm_b", (dout,), -0.1, 0.1)
        return self.op("Gemm", [x, w, b], alpha=1.0, beta=1.0, transB=1 if trans_b else 0)

    def layernorm(self, x, h):
        scale = self.uniform("ln_scale", (h,), 0.8, 1.2)
        bias = self.uniform("ln_bias", (h,), -0.1, 0.1)
        return self.op("LayerNormalization", [x, scale, bias], axis=-1, epsilon=1e-5)

    def gelu(self, x):
        """0.5 * x * (1 + erf(x / sqrt(2)))."""
        inv_sqrt2 = self.const("inv_sqrt2", np.array(1.0 / np.sqrt(2.0), dtype=np.float32))
        one = self.const("one", np.array(1.0, dtype=np.float32))
        half = self.const("half", np.array(0.5, dtype=np.float32))
        e = self.op("Erf", [self.op("Mul", [x, inv_sqrt2])])
        return self.op("Mul", [self.op("Mul", [x, half]), self.op("Add", [e, one])])

    def model(self, graph_name, inputs, outputs, doc):
        graph = helper.make_graph(self.nodes, graph_name, inputs, outputs, self.inits)
        m = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)],
                              producer_name="onyx-make-models", doc_string=doc)
        m.ir_version = 8  # opset 17's IR version
        return m


def image_input():
    return helper.make_tensor_value_info("image", TensorProto.FLOAT, ["N", 3, 32, 32])


def make_resnet():
    b = Builder(SEED + 1)
    x = "image"
    x = b.op("Relu", [b.batchnorm(b.conv(x, 3, 16, 3), 16)])
    x = b.op("MaxPool", [x], kernel_shape=[3, 3], strides=[2, 2], pads=[1, 1, 1, 1])  # 16x16

    def block(x, cin, cout, stride):
        y = b.op("Relu", [b.batchnorm(b.conv(x, cin, cout, 3, stride), cout)])
        y = b.batchnorm(b.conv(y, cout, cout, 3), cout)
        short = x
        if stride != 1 or cin != cout:
            short = b.batchnorm(b.conv(x, cin, cout, 1, stride), cout)
        return b.op("Relu", [b.op("Add", [y, short])])

    x = block(x, 16, 16, 1)
    x = block(x, 16, 32, 2)  # 8x8
    x = block(x, 32, 64, 2)  # 4x4
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    logits = b.gemm(x, 64, 10)
    b.nodes[-1].output[0] = "logits"
    return b.model("resnet", [image_input()],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                   "small ResNet (3 basic blocks) for 32x32 images")


def make_mobilenet():
    b = Builder(SEED + 2)
    x = b.relu6(b.batchnorm(b.conv("image", 3, 16, 3, stride=2, bias=True), 16))  # 16x16
    c = 16
    for cout, stride in [(32, 1), (64, 2), (64, 1), (128, 2), (128, 1)]:
        x = b.relu6(b.batchnorm(b.conv(x, c, c, 3, stride, group=c), c))  # depthwise
        x = b.relu6(b.batchnorm(b.conv(x, c, cout, 1), cout))  # pointwise
        c = cout
    x = b.op("Flatten", [b.op("GlobalAveragePool", [x])], axis=1)
    b.gemm(x, c, 10)
    b.nodes[-1].output[0] = "logits"
    return b.model("mobilenet", [image_input()],
                   [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", 10])],
                   "MobileNet-v1 style depthwise-separable net for 32x32 images")


def make_bert():
    b = Builder(SEED + 3)
    H, NH, S = BERT_HIDDEN, BERT_HEADS, BERT_SEQ
    D = H // NH
    tok = b.const("tok_emb", (b.rng.standard_normal((BERT_VOCAB, H)) * 0.5).astype(np.float32))
    pos = b.const("pos_emb", (b.rng.standard_normal((S, H)) * 0.5).astype(np.float32))
    x = b.op("Add", [b.op("Gather", [tok, "input_ids"], axis=0), pos])
    x = b.layernorm(x, H)
    heads_shape = b.const("heads_shape", np.array([0, 0, NH, D], dtype=np.int64))
    merge_shape = b.const("merge_shape", np.array([0, 0, H], dtype=np.int64))
    scale = b.const("attn_scale", np.array(1.0 / np.sqrt(D), dtype=np.float32))
    for _ in range(BERT_LAYERS):
        def heads(t, perm):
            return b.op("Transpose", [b.op("Reshape", [t, heads_shape])], perm=perm)
        q = heads(b.linear(x, H, H), [0, 2, 1, 3])  # [N, NH, S, D]
        k = heads(b.linear(x, H, H), [0, 2, 3, 1])  # [N, NH, D, S]
        v = heads(b.linear(x, H, H), [0, 2, 1, 3])  # [N, NH, S, D]
        scores = b.op("Mul", [b.op("MatMul", [q, k]), scale])  # [N, NH, S, S]
        probs = b.op("Softmax", [scores], axis=-1)
        ctx = b.op("Transpose", [b.op("MatMul", [probs, v])], perm=[0, 2, 1, 3])  # [N, S, NH, D]
        ctx = b.op("Reshape", [ctx, merge_shape])  # [N, S, H]
        x = b.layernorm(b.op("Add", [x, b.linear(ctx, H, H)]), H)
        ff = b.linear(b.gelu(b.linear(x, H, BERT_FFN)), BERT_FFN, H)
        x = b.layernorm(b.op("Add", [x, ff]), H)
    b.nodes[-1].output[0] = "hidden"
    return b.model("bert", [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["N", S])],
                   [helper.make_tensor_value_info("hidden", TensorProto.FLOAT, ["N", S, H])],
                   f"BERT-style encoder: {BERT_LAYERS} layers, hidden {H}, {NH} heads, seq {S}")


def make_mlp():
    b = Builder(SEED + 4)
    x = b.op("Relu", [b.gemm("x", 64, 128, gain=np.sqrt(2.0))])
    x = b.op("Tanh", [b.linear(x, 128, 128)])
    x = b.gemm(x, 128, 10, trans_b=False)
    b.op("Softmax", [x], axis=-1)
    b.nodes[-1].output[0] = "probs"
    return b.model("mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])],
                   [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 10])],
                   "3-layer perceptron")


BUILDERS = {
    "resnet": make_resnet,
    "mobilenet": make_mobilenet,
    "bert": make_bert,
    "mlp": make_mlp,
}


def make_inputs(name, batch, seed=0):
    """The inputs for model `name` with batch size `batch` (name -> numpy array)."""
    rng = np.random.default_rng(seed)
    if name in ("resnet", "mobilenet"):
        return {"image": rng.standard_normal((batch, 3, 32, 32)).astype(np.float32)}
    if name == "bert":
        return {"input_ids": rng.integers(0, BERT_VOCAB, (batch, BERT_SEQ), dtype=np.int64)}
    if name == "mlp":
        return {"x": rng.standard_normal((batch, 64)).astype(np.float32)}
    raise KeyError(name)


def build(name):
    m = BUILDERS[name]()
    onnx.checker.check_model(m, full_check=True)
    return m


def write_all(out_dir, names=None):
    """Builds, checks and writes the models; returns name -> path."""
    os.makedirs(out_dir, exist_ok=True)
    paths = {}
    for name in names or BUILDERS:
        path = os.path.join(out_dir, name + ".onnx")
        onnx.save(build(name), path)
        paths[name] = path
    return paths


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="folder for the .onnx files")
    ap.add_argument("--models", nargs="*", choices=sorted(BUILDERS), help="only these (default: all)")
    args = ap.parse_args(argv)
    for name, path in write_all(args.out, args.models).items():
        print(f"{name}: {path} ({os.path.getsize(path)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
