#!/usr/bin/env python3
"""Writes the tiny bundled models that `tools/dev.sh demo` runs:
models/onnx/tiny_mlp/model.onnx and test_data_set_0 (inputs, and reference
outputs computed by onnxruntime, not by Onyx).

    python3 models/onnx/make_bundled.py
"""
import os

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

here = os.path.dirname(os.path.abspath(__file__))
out = os.path.join(here, "tiny_mlp")
rng = np.random.default_rng(7)

w1 = rng.standard_normal((4, 16)).astype(np.float32) * 0.5
b1 = rng.standard_normal(16).astype(np.float32) * 0.1
w2 = rng.standard_normal((16, 3)).astype(np.float32) * 0.5
b2 = rng.standard_normal(3).astype(np.float32) * 0.1

nodes = [
    helper.make_node("Gemm", ["x", "w1", "b1"], ["h"], name="fc1"),
    helper.make_node("Relu", ["h"], ["a"], name="relu1"),
    helper.make_node("Gemm", ["a", "w2", "b2"], ["logits"], name="fc2"),
    helper.make_node("Softmax", ["logits"], ["probs"], name="softmax", axis=-1),
]
graph = helper.make_graph(
    nodes, "tiny_mlp",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])],
    [helper.make_tensor_value_info("probs", TensorProto.FLOAT, ["N", 3])],
    [numpy_helper.from_array(a, n) for a, n in [(w1, "w1"), (b1, "b1"), (w2, "w2"), (b2, "b2")]])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="onyx")
model.ir_version = 8
onnx.checker.check_model(model, full_check=True)

os.makedirs(os.path.join(out, "test_data_set_0"), exist_ok=True)
onnx.save(model, os.path.join(out, "model.onnx"))
x = rng.standard_normal((5, 4)).astype(np.float32)
(probs,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
for name, arr in [("input_0", x), ("output_0", probs)]:
    with open(os.path.join(out, "test_data_set_0", name + ".pb"), "wb") as f:
        f.write(numpy_helper.from_array(arr).SerializeToString())
print("wrote", out)

# ---- tiny_cnn and the "bars" dataset: what `onnx-train` fine-tunes in the
# demo and in CI. Conv -> BatchNormalization -> Relu -> GlobalAveragePool ->
# Dropout -> Gemm, exported for inference (BatchNormalization trains with
# batch statistics in onnx-train). Untrained: random weights, zero biases.
cnn_out = os.path.join(here, "tiny_cnn")
rng = np.random.default_rng(11)
C, K = 8, 4
conv_w = (rng.standard_normal((C, 1, 3, 3)) * 0.4).astype(np.float32)
conv_b = np.zeros(C, np.float32)
bn_scale, bn_bias = np.ones(C, np.float32), np.zeros(C, np.float32)
bn_mean, bn_var = np.zeros(C, np.float32), np.ones(C, np.float32)
fc_w = (rng.standard_normal((K, C)) * 0.3).astype(np.float32)
fc_b = np.zeros(K, np.float32)
nodes = [
    helper.make_node("Conv", ["x", "conv.weight", "conv.bias"], ["c"], name="conv", pads=[1, 1, 1, 1]),
    helper.make_node("BatchNormalization", ["c", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"],
                     ["b"], name="bn", momentum=0.9, epsilon=1e-5),
    helper.make_node("Relu", ["b"], ["r"], name="relu"),
    helper.make_node("GlobalAveragePool", ["r"], ["p"], name="pool"),
    helper.make_node("Flatten", ["p"], ["f"], name="flatten"),
    helper.make_node("Dropout", ["f"], ["d"], name="dropout"),
    helper.make_node("Gemm", ["d", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1),
]
inits = [(conv_w, "conv.weight"), (conv_b, "conv.bias"), (bn_scale, "bn.weight"), (bn_bias, "bn.bias"),
         (bn_mean, "bn.running_mean"), (bn_var, "bn.running_var"), (fc_w, "fc.weight"), (fc_b, "fc.bias")]
graph = helper.make_graph(
    nodes, "tiny_cnn",
    [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 1, 8, 8])],
    [helper.make_tensor_value_info("logits", TensorProto.FLOAT, ["N", K])],
    [numpy_helper.from_array(a, n) for a, n in inits])
model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="onyx")
model.ir_version = 8
onnx.checker.check_model(model, full_check=True)
os.makedirs(os.path.join(cnn_out, "test_data_set_0"), exist_ok=True)
onnx.save(model, os.path.join(cnn_out, "model.onnx"))


def bars(n, seed):
    """8x8 images of one bar: 0 horizontal, 1 vertical, 2 diagonal, 3 anti-diagonal, with noise."""
    r = np.random.default_rng(seed)
    x = np.zeros((n, 1, 8, 8), np.float32)
    y = r.integers(0, K, n)
    for i in range(n):
        k = int(r.integers(0, 8))
        if y[i] == 0:
            x[i, 0, k, :] = 1
        elif y[i] == 1:
            x[i, 0, :, k] = 1
        else:
            o = int(r.integers(-3, 4))
            for j in range(8):
                c = j + o if y[i] == 2 else 7 - j + o
                if 0 <= c < 8:
                    x[i, 0, j, c] = 1
    x += r.normal(0, 0.3, x.shape).astype(np.float32)
    return x.astype(np.float16), y.astype(np.int64)


data = os.path.join(os.path.dirname(here), "data")
os.makedirs(data, exist_ok=True)
for name, n, seed in [("bars_train", 512, 1), ("bars_valid", 256, 2)]:
    x, y = bars(n, seed)
    np.savez(os.path.join(data, name + ".npz"), x=x, y=y)
x = bars(6, 3)[0].astype(np.float32)
(logits,) = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"]).run(None, {"x": x})
for name, arr in [("input_0", x), ("output_0", logits)]:
    with open(os.path.join(cnn_out, "test_data_set_0", name + ".pb"), "wb") as f:
        f.write(numpy_helper.from_array(arr).SerializeToString())
print("wrote", cnn_out, "and", data)
