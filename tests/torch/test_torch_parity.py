"""Onyx training against PyTorch, on models exported from torch and trained by onnx-train.
Gradients: for an MLP, a CNN with BatchNormalization and a transformer encoder layer, the loss,
every initializer's gradient and the BN running statistics of `onnx-train --dump-gradients`
match torch's on one batch. Training: SGD on the CNN gives torch's loss curve and trained model.
Run: ONYX_BIN_DIR=build/tools python3 -m pytest -q tests/torch  (needs torch, onnx, onnxruntime)
"""
import os
import subprocess
import zipfile

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
import torch.nn.functional as F
from onnx import numpy_helper
from torch import nn

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

torch.set_num_threads(1)

# Gradients: the rtol. The atol only covers elements whose exact value is (near) zero,
# where float32 roundoff is all there is (e.g. the key bias of attention: softmax is invariant
# to it, so its gradient is 0 up to roundoff): 1e-6 of the tensor's largest gradient, i.e. ~10
# float32 ulps of the tensor's scale. Losses and BN statistics are single reductions: rtol 1e-5.
GRAD_RTOL = 1e-4
GRAD_ATOL_SCALE = 1e-6
LOSS_RTOL = 1e-5
STATE_RTOL = 1e-5
CURVE_RTOL = 1e-3  # the bound on the loss curve


def tool(name):
    """$ONYX_BIN_DIR/name (default build/tools/name); fails (never skips) when missing."""
    path = os.path.join(os.environ.get("ONYX_BIN_DIR", REPO + "/build/tools"), name)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not found: build Onyx and set ONYX_BIN_DIR to the tools folder")
    return path


# ----------------------------------------------------------------------------- models

class MLP(nn.Module):
    def __init__(self, sizes=(12, 32, 24, 16, 5)):
        super().__init__()
        self.layers = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))

    def forward(self, x):
        for layer in self.layers[:-1]:
            x = F.relu(layer(x))
        return self.layers[-1](x)


class CNN(nn.Module):
    """Conv -> BN -> ReLU -> MaxPool -> Conv -> BN -> ReLU -> AvgPool -> Linear on [N, 3, 8, 8].

    The convolutions have no bias: before a BatchNormalization a bias has an exactly zero
    gradient, which would compare float32 roundoff only.
    """

    def __init__(self, classes=5, c2=12):
        super().__init__()
        self.conv1 = nn.Conv2d(3, 8, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, c2, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c2)
        self.fc = nn.Linear(c2 * 2 * 2, classes)
        # Non-trivial BN parameters and running statistics: with the defaults (ones and zeros)
        # the legacy exporter merges equal initializers (bn1.weight also feeds both
        # running_var inputs and bn2.weight), and a swapped mean/var would go unnoticed.
        with torch.no_grad():
            for bn in (self.bn1, self.bn2):
                bn.weight.uniform_(0.5, 1.5)
                bn.bias.uniform_(-0.5, 0.5)
                bn.running_mean.uniform_(-0.5, 0.5)
                bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        x = F.max_pool2d(F.relu(self.bn1(self.conv1(x))), 2)
        x = F.avg_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        return self.fc(torch.flatten(x, 1))


def make_transformer():
    return nn.TransformerEncoderLayer(d_model=16, nhead=2, dim_feedforward=32, dropout=0.0,
                                      batch_first=True, activation="gelu")


def class_target(classes):
    return lambda gen, n, y_shape: torch.randint(0, classes, (n,), generator=gen)


def dense_target(gen, n, y_shape):
    return torch.randn((n,) + tuple(y_shape[1:]), generator=gen)


# name: (builder, input shape, loss, target maker, exporter)
# The transformer goes through the dynamo exporter: the legacy (TorchScript) exporter of
# torch 2.15 fails on nn.MultiheadAttention ("scaled_dot_product_attention(): argument
# 'is_causal' must be bool, not Tensor"); the dynamo exporter keeps the parameter names too.
CASES = {
    "mlp": (MLP, (16, 12), "ce", class_target(5), "legacy"),
    "cnn": (CNN, (8, 3, 8, 8), "ce", class_target(5), "legacy"),
    "transformer": (make_transformer, (4, 6, 16), "mse", dense_target, "dynamo"),
}


# ----------------------------------------------------------------------------- helpers

def export(model, x, path, exporter):
    """Exports model.eval() with input "x", output "y" and a dynamic batch axis."""
    model.eval()
    if exporter == "legacy":
        torch.onnx.export(model, (x,), path, dynamo=False, do_constant_folding=False,
                          opset_version=17, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "N"}, "y": {0: "N"}})
    else:
        torch.onnx.export(model, (x,), path, dynamo=True, optimize=False, opset_version=18,
                          input_names=["x"], output_names=["y"],
                          dynamic_shapes=({0: torch.export.Dim("N")},))


def initializers(path):
    return {t.name: numpy_helper.to_array(t) for t in onnx.load(path).graph.initializer}


