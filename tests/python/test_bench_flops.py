"""tools/bench_models.py's FLOP count (which bench_vs_ort.py divides by the
latency for GFLOP/s) on one node of each counted kind, against the count
written out by hand. Needs onnx only (no PyTorch).

    python3 -m pytest -q tests/python/test_bench_flops.py
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from conftest import REPO

sys.path.insert(0, os.path.join(REPO, "tools"))

import bench_models  # noqa: E402


def model_of(node, inputs, weights, output):
    g = helper.make_graph([node], "g", [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in inputs],
                          [helper.make_tensor_value_info(output, TensorProto.FLOAT, None)],
                          [numpy_helper.from_array(np.zeros(s, np.float32), n) for n, s in weights])
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def flops(node, inputs, weights, output="y"):
    total, by_op = bench_models.count_flops(model_of(node, inputs, weights, output))
    assert by_op == {node.op_type: total}
    return total


def test_conv_counts_each_output_against_its_groups_weights():
    node = helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1], group=2)
    # y [1, 6, 8, 8]; each output element: C/group * 3 * 3 = 2 * 9 multiply-adds
    assert flops(node, [("x", [1, 4, 8, 8])], [("w", [6, 2, 3, 3])]) == 2 * (6 * 8 * 8) * (2 * 9)


def test_conv_transpose_counts_each_input_against_its_groups_weights():
    node = helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[2, 2])
    assert flops(node, [("x", [2, 4, 5, 5])], [("w", [4, 3, 2, 2])]) == 2 * (2 * 4 * 5 * 5) * (3 * 2 * 2)


def test_gemm_and_matmul():
    gemm = helper.make_node("Gemm", ["a", "b"], ["y"], transA=1)
    assert flops(gemm, [("a", [4, 3])], [("b", [4, 5])]) == 2 * 3 * 5 * 4
    matmul = helper.make_node("MatMul", ["a", "b"], ["y"])
    assert flops(matmul, [("a", [2, 7, 3, 4])], [("b", [4, 5])]) == 2 * (2 * 7 * 3 * 5) * 4


def test_lstm_counts_its_gate_gemms_per_direction_and_step():
    seq, batch, inp, hidden = 5, 2, 3, 4
    node = helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=hidden, direction="bidirectional")
    got = flops(node, [("x", [seq, batch, inp])], [("w", [2, 4 * hidden, inp]), ("r", [2, 4 * hidden, hidden])])
    assert got == 2 * 2 * seq * batch * (4 * hidden) * (inp + hidden)
    node = helper.make_node("LSTM", ["x", "w", "r"], ["y"], hidden_size=hidden, layout=1)  # [batch, seq, input]
    got = flops(node, [("x", [batch, seq, inp])], [("w", [1, 4 * hidden, inp]), ("r", [1, 4 * hidden, hidden])])
    assert got == 2 * seq * batch * (4 * hidden) * (inp + hidden)


def test_an_unknown_shape_is_an_error_not_a_silent_zero():
    node = helper.make_node("MatMul", ["a", "b"], ["y"])
    m = model_of(node, [("a", ["n", 4])], [("b", [4, 5])], "y")
    try:
        bench_models.count_flops(m)
    except ValueError as e:
        assert "MatMul" in str(e)
    else:
        raise AssertionError("count_flops counted a MatMul of unknown size")
