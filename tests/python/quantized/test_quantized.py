"""Quantized models (docs/quantization.md): single quantized ops against
ONNX's reference and onnxruntime, and real architectures quantized with
onnxruntime.quantization, run by Onyx (onnx-run) and onnxruntime on the
same inputs.

    ONYX_BIN_DIR=build/tools python3 -m pytest -q tests/python/quantized
"""
import collections
import itertools
import os
import subprocess
import sys

import numpy as np
import onnx
import onnx.version_converter
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx.reference import ReferenceEvaluator

import onnxruntime as ort
from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                      quantize_static)
from onnxruntime.quantization.shape_inference import quant_pre_process

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from conftest import make_models, tool  # noqa: E402


def run_onyx(model_path, inputs, work_dir, extra=()):
    os.makedirs(work_dir, exist_ok=True)
    out_dir = os.path.join(work_dir, "out")
    cmd = [tool("onnx-run"), str(model_path), "--output-dir", out_dir, *extra]
    for name, value in inputs.items():
        path = os.path.join(work_dir, name + ".npy")
        np.save(path, value)
        cmd += ["--input", f"{name}={path}"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, f"onnx-run failed ({r.returncode}): {r.stderr.strip()}"
    return {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir) if f.endswith(".npy")}


def run_ort(model_path, inputs):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, inputs)))


def save(model, path):
    onnx.save(model, str(path))
    return path


# ------------------------------------- QuantizeLinear to the storage types

STORAGE_TYPES = ["INT4", "UINT4", "INT2", "UINT2", "FLOAT8E4M3FN", "FLOAT8E4M3FNUZ", "FLOAT8E5M2",
                 "FLOAT8E5M2FNUZ", "FLOAT4E2M1"]


# saturate steers the float8 targets only (integers always saturate,
# float4e2m1 has no inf or NaN to saturate to).
STORAGE_CASES = [(t, s, layout) for t in STORAGE_TYPES for s in ([1, 0] if t.startswith("FLOAT8") else [1])
                 for layout in ["tensor", "axis", "blocked"]]


@pytest.mark.parametrize("tname,saturate,layout", STORAGE_CASES)
def test_storage_type_quantize_dequantize_matches_the_reference(tmp_path, tname, saturate, layout):
    """QuantizeLinear into int4/uint4/int2/uint2/float8/float4e2m1 and back
    (DequantizeLinear), per tensor, per axis and blocked, on values that
    round at halves, saturate, and (float targets) include inf and NaN:
    Onyx's output equals ONNX's reference bit for bit (NaN where it has NaN)."""
    t = getattr(TensorProto, tname)
    is_float = tname.startswith("FLOAT")
    rng = np.random.default_rng(hash((tname, saturate, layout)) % 2**32)
    x = rng.normal(0, 4, (4, 8)).astype(np.float32)
    x[0, :6] = [0.5, 1.5, -2.5, 1e9, -1e9, np.inf]
    x[1, :3] = [-np.inf, np.nan, 1e-3]
    if not is_float:
        # The reference casts x / scale to int32 through numpy, whose result
        # is undefined beyond int32's range and for inf and NaN (x86 gives
        # INT_MIN, so all saturate low); Onyx saturates by sign and gives NaN
        # 0, as its 8-bit path. Saturation is tested within int32's range.
        x[0, 3:6] = [1e6, -1e6, 3e5]
        x[1, :2] = [-3e5, 0.0]
    shape = {"tensor": (), "axis": (8,), "blocked": (4, 2)}[layout]
    scale = rng.uniform(0.25, 1.0, shape).astype(np.float32)
    zp_vals = (np.zeros(shape) if is_float else rng.integers(0, 2, shape)).astype(np.float64)
    attrs = {"axis": 1}
    if layout == "blocked":
        attrs["block_size"] = 4
    q_attrs = dict(attrs)
    if tname.startswith("FLOAT8"):
        q_attrs["saturate"] = saturate
    zp = helper.make_tensor("zp", t, shape, zp_vals.flatten().tolist())
    sc = numpy_helper.from_array(scale, "scale")
    nodes = [helper.make_node("QuantizeLinear", ["x", "scale", "zp"], ["q"], **q_attrs),
             helper.make_node("DequantizeLinear", ["q", "scale", "zp"], ["y"], **attrs)]
    g = helper.make_graph(nodes, "qdq", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x.shape)],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)], [sc, zp])
    model = helper.make_model(g, opset_imports=[helper.make_opsetid("", 25)])
    model.ir_version = 13  # int2 needs 12 or later; Onyx reads up to 13
    path = save(model, tmp_path / "qdq.onnx")
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = run_onyx(path, {"x": x}, tmp_path / "run")["y"]
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


def test_block_size_past_the_dim_is_one_block(tmp_path):
    """A block_size beyond x's dim along the axis (2^63 - 1 included, which
    overflowed the block count: found by the fuzzer) is one block over the
    whole axis: the output equals ONNX's reference with block_size = the dim."""
    rng = np.random.default_rng(5)
    x = rng.integers(-128, 128, (2, 6)).astype(np.int8)
    scale = rng.uniform(0.25, 1.0, (2, 1)).astype(np.float32)
    zp = rng.integers(-3, 4, (2, 1)).astype(np.int8)

    def model(block):
        node = helper.make_node("DequantizeLinear", ["x", "scale", "zp"], ["y"], axis=1, block_size=block)
        g = helper.make_graph([node], "dq", [helper.make_tensor_value_info("x", TensorProto.INT8, x.shape)],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, x.shape)],
                              [numpy_helper.from_array(scale, "scale"), numpy_helper.from_array(zp, "zp")])
        m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 21)])
        m.ir_version = 10
        return m

    want = ReferenceEvaluator(model(6)).run(None, {"x": x})[0]
    for block in (6, 7, 2**63 - 1):
        got = run_onyx(save(model(block), tmp_path / f"dq{block}.onnx"), {"x": x}, tmp_path / f"run{block}")["y"]
        np.testing.assert_array_equal(got, want)