def check_names_kept(model, path):
    """Every torch parameter (and BN running statistic) must be an initializer of that name."""
    inits = initializers(path)
    wanted = [n for n, _ in model.named_parameters()]
    wanted += [n for n, _ in model.named_buffers() if n.endswith(("running_mean", "running_var"))]
    missing = [n for n in wanted if n not in inits]
    assert not missing, (f"{path}: the exporter renamed or merged these tensors, so gradients "
                         f"cannot be matched by name: {missing}; initializers: {sorted(inits)}")
    return inits


def load_from_onnx(model, path):
    """Sets the model's parameters and BN statistics from the ONNX file's initializers."""
    inits = initializers(path)
    state = model.state_dict()
    for name in state:
        if name in inits:
            state[name] = torch.from_numpy(inits[name].copy())
    model.load_state_dict(state)


def loss_fn(kind):
    return {"ce": F.cross_entropy, "mse": F.mse_loss}[kind]


def onnx_train(model_path, data, tmp_path, loss, *args):
    """Writes data (dict of arrays) as d.npz and runs onnx-train with x <- "x", target "t"."""
    data_path = str(tmp_path / "d.npz")
    np.savez(data_path, **data)
    cmd = [tool("onnx-train"), str(model_path), "--data", data_path, "--input", "x=x",
           "--target", "t", "--output", "y", "--loss", loss, "--optimizer", "sgd",
           "--no-shuffle", *map(str, args)]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, f"{' '.join(cmd)} failed ({r.returncode}):\n{r.stdout}\n{r.stderr}"
    return r


def load_npz_unique(path):
    """Loads an .npz, failing when a name appears twice (np.load would keep one silently)."""
    names = zipfile.ZipFile(path).namelist()
    dups = sorted({n for n in names if names.count(n) > 1})
    assert not dups, f"{path} holds these arrays more than once: {dups}"
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def assert_grad_close(name, got, want):
    atol = GRAD_ATOL_SCALE * float(np.abs(want).max())
    np.testing.assert_allclose(got, want, rtol=GRAD_RTOL, atol=atol,
                               err_msg=f"gradient of {name} (atol {atol:.3g})")


# ----------------------------------------------------------------------------- tests

@pytest.mark.parametrize("case", sorted(CASES))
def test_gradient_parity(case, tmp_path):
    build, shape, loss_kind, make_target, exporter = CASES[case]
    torch.manual_seed(0)
    model = build()
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(shape, generator=gen)
    path = str(tmp_path / f"{case}.onnx")
    export(model, x, path, exporter)
    check_names_kept(model, path)

    # Torch: one training-mode step's loss, gradients and BN statistics on the batch.
    with torch.no_grad():
        y_shape = model.eval()(x).shape
    target = make_target(gen, shape[0], y_shape)
    model.train()
    model.zero_grad()
    loss = loss_fn(loss_kind)(model(x), target)
    loss.backward()
    want = {n: p.grad.numpy() for n, p in model.named_parameters()}
    want_state = {n: b.numpy() for n, b in model.named_buffers()
                  if n.endswith(("running_mean", "running_var"))}

    # Onyx: the same batch (the whole file is one batch).
    grads_path = str(tmp_path / "g.npz")
    onnx_train(path, {"x": x.numpy(), "t": target.numpy()}, tmp_path, loss_kind,
               "--batch-size", shape[0], "--dump-gradients", grads_path)
    got = load_npz_unique(grads_path)

    np.testing.assert_allclose(got["loss"], loss.item(), rtol=LOSS_RTOL, err_msg="loss")
    got_grads = {k[len("grad/"):]: v for k, v in got.items() if k.startswith("grad/")}
    assert sorted(got_grads) == sorted(want), (
        f"gradients: missing {sorted(set(want) - set(got_grads))}, "
        f"extra {sorted(set(got_grads) - set(want))}")
    for name, g in want.items():
        shape_got = got_grads[name].shape
        assert shape_got == g.shape, f"{name}: shape {shape_got}, torch {g.shape}"
        assert_grad_close(name, got_grads[name], g)

    got_state = {k[len("state/"):]: v for k, v in got.items() if k.startswith("state/")}
    assert sorted(got_state) == sorted(want_state), (
        f"BN statistics: got {sorted(got_state)}, torch {sorted(want_state)}")
    for name, s in want_state.items():
        np.testing.assert_allclose(got_state[name], s, rtol=STATE_RTOL, atol=1e-7,
                                   err_msg=f"{name} after one training-mode batch")


def read_step_log(path):
    """'step epoch loss lr' lines -> list of losses, in step order."""
    rows = [line.split() for line in open(path) if line.strip()]
    steps = [int(r[0]) for r in rows]
    assert steps == list(range(1, len(rows) + 1)), f"step log is not steps 1..n: {steps}"
    return np.array([float(r[2]) for r in rows])


