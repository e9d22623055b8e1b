"""onyx.Trainer: a fine-tune loop written in Python reaches onnx-train's loss
curve on the bundled CNN; checkpoints, export, params and gradients as
numpy; bad options raise. And the graph API trains and exports."""
import os
import subprocess

import numpy as np
import onnxruntime as ort
import pytest

import onyx

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
CNN = os.path.join(REPO, "models", "onnx", "tiny_cnn", "model.onnx")
TRAIN = os.path.join(REPO, "models", "data", "bars_train.npz")
VALID = os.path.join(REPO, "models", "data", "bars_valid.npz")
OPTIONS = dict(inputs={"x": "x"}, target="y", output="logits", loss="ce", optimizer="sgd", lr=0.02, momentum=0.9)


def tool(name):
    path = os.path.join(os.environ.get("ONYX_BIN_DIR", os.path.join(REPO, "build", "tools")), name)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not found: build it and set ONYX_BIN_DIR to its folder")
    return path


def test_python_loop_matches_onnx_train(tmp_path):
    log = tmp_path / "steps.log"
    r = subprocess.run([tool("onnx-train"), CNN, "--data", TRAIN, "--input", "x=x", "--target", "y", "--output",
                        "logits", "--loss", "ce", "--optimizer", "sgd", "--lr", "0.02", "--momentum", "0.9",
                        "--batch-size", "32", "--epochs", "1", "--no-shuffle", "--step-log", str(log), "-o",
                        str(tmp_path / "cli.onnx")], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    want = [float(line.split()[2]) for line in log.read_text().splitlines() if line.strip()]
    assert len(want) == 16  # 512 samples / 32

    data = np.load(TRAIN)
    x, y = data["x"], data["y"]
    trainer = onyx.Trainer(CNN, batch_size=32, **OPTIONS)
    got = [trainer.step({"x": x[i:i + 32], "y": y[i:i + 32]}) for i in range(0, len(x), 32)]
    np.testing.assert_allclose(got, want, rtol=1e-5)
    assert sum(got[-4:]) < sum(got[:4])  # it learns
    assert trainer.steps == 16

    # the exported models agree: Python's and onnx-train's
    trainer.export(str(tmp_path / "py.onnx"))
    xv = np.load(VALID)["x"][:8]
    feeds = {"x": xv.astype(np.float32) if onyx.InferenceSession(CNN).get_inputs()[0].type == "tensor(float)" else xv}
    a = onyx.InferenceSession(str(tmp_path / "py.onnx")).run(None, feeds)[0]
    b = ort.InferenceSession(str(tmp_path / "cli.onnx"), providers=["CPUExecutionProvider"]).run(None, feeds)[0]
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)


def test_params_gradients_checkpoint_and_evaluate(tmp_path):
    data = np.load(TRAIN)
    batch = {"x": data["x"][:32], "y": data["y"][:32]}
    t = onyx.Trainer(CNN, **OPTIONS)
    loss = t.compute_gradients(batch)
    grads = t.gradients()
    params = t.params()
    assert grads and set(grads) <= set(params)
    assert all(isinstance(g, np.ndarray) and np.isfinite(g).all() for g in grads.values())
    before = {k: v.copy() for k, v in params.items()}
    assert t.step(batch) == pytest.approx(loss, rel=1e-6)
    after = t.params()
    assert any(not np.array_equal(before[k], after[k]) for k in grads)
    ev = t.evaluate({"x": np.load(VALID)["x"], "y": np.load(VALID)["y"]})
    assert ev["samples"] == len(np.load(VALID)["y"]) and 0 <= ev["accuracy"] <= 1

    ckpt = tmp_path / "c.npz"
    t.save_checkpoint(str(ckpt))
    next_loss = t.step(batch)
    u = onyx.Trainer(CNN, **OPTIONS)
    u.set_data(batch)
    assert u.load_checkpoint(str(ckpt))["step"] == 1
    assert u.step(batch) == next_loss  # resumes bit for bit