# ---------------------------------------------------------------- QLinearConv


def qlinear_conv_model(rng, xt, wt, yt, channels, per_channel, bias, wrange, window):
    """One QLinearConv node with random 8-bit data; returns (model, x)."""
    C, M, g = channels
    k, s, p = window
    info = np.iinfo(xt)
    x = rng.integers(info.min, info.max + 1, (2, C, 9, 9)).astype(xt)
    wz = 0 if wt == np.int8 else 128
    w = (rng.integers(-wrange, wrange + 1, (M, C // g, k, k)) + wz).astype(wt)
    shape = (M,) if per_channel else ()
    ws = rng.uniform(0.001, 0.01, shape).astype(np.float32)
    inits = [numpy_helper.from_array(a, n) for a, n in [
        (np.array(0.02, np.float32), "xs"), (np.array(rng.integers(info.min, info.max + 1), xt), "xz"), (w, "w"),
        (ws, "ws"), (np.full(shape, wz, wt), "wz"), (np.array(rng.uniform(0.5, 3.0), np.float32), "ys"),
        (np.array(100 if yt == np.uint8 else -5, yt), "yz")]]
    names = ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"]
    if bias:
        inits.append(numpy_helper.from_array(rng.integers(-20000, 20000, M).astype(np.int32), "b"))
        names.append("b")
    node = helper.make_node("QLinearConv", names, ["y"], strides=[s, s], pads=[p] * 4, group=g)
    graph = helper.make_graph([node], "qconv", [helper.make_tensor_value_info("x", helper.np_dtype_to_tensor_dtype(
        np.dtype(xt)), x.shape)], [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(yt)),
                                                               None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, x


QCONV_CASES = [c for c in itertools.product(
    [np.uint8, np.int8], [np.int8, np.uint8], [np.uint8, np.int8], [(16, 32, 1), (32, 32, 32), (12, 24, 3)],
    [False, True], [False, True], [60, 127], [(3, 1, 1), (1, 1, 0), (3, 2, 1)]) if not (c[0] == np.int8 and c[1] == np.uint8)]


@pytest.mark.parametrize("dnnl", ["1", "0"])
def test_qlinear_conv_matches_the_reference(tmp_path, dnnl):
    """Every type combination, per-tensor and per-channel weights, groups
    (depthwise included), bias, strides and pads, weights within [-60, 60]
    (oneDNN's int8 path on any x86 CPU) and full-range (its float path
    unless the CPU has VNNI): the same bytes as ONNX's reference, except
    where oneDNN's int8 path scales in float32 (then at most one unit, in at
    most 1% of the outputs). ONYX_DNNL=0: the exact integer loops, always equal."""
    rng = np.random.default_rng(0)
    env = dict(os.environ, ONYX_DNNL=dnnl)
    diffs = collections.Counter()
    for i, case in enumerate(QCONV_CASES):
        model, x = qlinear_conv_model(rng, *case)
        path = save(model, tmp_path / "m.onnx")
        want = ReferenceEvaluator(model).run(None, {"x": x})[0]
        np.save(tmp_path / "x.npy", x)
        r = subprocess.run([tool("onnx-run"), str(path), "--input", f"x={tmp_path / 'x.npy'}", "--output-dir",
                            str(tmp_path / "o")], capture_output=True, text=True, env=env, timeout=60)
        assert r.returncode == 0, f"case {i} {case}: {r.stderr.strip()}"
        got = np.load(tmp_path / "o" / "y.npy")
        assert got.dtype == want.dtype and got.shape == want.shape, f"case {i} {case}"
        d = np.abs(got.astype(np.int64) - want.astype(np.int64))
        if dnnl == "0":
            assert d.max() == 0, f"case {i} {case}: {int((d > 0).sum())} outputs differ"
        else:
            assert d.max() <= 1 and (d > 0).mean() <= 0.01, f"case {i} {case}: max {d.max()}"
        diffs[int(d.max())] += 1
    assert sum(diffs.values()) == len(QCONV_CASES) == 432


@pytest.mark.parametrize("channels,k", [(8, 3), (32, 5), (96, 3)])
def test_depthwise_qlinear_conv_with_extreme_values_is_exact(tmp_path, channels, k):
    """Depthwise convolutions take oneDNN's int8 path whatever the weights
    (one input channel per group: its int16 pair sums always have a zero
    term). Inputs and weights at the ends of their ranges, where a pair of
    two products would saturate int16: the same bytes as ONNX's reference."""
    rng = np.random.default_rng(channels)
    x = rng.choice(np.array([0, 255, 254, 1, 128], np.uint8), (1, channels, 10, 10))
    w = rng.choice(np.array([-128, 127, -127, 126, 0], np.int8), (channels, 1, k, k))
    inits = [numpy_helper.from_array(a, n) for a, n in [
        (np.array(0.02, np.float32), "xs"), (np.array(3, np.uint8), "xz"), (w, "w"),
        (np.array(0.001, np.float32), "ws"), (np.array(0, np.int8), "wz"), (np.array(2.0, np.float32), "ys"),
        (np.array(100, np.uint8), "yz")]]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], pads=[k // 2] * 4,
                            group=channels)
    graph = helper.make_graph([node], "dw", [vi("x", np.uint8, x.shape)], [vi("y", np.uint8, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    path = save(model, tmp_path / "dw.onnx")
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    got = run_onyx(path, {"x": x}, str(tmp_path / "w"))["y"]
    np.testing.assert_array_equal(got, want)


# Without VNNI (forced here with ONEDNN_MAX_CPU_ISA=AVX2, so that any x86
# CPU runs these kernels), oneDNN adds u8 x s8 products in pairs of
# consecutive reduction entries in saturating int16; Onyx clamps the pairs
# that could saturate and adds the rest itself (host::int8PairSplit).
NO_VNNI = dict(os.environ, ONEDNN_MAX_CPU_ISA="AVX2", ONEDNN_VERBOSE="1")


def onyx_verbose(model, inputs, tmp_path, env=None):
    """Runs model in onnx-run under NO_VNNI (and env): (outputs, oneDNN's exec lines)."""
    path = save(model, tmp_path / "m.onnx")
    cmd = [tool("onnx-run"), str(path), "--output-dir", str(tmp_path / "o")]
    for name, value in inputs.items():
        np.save(tmp_path / f"{name}.npy", value)
        cmd += ["--input", f"{name}={tmp_path / name}.npy"]
    r = subprocess.run(cmd, capture_output=True, text=True, env={**NO_VNNI, **(env or {})}, timeout=120)
    assert r.returncode == 0, r.stderr.strip()
    execs = [line for line in r.stdout.splitlines() if line.startswith("onednn_verbose,exec,cpu,")]
    outs = {f[:-4]: np.load(tmp_path / "o" / f) for f in os.listdir(tmp_path / "o")}
    return outs, execs


def sparse_extreme_weights(rng, shape, fraction=0.0015):
    """Weights in [-30, 30] with a few at the int8 extremes (as real
    per-tensor quantized layers: mostly small, a few large)."""
    w = rng.integers(-30, 31, shape).astype(np.int8)
    mask = rng.random(shape) < fraction
    w[mask] = rng.choice(np.array([-128, 127, -127, 126, 100, -90], np.int8), int(mask.sum()))
    return w


@pytest.mark.parametrize("xt,group,k,stride", [(np.uint8, 1, 3, 1), (np.int8, 1, 1, 1), (np.uint8, 2, 3, 2),
                                               (np.int8, 1, 1, 2), (np.uint8, 1, 7, 2)])
def test_qlinear_conv_full_range_weights_without_vnni_are_exact(tmp_path, xt, group, k, stride):
    """Four chained QLinearConv with full-range weights and inputs at the
    ends of their range, where a pair of products overflows int16: a k x k
    convolution reading the plain input, a second k x k one and a 1x1 one
    between channels-last values, a 1x1 one writing the plain output (each
    of the rest's loops). oneDNN's int8 kernel runs with int32 sums out (the
    split path) in all four, and every output equals ONNX's reference (the
    split path requantizes in float64, as the reference)."""
    rng = np.random.default_rng(k * 10 + group)
    info = np.iinfo(xt)
    C, M = 64, 48
    x = rng.choice(np.array([info.min, info.max, info.max - 1, info.min + 1], xt), (2, C, 14, 14))
    yz = np.array(100, np.uint8)
    shapes = [(M, C // group, k, k), (M, M // group, k, k), (M, M, 1, 1), (M, M, 1, 1)]
    inits = [numpy_helper.from_array(np.array(0.02, np.float32), "xs"),
             numpy_helper.from_array(np.array(3 if xt == np.uint8 else -5, xt), "xz"),
             numpy_helper.from_array(np.array(0.3, np.float32), "ys"), numpy_helper.from_array(yz, "yz"),
             numpy_helper.from_array(np.array(-3, np.int8), "yz_out"),
             numpy_helper.from_array(np.array(0.02, np.float32), "ys_out")]
    nodes, src, src_s, src_z = [], "x", "xs", "xz"
    ws = []
    for i, shape in enumerate(shapes):
        w = sparse_extreme_weights(rng, shape)
        ws.append(w)
        inits += [numpy_helper.from_array(w, f"w{i}"),
                  numpy_helper.from_array(rng.uniform(0.001, 0.003, M).astype(np.float32), f"ws{i}"),
                  numpy_helper.from_array(np.zeros(M, np.int8), f"wz{i}"),
                  numpy_helper.from_array(rng.integers(-3000, 3000, M).astype(np.int32), f"b{i}")]
        last = i == len(shapes) - 1
        out = "y" if last else f"h{i}"
        window = dict(pads=[k // 2] * 4, group=group, strides=[stride] * 2) if shape[2] == k and k > 1 else {}
        if i == 0 and k == 1:
            window = dict(group=group, strides=[stride] * 2)
        nodes.append(helper.make_node("QLinearConv", [src, src_s, src_z, f"w{i}", f"ws{i}", f"wz{i}", "ys_out" if last else "ys",
                                                      "yz_out" if last else "yz", f"b{i}"], [out], **window))
        src, src_s, src_z = out, "ys", "yz"
    graph = helper.make_graph(nodes, "split", [vi("x", xt, x.shape)], [vi("y", np.int8, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    outs, execs = onyx_verbose(model, {"x": x}, tmp_path)
    convs = [e for e in execs if ",convolution," in e]
    assert len(convs) == 4 and all("dst_s32" in e for e in convs), convs
    assert all("src_u8::blocked:acdb" in e for e in convs[1:]), "a convolution did not read channels-last"
    np.testing.assert_array_equal(outs["y"], want)
    # oneDNN reads x as u8 (int8 x + 128): values of 254 and 255 beside
    # weights of 126 and more overflow an int16 pair, so the split was needed
    xu = x.astype(np.int32) + (128 if xt == np.int8 else 0)
    assert xu.max() >= 254 and np.abs(ws[0].astype(np.int32)).max() >= 126
    assert len(np.unique(want)) > 20, "the outputs saturated: the check would be weak"


def adversarial_pairs(n_reduce, n_out):
    """Weights [n_reduce, n_out] (reduction first) of 0, 127, 127, 0, ...
    along the reduction: every pair (2j, 2j + 1) sums to 127 in magnitude,
    every pair (2j + 1, 2j + 2) to 254."""
    col = np.tile(np.array([0, 127, 127, 0], np.int8), n_reduce // 4)
    return np.repeat(col[:, None], n_out, 1) * np.where(np.arange(n_out) % 2, 1, -1).astype(np.int8)


@pytest.mark.parametrize("k", [1, 3])
def test_qlinear_conv_pairs_are_the_ones_assumed(tmp_path, k):
    """The pairing int8PairSplit assumes, checked on oneDNN's kernels:
    weights whose pairs (2j, 2j + 1) along the input channels are safe but
    whose pairs (2j + 1, 2j + 2) are not, x = 255. Nothing is split, the
    fused int8 kernel runs, and the result is the reference's (within
    oneDNN's float32 scaling: one unit); a kernel that paired otherwise
    would be off by 32003 in a sum, about 8 units here."""
    C, M = 32, 16
    w = adversarial_pairs(C, M).T.reshape(M, C, 1, 1).repeat(k, 2).repeat(k, 3)
    x = np.full((1, C, 6, 6), 255, np.uint8)
    inits = [numpy_helper.from_array(a, n) for a, n in [
        (np.array(1.0, np.float32), "xs"), (np.array(0, np.uint8), "xz"), (w, "w"), (np.array(1.0, np.float32), "ws"),
        (np.array(0, np.int8), "wz"), (np.array(4096.0 * k * k, np.float32), "ys"), (np.array(0, np.int8), "yz")]]
    node = helper.make_node("QLinearConv", ["x", "xs", "xz", "w", "ws", "wz", "ys", "yz"], ["y"], pads=[k // 2] * 4)
    graph = helper.make_graph([node], "pairs", [vi("x", np.uint8, x.shape)], [vi("y", np.int8, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    want = ReferenceEvaluator(model).run(None, {"x": x})[0]
    outs, execs = onyx_verbose(model, {"x": x}, tmp_path)
    convs = [e for e in execs if ",convolution," in e]
    assert len(convs) == 1 and "int8" in convs[0] and "dst_s8" in convs[0], convs
    assert np.abs(want.astype(np.int32)).max() >= 100
    d = np.abs(outs["y"].astype(np.int32) - want.astype(np.int32))
    assert d.max() <= 1, d.max()


@pytest.mark.parametrize("at,dense,wide", [(np.uint8, False, True), (np.int8, False, True), (np.uint8, True, False),
                                           (np.int8, True, False), (np.uint8, True, True), (np.int8, True, True)])
def test_matmul_integer_full_range_weights_without_vnni_are_exact(tmp_path, at, dense, wide):
    """MatMulInteger with B full range, A at the ends of its range. Sparse:
    adversarial pairs along K (nothing to split; checks the pairing of
    oneDNN's int8 matmul) stacked on sparse extremes (split, the rest added
    after): oneDNN's int8 matmul runs. Dense (uniform over int8, as
    random-weight models quantize): Onyx's int16 product (host::int16Gemm,
    no oneDNN matmul), or with ONYX_INT16_GEMM=0 two oneDNN int8 products of
    weights within [-64, 64], the second added by its sum post-op. Every
    way the int32 result is the reference's exactly."""
    rng = np.random.default_rng(5)
    K, N = 256, 96
    if dense:
        b = rng.integers(-128, 128, (K, N)).astype(np.int8)
    else:
        b = np.concatenate([adversarial_pairs(128, N), sparse_extreme_weights(rng, (128, N))])
    info = np.iinfo(at)
    a = rng.choice(np.array([info.min, info.max, info.max - 1], at), (3, 16, K))
    inits = [numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.array(info.min + 2, at), "az")]
    node = helper.make_node("MatMulInteger", ["a", "b", "az"], ["y"])
    graph = helper.make_graph([node], "mmi", [vi("a", at, a.shape)], [vi("y", np.int32, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    want = ReferenceEvaluator(model).run(None, {"a": a})[0]
    outs, execs = onyx_verbose(model, {"a": a}, tmp_path, {} if wide else {"ONYX_INT16_GEMM": "0"})
    matmuls = [e for e in execs if ",matmul," in e]
    if dense and wide:
        assert matmuls == [], matmuls
    else:
        assert len(matmuls) == (2 if dense else 1), matmuls
        assert ("post-ops" in matmuls[-1]) == dense, matmuls
    np.testing.assert_array_equal(outs["y"], want)


@pytest.mark.parametrize("at,rows,K", [(np.uint8, 1, 301), (np.int8, 2, 301), (np.uint8, 1, 33100)])
def test_matmul_integer_few_rows_are_exact(tmp_path, at, rows, K):
    """MatMulInteger with one or two rows (a classifier at batch 1: Onyx's
    own pairwise int16 product, exact while K * 255^2 < 2^31, K = 33100
    past it), uint8 B with a zero point per column of 0 or 255 (B - b_zp
    spans [-255, 255]), A at the ends of its range, an odd K and N = 70 (a
    partial panel of 32): the reference's int32 values exactly."""
    rng = np.random.default_rng(rows * 7 + K)
    N = 70
    info = np.iinfo(at)
    a = rng.choice(np.array([info.min, info.max, info.max - 3, info.min + 1], at), (rows, K))
    b = rng.integers(0, 256, (K, N)).astype(np.uint8)
    bz = np.where(np.arange(N) % 2, 255, 0).astype(np.uint8)
    inits = [numpy_helper.from_array(b, "b"), numpy_helper.from_array(np.array(info.min + 2, at), "az"),
             numpy_helper.from_array(bz, "bz")]
    node = helper.make_node("MatMulInteger", ["a", "b", "az", "bz"], ["y"])
    graph = helper.make_graph([node], "gemv", [vi("a", at, a.shape)], [vi("y", np.int32, None)], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    want = ReferenceEvaluator(model).run(None, {"a": a})[0]
    got = run_onyx(save(model, tmp_path / "m.onnx"), {"a": a}, str(tmp_path / "o"))["y"]
    assert np.abs(want).max() > 2 ** 20, "the sums are small: the check would be weak"
    np.testing.assert_array_equal(got, want)


def test_qlinear_conv_exports_and_reimports(tmp_path):
    """onnx-export writes qlinear_conv back as QLinearConv: onnxruntime runs
    the exported model to the same bytes as Onyx runs the original."""
    rng = np.random.default_rng(1)
    model, x = qlinear_conv_model(rng, np.uint8, np.int8, np.uint8, (12, 24, 3), True, True, 127, (3, 2, 1))
    src = save(model, tmp_path / "src.onnx")
    native, out = tmp_path / "m.npz", tmp_path / "exported.onnx"
    for cmd in ([tool("onnx-import"), str(src), "-o", str(native)], [tool("onnx-export"), str(native), "-o", str(out)]):
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        assert r.returncode == 0, r.stderr
    exported = onnx.load(str(out))
    assert [n.op_type for n in exported.graph.node] == ["QLinearConv"]
    got = run_onyx(src, {"x": x}, str(tmp_path / "a"))["y"]
    again = ReferenceEvaluator(exported).run(None, {"x": x})[0]
    np.testing.assert_array_equal(again, ReferenceEvaluator(model).run(None, {"x": x})[0])
    assert np.abs(got.astype(int) - again.astype(int)).max() <= 1


# ------------------------------------------------------- com.microsoft ops


def ms_model(nodes, inputs, outputs, inits):
    graph = helper.make_graph(nodes, "ms", inputs, outputs, inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    model.ir_version = 8
    return model


def q_inits(prefix, scale, zp, t):
    return [numpy_helper.from_array(np.array(scale, np.float32), prefix + "_s"),
            numpy_helper.from_array(np.array(zp, t), prefix + "_z")]


def vi(name, t, shape):
    return helper.make_tensor_value_info(name, helper.np_dtype_to_tensor_dtype(np.dtype(t)), shape)


def contrib_cases():
    rng = np.random.default_rng(2)
    cases = {}
    for t in (np.uint8, np.int8):
        zp = 128 if t == np.uint8 else 0
        a = rng.integers(np.iinfo(t).min, np.iinfo(t).max + 1, (2, 8, 5, 5)).astype(t)
        b = rng.integers(np.iinfo(t).min, np.iinfo(t).max + 1, (2, 8, 5, 5)).astype(t)
        name = t.__name__
        for op in ("QLinearAdd", "QLinearMul"):
            inits = q_inits("a", 0.05, zp + 3, t) + q_inits("b", 0.03, zp - 7, t) + q_inits("c", 0.08 if op ==
                                                                                           "QLinearAdd" else 0.2, zp, t)
            node = helper.make_node(op, ["a", "a_s", "a_z", "b", "b_s", "b_z", "c_s", "c_z"], ["y"], domain="com.microsoft")
            cases[f"{op}_{name}"] = (ms_model([node], [vi("a", t, a.shape), vi("b", t, b.shape)], [vi("y", t, None)],
                                              inits), {"a": a, "b": b})
        for op, attrs in (("QLinearSigmoid", {}), ("QLinearLeakyRelu", {"alpha": 0.1})):
            inits = q_inits("x", 0.05, zp + 3, t) + q_inits("y", 1 / 256 if op == "QLinearSigmoid" else 0.04, zp, t)
            node = helper.make_node(op, ["a", "x_s", "x_z", "y_s", "y_z"], ["y"], domain="com.microsoft", **attrs)
            cases[f"{op}_{name}"] = (ms_model([node], [vi("a", t, a.shape)], [vi("y", t, None)], inits), {"a": a})
        inits = q_inits("x", 0.05, zp + 3, t) + q_inits("y", 0.01, zp, t)
        node = helper.make_node("QLinearGlobalAveragePool", ["a", "x_s", "x_z", "y_s", "y_z"], ["y"],
                                domain="com.microsoft", channels_last=0)
        cases[f"QLinearGlobalAveragePool_{name}"] = (ms_model([node], [vi("a", t, a.shape)], [vi("y", t, None)], inits),
                                                     {"a": a})
        # QLinearAveragePool: pads, strides, ceil mode, padding counted or
        # not; NCHW and channels last. (Not channels last with padding
        # counted and ceil mode: there onnxruntime 1.31's NHWC kernel divides
        # the window that ceil mode adds past the pads by another count than
        # its NCHW kernel and its own AveragePool do, up to 31 units apart;
        # Onyx follows AveragePool.)
        for last in (0, 1):
            for include in (0, 1):
                inits = q_inits("x", 0.05, zp + 3, t) + q_inits("y", 0.03, zp - 1, t)
                node = helper.make_node("QLinearAveragePool", ["a", "x_s", "x_z", "y_s", "y_z"], ["y"],
                                        domain="com.microsoft", kernel_shape=[3, 2], strides=[2, 1], pads=[1, 0, 1, 1],
                                        ceil_mode=0 if last and include else 1, count_include_pad=include,
                                        channels_last=last)
                cases[f"QLinearAveragePool_{name}_last{last}_pad{include}"] = (
                    ms_model([node], [vi("a", t, a.shape)], [vi("y", t, None)], inits), {"a": a})
        # QLinearSoftmax: along the last axis (opset 13), and opset 11's
        # softmax over the flattened dims from axis 2 on.
        for axis, opset in ((-1, 13), (2, 11), (1, 13)):
            inits = q_inits("x", 0.08, zp + 3, t) + q_inits("y", 1 / 256, np.iinfo(t).min, t)
            node = helper.make_node("QLinearSoftmax", ["a", "x_s", "x_z", "y_s", "y_z"], ["y"], domain="com.microsoft",
                                    axis=axis, opset=opset)
            cases[f"QLinearSoftmax_{name}_axis{axis}_opset{opset}"] = (
                ms_model([node], [vi("a", t, a.shape)], [vi("y", t, None)], inits), {"a": a})
        # QLinearWhere: a broadcast condition.
        cond = rng.integers(0, 2, (1, 8, 1, 5)).astype(bool)
        inits = (q_inits("x", 0.05, zp + 3, t) + q_inits("w", 0.03, zp - 7, t) + q_inits("z", 0.06, zp + 1, t) +
                 [numpy_helper.from_array(cond, "cond")])
        node = helper.make_node("QLinearWhere", ["cond", "a", "x_s", "x_z", "b", "w_s", "w_z", "z_s", "z_z"], ["y"],
                                domain="com.microsoft")
        cases[f"QLinearWhere_{name}"] = (ms_model([node], [vi("a", t, a.shape), vi("b", t, b.shape)],
                                                  [vi("y", t, None)], inits), {"a": a, "b": b})
        inits = q_inits("y", 0.06, zp, t) + q_inits("a", 0.05, zp + 3, t) + q_inits("b", 0.07, zp - 2, t)
        node = helper.make_node("QLinearConcat", ["y_s", "y_z", "a", "a_s", "a_z", "b", "b_s", "b_z"], ["y"],
                                domain="com.microsoft", axis=1)
        cases[f"QLinearConcat_{name}"] = (ms_model([node], [vi("a", t, a.shape), vi("b", t, b.shape)],
                                                   [vi("y", t, None)], inits), {"a": a, "b": b})
    # QGemm: uint8 A, int8 B (transB, per-column scales), int32 bias; quantized
    # and float outputs. B within [-64, 63]: onnxruntime's u8 x s8 kernels
    # on x86 CPUs without VNNI sum pairs of products in saturating int16
    # (its documentation's "saturation issue"), exact only for 7-bit weights.
    A = rng.integers(0, 256, (3, 40)).astype(np.uint8)
    B = rng.integers(-64, 64, (16, 40)).astype(np.int8)
    base = [numpy_helper.from_array(np.array(0.02, np.float32), "a_s"), numpy_helper.from_array(np.array(120, np.uint8), "a_z"),
            numpy_helper.from_array(B, "B"), numpy_helper.from_array(rng.uniform(0.001, 0.01, 16).astype(np.float32), "b_s"),
            numpy_helper.from_array(np.zeros(16, np.int8), "b_z"),
            numpy_helper.from_array(rng.integers(-5000, 5000, 16).astype(np.int32), "C")]
    for quantized in (True, False):
        ins = ["A", "a_s", "a_z", "B", "b_s", "b_z", "C"] + (["y_s", "y_z"] if quantized else [])
        inits = base + ([numpy_helper.from_array(np.array(0.05, np.float32), "y_s"),
                         numpy_helper.from_array(np.array(128, np.uint8), "y_z")] if quantized else [])
        node = helper.make_node("QGemm", ins, ["y"], domain="com.microsoft", transB=1, alpha=0.5)
        cases[f"QGemm_{'u8' if quantized else 'float'}"] = (
            ms_model([node], [vi("A", np.uint8, A.shape)], [vi("y", np.uint8 if quantized else np.float32, None)], inits),
            {"A": A})
    # DynamicQuantizeMatMul: float A, int8 B per column (7-bit, as above), float bias.
    X = rng.standard_normal((4, 32)).astype(np.float32)
    inits = [numpy_helper.from_array(rng.integers(-64, 64, (32, 10)).astype(np.int8), "B"),
             numpy_helper.from_array(rng.uniform(0.001, 0.01, 10).astype(np.float32), "b_s"),
             numpy_helper.from_array(np.zeros(10, np.int8), "b_z"),
             numpy_helper.from_array(rng.standard_normal(10).astype(np.float32), "bias")]
    node = helper.make_node("DynamicQuantizeMatMul", ["A", "B", "b_s", "b_z", "bias"], ["y"], domain="com.microsoft")
    cases["DynamicQuantizeMatMul"] = (ms_model([node], [vi("A", np.float32, X.shape)], [vi("y", np.float32, None)], inits),
                                      {"A": X})
    # MatMulIntegerToFloat (what onnxruntime's optimizer makes of
    # quantize_dynamic's MatMulInteger -> Cast -> Mul -> Add, and Onyx's
    # fuse_matmul_integer_float): A [2, 5, 48] uint8 or int8 with a zero
    # point, B 7-bit int8 (as above) per tensor or per column, bias or none.
    for at in (np.uint8, np.int8):
        for per_column in (False, True):
            for bias in (False, True):
                A = rng.integers(np.iinfo(at).min, np.iinfo(at).max + 1, (2, 5, 48)).astype(at)
                n = 12
                bs = rng.uniform(0.001, 0.01, n if per_column else ()).astype(np.float32)
                bz = np.array(rng.integers(-3, 4, n if per_column else ()), np.int8)
                inits = [numpy_helper.from_array(rng.integers(-60, 61, (48, n)).astype(np.int8), "B"),
                         numpy_helper.from_array(np.array(0.037, np.float32), "a_s"),
                         numpy_helper.from_array(bs, "b_s"),
                         numpy_helper.from_array(np.array(120 if at == np.uint8 else -5, at), "a_z"),
                         numpy_helper.from_array(bz, "b_z")]
                ins = ["A", "B", "a_s", "b_s", "a_z", "b_z"]
                if bias:
                    inits.append(numpy_helper.from_array(rng.standard_normal(n).astype(np.float32), "bias"))
                    ins.append("bias")
                node = helper.make_node("MatMulIntegerToFloat", ins, ["y"], domain="com.microsoft")
                key = f"MatMulIntegerToFloat_{at.__name__}_{'column' if per_column else 'tensor'}{'_bias' if bias else ''}"
                cases[key] = (ms_model([node], [vi("A", at, A.shape)], [vi("y", np.float32, None)], inits), {"A": A})
    return cases


CONTRIB = contrib_cases()


@pytest.mark.parametrize("name", sorted(CONTRIB))
def test_contrib_op_matches_onnxruntime(tmp_path, name):
    """Each com.microsoft op of onnxruntime's quantizer against onnxruntime:
    integer outputs within one unit (its kernels round some steps in
    float32), float outputs within float32 rounding."""
    model, inputs = CONTRIB[name]
    path = tmp_path / "m.onnx"
    onnx.save(model, str(path))
    want = run_ort(path, inputs)["y"]
    got = run_onyx(path, inputs, str(tmp_path / "w"))["y"]
    assert got.dtype == want.dtype and got.shape == want.shape
    if want.dtype == np.float32:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5 * np.abs(want).max())
    else:
        d = np.abs(got.astype(int) - want.astype(int))
        assert d.max() <= 1 and (d > 0).mean() <= 0.05, f"max {d.max()}, {(d > 0).mean():.1%} differ"


def test_qlinear_softmax_without_its_opset_is_a_clear_error(tmp_path):
    """QLinearSoftmax's semantics depend on the replaced Softmax's opset: a
    node without it is rejected, naming the node and the attribute."""
    inits = q_inits("x", 0.08, 3, np.int8) + q_inits("y", 1 / 256, -128, np.int8)
    node = helper.make_node("QLinearSoftmax", ["a", "x_s", "x_z", "y_s", "y_z"], ["y"], domain="com.microsoft",
                            name="sm")
    path = save(ms_model([node], [vi("a", np.int8, (2, 5))], [vi("y", np.int8, None)], inits), tmp_path / "m.onnx")
    np.save(tmp_path / "a.npy", np.zeros((2, 5), np.int8))
    r = subprocess.run([tool("onnx-run"), str(path), "--input", f"a={tmp_path / 'a.npy'}"], capture_output=True,
                       text=True, timeout=60)
    assert r.returncode != 0
    err = r.stderr.strip()
    assert "sm" in err and "QLinearSoftmax" in err and "opset attribute" in err, err
    assert len(err.splitlines()) == 1, err


# --------------------------------------------------------- real architectures


class Images(CalibrationDataReader):
    def __init__(self, n, seed):
        self.data = [{"input": np.random.default_rng(seed + i).standard_normal((1, 3, 224, 224)).astype(np.float32)}
                     for i in range(n)]
        self.i = 0

    def get_next(self):
        if self.i >= len(self.data):
            return None
        self.i += 1
        return self.data[self.i - 1]


@pytest.fixture(scope="module")
def float_models(tmp_path_factory):
    """torchvision ResNet-18, MobileNetV2 and ResNet-50 with random weights, made to
    behave like trained ones: batch-norm statistics from forward passes over
    random images (activations of unit scale) and the classifier scaled to
    logits of standard deviation 3 (torchvision initialises it to nearly 0).
    Exported at opset 17 and pre-processed for quantization."""
    import torch
    import torchvision
    d = tmp_path_factory.mktemp("qmodels")
    paths = {}
    for name in ("resnet18", "mobilenet_v2", "resnet50"):
        torch.manual_seed(0)
        m = getattr(torchvision.models, name)(weights=None)
        m.train()
        with torch.no_grad():
            for _ in range(3):
                m(torch.randn(8, 3, 224, 224))
        m.eval()
        last = m.classifier[1] if name == "mobilenet_v2" else m.fc
        with torch.no_grad():
            last.weight.mul_(3.0 / m(torch.randn(8, 3, 224, 224)).std())
            last.bias.zero_()
        raw = d / f"{name}.onnx"
        torch.onnx.export(m, torch.randn(1, 3, 224, 224), str(raw), input_names=["input"], output_names=["logits"],
                          opset_version=17, dynamic_axes={"input": {0: "N"}, "logits": {0: "N"}}, dynamo=False)
        pre = d / f"{name}_pre.onnx"
        quant_pre_process(str(raw), str(pre))
        paths[name] = (raw, pre)
    return d, paths


# (format, activation type, per-channel weights, reduce_range): onnxruntime's
# default (QDQ, s8 activations, s8 weights per tensor), its QOperator form,
# and u8 activations with 7-bit per-channel weights (reduce_range: the
# weights oneDNN's int8 kernels sum exactly on CPUs without VNNI).
QUANT_CONFIGS = {
    "qdq_s8": (QuantFormat.QDQ, QuantType.QInt8, False, False),
    "qop_s8": (QuantFormat.QOperator, QuantType.QInt8, False, False),
    "qdq_u8_rr": (QuantFormat.QDQ, QuantType.QUInt8, True, True),
}


# How many of the 16 samples must have a clear top-1 for the agreement
# check to count. Random-weight MobileNetV2 predicts nearly the same logits
# for every input (margins of ~0.05 against a quantization step of ~0.08 in
# its last layer): its quantized top two tie, so only the logits check
# speaks for it there.
MIN_CLEAR_TOP1 = {"resnet18": 4, "mobilenet_v2": 0, "resnet50": 4}


# ResNet-50 in onnxruntime's default form only (its other forms take the
# same kernels as ResNet-18's; CI time).
@pytest.mark.parametrize("name,config", [(n, c) for n in ("resnet18", "mobilenet_v2") for c in sorted(QUANT_CONFIGS)]
                         + [("resnet50", "qdq_s8")])
def test_quantized_architecture_matches_onnxruntime(float_models, tmp_path, name, config):
    """The quantized model in Onyx against onnxruntime on a batch of 16:
    logits within 4% of their range (a few quantization steps: the engines
    round some intermediate values differently by one unit, which later
    layers carry); Onyx's distance to the float model at most 1.5 times
    onnxruntime's (its quantization error is no worse); top-1 agreement on
    every sample whose top two logits onnxruntime separates by more than the
    two engines differ."""
    d, paths = float_models
    raw, pre = paths[name]
    fmt, act, per_channel, rr = QUANT_CONFIGS[config]
    q = tmp_path / f"{name}_{config}.onnx"
    quantize_static(str(pre), str(q), Images(4, 100), quant_format=fmt, activation_type=act,
                    weight_type=QuantType.QInt8, per_channel=per_channel, reduce_range=rr)
    x = np.random.default_rng(7).standard_normal((16, 3, 224, 224)).astype(np.float32)
    want = run_ort(q, {"input": x})["logits"]
    ref = run_ort(raw, {"input": x})["logits"]
    got = run_onyx(q, {"input": x}, str(tmp_path / "w"))["logits"]
    assert got.shape == want.shape == (16, 1000)
    span = float(want.max() - want.min())
    assert span > 5.0, "degenerate logits: the test would prove nothing"
    diff = float(np.abs(got - want).max())
    assert diff <= 0.04 * span, f"max |onyx - onnxruntime| {diff:.4f} for logits spanning {span:.3f}"
    err_onyx, err_ort = float(np.abs(got - ref).max()), float(np.abs(want - ref).max())
    assert err_onyx <= 1.5 * err_ort, f"distance to the float model: onyx {err_onyx:.4f}, onnxruntime {err_ort:.4f}"
    top2 = np.sort(want, axis=1)[:, -2:]
    clear = (top2[:, 1] - top2[:, 0]) > diff
    assert clear.sum() >= MIN_CLEAR_TOP1[name], f"only {clear.sum()} of 16 samples have a clear top-1"
    np.testing.assert_array_equal(got.argmax(1)[clear], want.argmax(1)[clear])


@pytest.mark.parametrize("reduce_range", [False, True])
def test_dynamic_quantized_bert(tmp_path, reduce_range):
    """quantize_dynamic's form of a BERT-style encoder (DynamicQuantizeLinear
    + MatMulInteger for every MatMul with a constant weight): hidden states
    against ONNX's reference within float32 rounding, and against
    onnxruntime with 7-bit weights (reduce_range), where its u8 x s8 kernels
    are exact on every x86 CPU; with full-range weights onnxruntime's
    saturating int16 pair sums (CPUs without VNNI) put it further off."""
    make_models.write_all(str(tmp_path))
    q = tmp_path / "bert_dyn.onnx"
    quantize_dynamic(str(tmp_path / "bert.onnx"), str(q), weight_type=QuantType.QInt8, reduce_range=reduce_range)
    model = onnx.load(str(q))
    ops = collections.Counter(n.op_type for n in model.graph.node)
    assert ops["MatMulInteger"] >= 8 and ops["DynamicQuantizeLinear"] >= 4, ops
    inputs = make_models.make_inputs("bert", 2, seed=3)
    got = run_onyx(q, inputs, str(tmp_path / "w"))
    names = [o.name for o in model.graph.output]
    # ONNX's reference has DequantizeLinear from opset 19 only.
    want = dict(zip(names, ReferenceEvaluator(onnx.version_converter.convert_version(model, 21)).run(None, inputs)))
    assert sorted(got) == sorted(want)
    for k, w in want.items():
        g = got[k]
        assert g.shape == w.shape and g.dtype == w.dtype
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4 * float(np.abs(w).max()))
    if reduce_range:
        for k, w in run_ort(q, inputs).items():
            np.testing.assert_allclose(got[k], w, rtol=1e-3, atol=1e-3 * float(np.abs(w).max()))
