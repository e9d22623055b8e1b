#!/usr/bin/env python3
"""onnx-train's throughput (samples/s per epoch) against a plain PyTorch
training loop on the same model, data and settings, side by side in one
run; writes the comparison into docs/performance.md (its section).

    python3 tools/bench_train_loop.py --bin build/tools --threads 2 --out docs/performance.md
    python3 tools/bench_train_loop.py --bin build/tools --size smoke --rounds 1   # the tests' run

Workloads (--size full; smoke shrinks them for the tests):
  mlp  MLP 784-2048-2048-10, batch 256, 8192 samples
  cnn  a CIFAR-style CNN (5 conv 3x3 + BatchNorm + ReLU, 2 max pools,
       global average pool, linear 10) on 3x32x32, batch 64, 2048 samples

Each model is built in PyTorch (seeded), exported to ONNX in training mode,
and trained from the same initial weights on the same synthetic data
(x ~ N(0, 1); labels: the argmax of a fixed random linear map of x, so the
loss has something to learn) for EPOCHS epochs with Adam and cross entropy,
in file order (onnx-train --no-shuffle; the PyTorch loop slices the same
batches), so the two loss curves must agree up to float rounding: the two
loops do the same work. onnx-train runs as a user runs it (one process:
load, data, epochs, the trained model written at the end) and prints
samples/s per epoch; the PyTorch loop is the plain one (model.train(),
zero_grad, forward, loss, backward, step, loss.item() per batch) in a new
process. They alternate, ROUNDS rounds each. Epoch 1 includes what either
does once (graph building, kernel generation, first touch of memory).
"""
import argparse
import datetime
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

SIZES = {  # name: (batch, samples)
    "full": {"mlp": (256, 8192), "cnn": (64, 2048)},
    "smoke": {"mlp": (16, 64), "cnn": (8, 32)},
}


