"""Models built in C++ (models/*.cpp), trained a few steps and exported by
`onyx-models export`, run in onnxruntime against Onyx's own output.

    ONYX_BIN_DIR=build/tools python3 -m pytest -q tests/python/test_export_models.py

onyx-models is looked up as $ONYX_MODELS_BIN, else $ONYX_BIN_DIR/../models/onyx-models.
"""
import json
import os
import subprocess

import numpy as np
import onnx
import onnxruntime as ort
import pytest

from conftest import REPO

MODELS = ["mlp", "cnn", "transformer"]
PREFIX = {"mlp": "mlp.", "cnn": "cnn.", "transformer": "enc."}  # the builders' param name prefixes
STEPS = 3
# float32; the engines sum in different orders (measured worst: ~4e-7 absolute).
RTOL = 1e-4
ATOL = 1e-5


def bin_dir():
    return os.environ.get("ONYX_BIN_DIR", os.path.join(REPO, "build", "tools"))


def onyx_models_bin():
    path = os.environ.get("ONYX_MODELS_BIN") or os.path.join(bin_dir(), os.pardir, "models", "onyx-models")
    path = os.path.normpath(path)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not found: build the target onyx-models (or set ONYX_MODELS_BIN)")
    return path


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """Runs `onyx-models export` once per model; model name -> output folder."""
    cache = {}

    def get(name):
        if name not in cache:
            out = tmp_path_factory.mktemp(name)
            cmd = [onyx_models_bin(), "export", "--model", name, "--steps", str(STEPS), "--out", str(out)]
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
            assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}"
            cache[name] = out
        return cache[name]

    return get


def run_ort(path, x):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(str(path), so, providers=["CPUExecutionProvider"])
    assert [i.name for i in sess.get_inputs()] == ["input"]
    assert [o.name for o in sess.get_outputs()] == ["logits"]
    return sess.run(["logits"], {"input": x})[0]


def check_against_onyx(onnx_path, d, name):
    """The full ONNX checker passes and onnxruntime gives Onyx's output, on the
    exported batch and on a smaller one (axis 0 of the input is symbolic)."""
    model = onnx.load(str(onnx_path))
    onnx.checker.check_model(model, full_check=True)
    dims = model.graph.input[0].type.tensor_type.shape.dim
    assert dims[0].dim_param == "batch", f"{name}: input axis 0 is not symbolic: {dims[0]}"
    x = np.load(d / f"{name}_input.npy")
    want = np.load(d / f"{name}_onyx_output.npy")
    assert x.dtype == np.float32 and want.dtype == np.float32
    assert want.shape[0] == x.shape[0] and np.all(np.isfinite(want))
    got = run_ort(onnx_path, x)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL, err_msg=f"{name}: onnxruntime vs Onyx")
    # Examples are independent: the first two alone give the same rows.
    got2 = run_ort(onnx_path, x[:2])
    np.testing.assert_allclose(got2, want[:2], rtol=RTOL, atol=ATOL, err_msg=f"{name}: batch of 2")


@pytest.mark.parametrize("name", MODELS)
def test_exported_onnx_matches_onyx(exported, name):
    d = exported(name)
    check_against_onyx(d / f"{name}.onnx", d, name)


@pytest.mark.parametrize("name", MODELS)
def test_exported_weights_are_trained(exported, name):
    """Training lowered the loss and moved every param; the exported native
    model and the ONNX initializers hold the trained values."""
    d = exported(name)
    info = json.loads((d / f"{name}_train.json").read_text())
    losses = info["losses"]
    assert info["steps"] == STEPS and len(losses) == STEPS + 1
    assert all(np.isfinite(losses)), losses
    assert losses[-1] < losses[0], f"{name}: loss did not decrease: {losses}"

    init = np.load(d / f"{name}_init.npz")
    native = np.load(d / f"{name}.npz")
    inits = {i.name: onnx.numpy_helper.to_array(i) for i in onnx.load(str(d / f"{name}.onnx")).graph.initializer}
    params = list(init.files)
    assert params and all(p.startswith(PREFIX[name]) for p in params), params
    for p in params:
        trained = native[p]
        assert trained.shape == init[p].shape, p
        assert np.any(trained != init[p]), f"{name}: param {p} did not change in {STEPS} steps"
        assert p in inits, f"{name}: param {p} is not an initializer of the ONNX model"
        np.testing.assert_array_equal(inits[p].reshape(trained.shape), trained, err_msg=p)


@pytest.mark.parametrize("name", MODELS)
def test_onnx_export_tool_on_native_model(exported, tmp_path, name):
    """`onnx-export` turns the native .npz into an ONNX model that agrees too."""
    tool = os.path.join(bin_dir(), "onnx-export")
    if not os.access(tool, os.X_OK):
        pytest.skip(f"{tool} is not built (the onnx-export tool is missing from this build)")
    d = exported(name)
    out = tmp_path / f"{name}.onnx"
    cmd = [tool, str(d / f"{name}.npz"), "-o", str(out), "--dynamic-axis", "input:0=batch"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}"
    check_against_onyx(out, d, name)