def test_fit_runs_epochs_with_validation():
    tr, va = np.load(TRAIN), np.load(VALID)
    # the README's demo settings (onnx-train ... --lr 0.02 --epochs 3 --batch-size 32, adam)
    t = onyx.Trainer(CNN, inputs={"x": "x"}, target="y", output="logits", loss="ce", lr=0.02, epochs=3,
                     batch_size=32)
    epochs = t.fit({"x": tr["x"], "y": tr["y"]}, {"x": va["x"], "y": va["y"]})
    assert [e["epoch"] for e in epochs] == [1, 2, 3]
    assert epochs[2]["train_loss"] < epochs[0]["train_loss"]
    assert epochs[2]["valid"]["accuracy"] > 0.5


def test_bad_options_and_batches_raise():
    with pytest.raises(onyx.OnyxError, match="batch_size"):
        onyx.Trainer(CNN, batch_size=0, **OPTIONS)
    with pytest.raises(onyx.OnyxError, match="no option 'bogus'"):
        onyx.Trainer(CNN, bogus=1, **OPTIONS)
    with pytest.raises(onyx.OnyxError, match="loss"):
        onyx.Trainer(CNN, **{**OPTIONS, "loss": "hinge"})
    with pytest.raises(onyx.OnyxError, match="threads = -1"):
        onyx.Trainer(CNN, threads=-1, **OPTIONS)
    with pytest.raises(onyx.OnyxError, match="precision 'fp8'"):
        onyx.Trainer(CNN, precision="fp8", **OPTIONS)
    t = onyx.Trainer(CNN, **OPTIONS)
    with pytest.raises(onyx.OnyxError, match="y"):
        t.step({"x": np.load(TRAIN)["x"][:4]})


def test_graph_api_trains_saves_and_exports(tmp_path):
    rng = np.random.default_rng(0)
    xs = rng.normal(size=(64, 4)).astype(np.float32)
    labels = (xs[:, 0] + xs[:, 1] > 0).astype(np.int64)
    g = onyx.Graph()
    g.set_seed(5)
    opt = onyx.Optimizer("adam", lr=0.05)
    losses = []
    for _ in range(30):
        g.clear()
        x = g.constant(xs)
        w = g.param("W", [4, 2], onyx.inits.glorot_uniform())
        b = g.param("b", [1, 2], onyx.inits.zeros())
        logits = onyx.affine(x, w, b)
        loss = onyx.mean(onyx.cross_entropy(logits, g.indices(labels)))
        g.forward()
        g.backward(loss)
        opt.update(g)
        losses.append(loss.value().item())
    assert losses[-1] < 0.5 * losses[0]
    g.save(str(tmp_path / "p.npz"))
    saved = np.load(tmp_path / "p.npz")
    np.testing.assert_array_equal(saved["W"], g.params["W"].value())

    g.clear()
    x = g.input("x", [8, 4])
    probs = onyx.softmax(onyx.affine(x, g.params["W"], g.params["b"]), axis=-1)
    path = tmp_path / "lin.onnx"
    g.export_onnx(str(path), {"probs": probs}, dynamic_axes={"x": {0: "batch"}})
    ours = onyx.InferenceSession(str(path)).run(None, {"x": xs[:5]})[0]
    ref = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"]).run(None, {"x": xs[:5]})[0]
    np.testing.assert_allclose(ours, ref, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours.sum(axis=1), 1, rtol=1e-5)


def test_every_registry_op_is_a_function_with_its_doc():
    specs = onyx.ops()
    assert len(specs) > 100
    for s in specs:
        f = getattr(onyx, s["name"])
        assert callable(f) and f.__doc__ and s["name"] in onyx.__all__
    g = onyx.Graph()
    x = g.constant(np.array([[1.0, -2.0]], np.float32))
    with pytest.raises(TypeError, match="axs"):
        onyx.softmax(x, axs=1)
    with pytest.raises(onyx.OnyxError, match="no attribute 'axs'"):
        onyx._onyx.make("softmax", x, axs=1)
    y = onyx.relu(x) * 2 - 1
    g.forward()
    np.testing.assert_array_equal(y.value(), [[1.0, -1.0]])