def build(name, size):
    """The workload's module and its input shape (one sample)."""
    import torch
    from torch import nn

    torch.manual_seed(7 if name == "mlp" else 8)
    if name == "mlp":
        hidden = 2048 if size == "full" else 64
        return nn.Sequential(nn.Flatten(), nn.Linear(784, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU(),
                             nn.Linear(hidden, 10)), (784,)

    def block(cin, cout):
        return [nn.Conv2d(cin, cout, 3, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]

    w = 32 if size == "full" else 8
    layers = (block(3, w) + block(w, w) + [nn.MaxPool2d(2)] + block(w, 2 * w) + block(2 * w, 2 * w) +
              [nn.MaxPool2d(2)] + block(2 * w, 4 * w) + [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(4 * w, 10)])
    return nn.Sequential(*layers), ((3, 32, 32) if size == "full" else (3, 16, 16))


def make_data(shape, samples, path):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((samples,) + tuple(shape)).astype(np.float32)
    teacher = rng.standard_normal((int(np.prod(shape)), 10)).astype(np.float32)
    y = np.argmax(x.reshape(samples, -1) @ teacher, axis=1).astype(np.int64)
    np.savez(path, x=x, y=y)


def torch_loop(args):
    """The hidden --torch-loop mode: in this new process, the plain PyTorch
    loop; prints one JSON line per epoch."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    module, _ = build(args.torch_loop, args.size)
    module.load_state_dict(torch.load(args.state))
    d = np.load(args.data)
    x, y = torch.from_numpy(d["x"]), torch.from_numpy(d["y"])
    opt = torch.optim.Adam(module.parameters(), lr=args.lr)
    loss_fn = torch.nn.CrossEntropyLoss()
    module.train()
    n, b = x.shape[0], args.batch
    for epoch in range(1, args.epochs + 1):
        t0 = time.perf_counter()
        total = 0.0
        for i in range(0, n, b):
            xb, yb = x[i:i + b], y[i:i + b]
            opt.zero_grad(set_to_none=True)
            loss = loss_fn(module(xb), yb)
            loss.backward()
            opt.step()
            total += loss.item() * xb.shape[0]
        sec = time.perf_counter() - t0
        print(json.dumps({"epoch": epoch, "loss": total / n, "samples_per_s": n / sec}), flush=True)
    return 0


EPOCH_LINE = re.compile(r"^epoch (\d+): train loss ([0-9.eE+-]+|nan|inf) \(([0-9.eE+-]+) samples/s\)")


def run_onyx(args, model, data, batch, out):
    cmd = [os.path.join(args.bin, "onnx-train"), model, "--data", data, "--input", "x=x", "--target", "y", "--output",
           "y", "--loss", "ce", "--optimizer", "adam", "--lr", str(args.lr), "--epochs", str(args.epochs),
           "--batch-size", str(batch), "--no-shuffle", "--threads", str(args.threads), "-o", out]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"onnx-train failed: {p.stderr.strip()}")
    epochs = []
    for line in p.stdout.splitlines():
        m = EPOCH_LINE.match(line.strip())
        if m:
            epochs.append({"epoch": int(m.group(1)), "loss": float(m.group(2)), "samples_per_s": float(m.group(3))})
    if len(epochs) != args.epochs:
        raise RuntimeError(f"onnx-train printed {len(epochs)} epoch lines, expected {args.epochs}:\n{p.stdout}")
    return epochs


def run_torch(args, name, state, data, batch):
    cmd = [sys.executable, os.path.abspath(__file__), "--torch-loop", name, "--size", args.size, "--state", state,
           "--data", data, "--batch", str(batch), "--epochs", str(args.epochs), "--lr", str(args.lr), "--threads",
           str(args.threads)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise RuntimeError(f"the PyTorch loop failed: {p.stderr.strip()}")
    return [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "tools"), help="folder with onnx-train")
    ap.add_argument("--size", choices=sorted(SIZES), default="full")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads of both (0: their defaults)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--out", default="", help="write the section of this markdown page (docs/performance.md)")
    ap.add_argument("--torch-loop", default="", help=argparse.SUPPRESS)
    ap.add_argument("--state", default="", help=argparse.SUPPRESS)
    ap.add_argument("--data", default="", help=argparse.SUPPRESS)
    ap.add_argument("--batch", type=int, default=0, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.torch_loop:
        return torch_loop(args)
    if args.epochs < 2:
        print("bench_train_loop: --epochs must be at least 2 (epoch 1 carries the one-time costs)", file=sys.stderr)
        return 2
    if not os.access(os.path.join(args.bin, "onnx-train"), os.X_OK):
        print(f"bench_train_loop: no onnx-train in {args.bin} (build the tools first)", file=sys.stderr)
        return 2
    import torch
    import bench_vs_torch

    only = set(filter(None, args.only.split(",")))
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, (batch, samples) in SIZES[args.size].items():
            if only and name not in only:
                continue
            module, shape = build(name, args.size)
            model = os.path.join(tmp, name + ".onnx")
            state = os.path.join(tmp, name + "_state.pt")
            data = os.path.join(tmp, name + "_data.npz")
            torch.save(module.state_dict(), state)
            bench_vs_torch.export(module, torch.zeros((batch,) + tuple(shape)), model, train=True)
            make_data(shape, samples, data)
            onyx, tor = [], []
            try:
                for _ in range(args.rounds):
                    onyx.append(run_onyx(args, model, data, batch, os.path.join(tmp, name + "_tuned.onnx")))
                    tor.append(run_torch(args, name, state, data, batch))
            except RuntimeError as e:
                print(f"bench_train_loop: {name}: {e}", file=sys.stderr)
                return 1

            def steady(runs):  # samples/s of the epochs after the first, median over all rounds
                return float(np.median([e["samples_per_s"] for r in runs for e in r[1:]]))

            def first(runs):
                return float(np.median([r[0]["samples_per_s"] for r in runs]))

            loss_o = [e["loss"] for e in onyx[0]]
            loss_t = [e["loss"] for e in tor[0]]
            row = {"name": name, "batch": batch, "samples": samples, "onyx_first": first(onyx),
                   "torch_first": first(tor), "onyx": steady(onyx), "torch": steady(tor),
                   "loss_onyx": loss_o, "loss_torch": loss_t,
                   "loss_diff": max(abs(a - b) / max(abs(b), 1e-12) for a, b in zip(loss_o, loss_t))}
            rows.append(row)
            print(f"{name}: onnx-train {row['onyx']:.0f} samples/s, PyTorch {row['torch']:.0f} samples/s "
                  f"(time per sample Onyx / PyTorch {row['torch'] / row['onyx']:.2f}); epoch losses {loss_o} vs {loss_t}",
                  file=sys.stderr)

    import bench_vs_ort

    where = bench_vs_ort.cpu_line(args.bin, args.threads)
    commit = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                            text=True).stdout.strip() or "?"
    cmdline = "python3 " + shlex.join([os.path.relpath(os.path.abspath(__file__), REPO)] + (argv or sys.argv[1:]))
    L = ["## onnx-train and a plain PyTorch loop on the CPU\n",
         "Generated by `tools/bench_train_loop.py`; every number in this section was measured by that script in one "
         "run. Re-run it to refresh the section.\n",
         "### Set-up\n",
         f"- Command: `{cmdline}`",
         f"- Date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}",
         f"- CPU: {where}",
         f"- Onyx: commit {commit}, `onnx-train` from `{os.path.relpath(os.path.abspath(args.bin), REPO)}` "
         f"(`--threads {args.threads}`); PyTorch {torch.__version__} (eager, float32, "
         f"`torch.set_num_threads({args.threads})` when not 0); Python {platform.python_version()}",
         f"- Per workload: {args.rounds} alternating rounds of an `onnx-train` process and a PyTorch process, each "
         f"{args.epochs} epochs over the same synthetic data in file order (Adam, lr {args.lr}, cross entropy), "
         "from the same initial weights (the PyTorch module exported to ONNX in training mode). Samples/s as each "
         "prints it per epoch (onnx-train's own line; the PyTorch loop's samples over the epoch's time). Epoch 1: "
         "median over the rounds; later epochs: median over all of them and the rounds.",
         "- Loss check: the largest relative difference between the two engines' mean training loss per epoch "
         "(first round): the loops do the same arithmetic, so it is float rounding, grown over the epochs' steps.\n",
         "Ratio = time per sample, Onyx / PyTorch = PyTorch's samples/s over onnx-train's (below 1: Onyx faster), "
         "as in the other sections.\n",
         "| workload | batch | samples per epoch | onnx-train samples/s | PyTorch samples/s | ratio "
         "| epoch 1: onnx-train / PyTorch samples/s | epoch losses (onnx-train) | loss difference |",
         "|---|---:|---:|---:|---:|---:|---:|---|---:|"]
    for r in rows:
        L.append(f"| {r['name']} | {r['batch']} | {r['samples']} | {r['onyx']:.0f} | {r['torch']:.0f} | "
                 f"{r['torch'] / r['onyx']:.2f} | {r['onyx_first']:.0f} / {r['torch_first']:.0f} | "
                 f"{', '.join(f'{v:.4f}' for v in r['loss_onyx'])} | {r['loss_diff']:.1e} |")
    text = "\n".join(L) + "\n"
    from perfdoc import emit
    emit(args.out, "bench_train_loop_cpu", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
