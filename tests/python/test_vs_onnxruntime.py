"""Onyx (through onnx-run) against onnxruntime on the models of
models/onnx/make_models.py, with the same inputs.

    ONYX_BIN_DIR=build/tools python3 -m pytest -q tests/python
"""
import os
import subprocess

import numpy as np
import pytest

from conftest import make_models, tool

import onnxruntime as ort  # noqa: E402  (required: never skipped)

# float32 throughout; the two engines sum in different orders. Measured
# worst differences: 5e-6 absolute (resnet logits of magnitude ~30), 1.6e-6
# absolute on bert hidden states.
RTOL = 1e-5
ATOL = 1e-5


def run_onyx(model_path, inputs, work_dir, threads=None):
    """Runs onnx-run on `inputs` (name -> array); returns name -> array."""
    os.makedirs(work_dir, exist_ok=True)
    out_dir = os.path.join(work_dir, "out")
    cmd = [tool("onnx-run"), str(model_path), "--output-dir", out_dir]
    for name, value in inputs.items():
        path = os.path.join(work_dir, name + ".npy")
        np.save(path, value)
        cmd += ["--input", f"{name}={path}"]
    if threads:
        cmd += ["--threads", str(threads)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, f"onnx-run failed ({r.returncode}): {r.stderr.strip()}"
    return {f[:-4]: np.load(os.path.join(out_dir, f)) for f in os.listdir(out_dir) if f.endswith(".npy")}


def run_ort(model_path, inputs, threads=1):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(str(model_path), so, providers=["CPUExecutionProvider"])
    names = [o.name for o in sess.get_outputs()]
    return dict(zip(names, sess.run(names, inputs)))


@pytest.mark.parametrize("batch", [1, 3])
@pytest.mark.parametrize("name", sorted(make_models.BUILDERS))
def test_matches_onnxruntime(models_dir, tmp_path, name, batch):
    model = models_dir / f"{name}.onnx"
    inputs = make_models.make_inputs(name, batch, seed=batch)
    want = run_ort(model, inputs)
    got = run_onyx(model, inputs, str(tmp_path))
    assert sorted(got) == sorted(want)
    for out, w in want.items():
        g = got[out]
        assert g.dtype == w.dtype, f"{out}: dtype {g.dtype}, onnxruntime {w.dtype}"
        assert g.shape == w.shape, f"{out}: shape {g.shape}, onnxruntime {w.shape}"
        assert w.shape[0] == batch
        np.testing.assert_allclose(g, w, rtol=RTOL, atol=ATOL, err_msg=f"{name} output {out}, batch {batch}")


def test_two_threads_match(models_dir, tmp_path):
    """The threaded kernels give the same answers (within tolerance)."""
    model = models_dir / "resnet.onnx"
    inputs = make_models.make_inputs("resnet", 3, seed=7)
    want = run_ort(model, inputs)
    got = run_onyx(model, inputs, str(tmp_path), threads=2)
    np.testing.assert_allclose(got["logits"], want["logits"], rtol=RTOL, atol=ATOL)


def test_truncated_model_fails_cleanly(models_dir, tmp_path):
    data = (models_dir / "resnet.onnx").read_bytes()
    bad = tmp_path / "truncated.onnx"
    bad.write_bytes(data[: len(data) // 2])
    x = tmp_path / "image.npy"
    np.save(x, make_models.make_inputs("resnet", 1)["image"])
    r = subprocess.run([tool("onnx-run"), str(bad), "--input", f"image={x}"],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode > 0, f"exit {r.returncode} (negative: killed by a signal)"
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected a one-line error, got:\n{r.stderr}"
    assert lines[0].startswith("onnx-run: ") and len(lines[0]) > len("onnx-run: ")