def test_training_parity(tmp_path):
    samples, batch, epochs, lr, classes = 64, 8, 3, 0.1, 5
    torch.manual_seed(0)
    model = CNN(classes)
    gen = torch.Generator().manual_seed(2)
    x = torch.randn(samples, 3, 8, 8, generator=gen)
    # Learnable labels (a fixed linear function of the per-channel means), so the loss drops.
    t = (x.mean((2, 3)) @ torch.randn(3, classes, generator=gen)).argmax(1)
    x_held = torch.randn(batch, 3, 8, 8, generator=gen)
    path = str(tmp_path / "cnn.onnx")
    export(model, x[:batch], path, "legacy")
    check_names_kept(model, path)

    # Torch from the ONNX file's weights and statistics, batches in file order.
    model = CNN(classes)
    load_from_onnx(model, path)
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=lr)
    want = []
    for _ in range(epochs):
        for i in range(0, samples, batch):
            opt.zero_grad()
            loss = F.cross_entropy(model(x[i:i + batch]), t[i:i + batch])
            want.append(loss.item())
            loss.backward()
            opt.step()
    want = np.array(want)

    log, out = str(tmp_path / "steps.txt"), str(tmp_path / "trained.onnx")
    onnx_train(path, {"x": x.numpy(), "t": t.numpy()}, tmp_path, "ce", "--lr", lr,
               "--batch-size", batch, "--epochs", epochs, "--step-log", log, "-o", out)
    got = read_step_log(log)

    steps_per_epoch = samples // batch
    assert len(got) == len(want) == epochs * steps_per_epoch
    np.testing.assert_allclose(got, want, rtol=CURVE_RTOL, err_msg="loss per SGD step")
    for who, curve in (("torch", want), ("Onyx", got)):
        first, last = curve[:steps_per_epoch].mean(), curve[-steps_per_epoch:].mean()
        assert last < 0.9 * first, f"{who}'s loss did not drop (epoch means {first} -> {last})"

    # The trained file (weights and BN running statistics) against torch's model in eval().
    model.eval()
    with torch.no_grad():
        want_y = model(x_held).numpy()
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    sess = ort.InferenceSession(out, so, providers=["CPUExecutionProvider"])
    got_y = sess.run(["y"], {"x": x_held.numpy()})[0]
    np.testing.assert_allclose(got_y, want_y, rtol=1e-3, atol=1e-4,
                               err_msg="trained model on a held-out batch (eval mode)")
    # ...and it did train: the output moved away from the initial model's.
    initial = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    assert not np.allclose(initial.run(["y"], {"x": x_held.numpy()})[0], want_y, atol=1e-2)


def identity_sources(path):
    """name -> the initializer it comes from through Identity nodes (itself when none)."""
    src = {n.output[0]: n.input[0] for n in onnx.load(path).graph.node if n.op_type == "Identity"}

    def resolve(name):
        while name in src:
            name = src[name]
        return name
    return resolve


def test_merged_initializers(tmp_path):
    """With BN at its defaults (ones and zeros) the legacy exporter merges equal tensors:
    bn1.weight also feeds bn2.weight and both running_var inputs through Identity nodes. The
    running statistics must still be buffers of their own (torch's values after the batch), and
    a merged initializer's gradient is the sum of the gradients of the params that share it."""
    torch.manual_seed(0)
    model = CNN(c2=8)  # both BN layers of 8 channels: their weights merge too
    with torch.no_grad():
        for bn in (model.bn1, model.bn2):
            bn.reset_parameters()
            bn.reset_running_stats()
    gen = torch.Generator().manual_seed(3)
    x = torch.randn(8, 3, 8, 8, generator=gen)
    t = torch.randint(0, 5, (8,), generator=gen)
    path = str(tmp_path / "merged.onnx")
    export(model, x, path, "legacy")
    resolve = identity_sources(path)
    merged = sorted(n for n, _ in model.named_parameters() if resolve(n) != n)
    shared_state = sorted(n for n, _ in model.named_buffers() if n.endswith("running_var") and resolve(n) != n)
    assert merged and shared_state, "the exporter no longer merges equal initializers: this test lost its case"

    model.train()
    model.zero_grad()
    F.cross_entropy(model(x), t).backward()
    want = {}
    for n, p in model.named_parameters():
        want[resolve(n)] = want.get(resolve(n), 0) + p.grad.numpy()
    want_state = {n: b.numpy() for n, b in model.named_buffers() if n.endswith(("running_mean", "running_var"))}

    grads_path = str(tmp_path / "g.npz")
    onnx_train(path, {"x": x.numpy(), "t": t.numpy()}, tmp_path, "ce", "--batch-size", 8,
               "--dump-gradients", grads_path)
    got = load_npz_unique(grads_path)
    got_grads = {k[len("grad/"):]: v for k, v in got.items() if k.startswith("grad/")}
    assert sorted(got_grads) == sorted(want), f"gradients {sorted(got_grads)}, want {sorted(want)} (merged: {merged})"
    for name, g in want.items():
        assert_grad_close(name, got_grads[name], g)
    got_state = {k[len("state/"):]: v for k, v in got.items() if k.startswith("state/")}
    assert sorted(got_state) == sorted(want_state), f"BN statistics: got {sorted(got_state)}, torch {sorted(want_state)}"
    for name, s in want_state.items():
        np.testing.assert_allclose(got_state[name], s, rtol=STATE_RTOL, atol=1e-7, err_msg=name)
