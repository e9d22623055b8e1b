#!/usr/bin/env python3
"""Writes the tiny bundled model that `tools/dev.sh demo` runs:
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
