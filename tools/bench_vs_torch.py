#!/usr/bin/env python3
"""Benchmarks Onyx (onnx-bench) against PyTorch on one device, side by side
in one run, and writes the ratios into docs/performance.md (its section).

    python3 tools/bench_vs_torch.py --bin build-rel/tools --device gpu0 --out docs/performance.md
    python3 tools/bench_vs_torch.py --bin build/tools --device cpu --size small   # a quick check
    python3 tools/bench_vs_torch.py --bin build/tools --device cpu --precision bf16 --only mlp,resnet18,bert-small

--precision bf16 (CPU): Onyx runs with --precision bf16 (products and
convolutions on bfloat16-rounded operands, values in float32) and PyTorch
under torch.autocast("cpu", dtype=torch.bfloat16) (the loss in float32);
its section of the page is separate from the float32 one.

Workloads (--size full; small shrinks them for a CPU check, smoke for the
tests' run of this script):
  resnet50   inference, batch 8, 3x224x224
  bert-base  inference, a 12-layer encoder (hidden 768, 12 heads, FFN 3072), batch 8, sequence 128
  mlp        training step, batch 256, 784-2048-2048-10
  resnet18   training step, batch 32, 3x224x224
  bert-small training step, a 4-layer encoder (hidden 256, 4 heads, FFN 1024), batch 8, sequence 128

The models are built in PyTorch (seeded) and exported to ONNX once; Onyx
runs the exported file with onnx-bench (inference, or --train: graph
rebuilt per step, loss = mean(output squared), backward, one SGD step,
the loss read back) and PyTorch runs the same module with the same inputs
(inference under no_grad; training: zero_grad, forward, the same loss,
backward, SGD step, loss.item()). Both time input upload and output
download. The two alternate, ROUNDS rounds each (Onyx in a fresh process,
then PyTorch in this one), so slow phases of the machine hit both; all
timed iterations are pooled into median and p90. Peak resident memory
is the whole process's (VmHWM): onnx-bench's, and that of the new process in
which PyTorch's first call is timed (three calls there).
"""
import argparse
import datetime
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def torch_models(size, names=None):
    """The workloads as (name, mode, module, input shape), in the order of
    the page; with names, only those are built (a module is seeded by its
    name's place in the list, so it is the same either way)."""
    import torch
    from torch import nn

    class Bottleneck(nn.Module):
        def __init__(self, cin, width, stride, expansion=4):
            super().__init__()
            cout = width * expansion
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                nn.Conv2d(width, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout))
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x):
            return torch.relu(self.body(x) + (x if self.down is None else self.down(x)))

    class Basic(nn.Module):
        def __init__(self, cin, width, stride):
            super().__init__()
            self.body = nn.Sequential(
                nn.Conv2d(cin, width, 3, stride, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(inplace=True),
                nn.Conv2d(width, width, 3, 1, 1, bias=False), nn.BatchNorm2d(width))
            self.down = None
            if stride != 1 or cin != width:
                self.down = nn.Sequential(nn.Conv2d(cin, width, 1, stride, bias=False), nn.BatchNorm2d(width))

        def forward(self, x):
            return torch.relu(self.body(x) + (x if self.down is None else self.down(x)))

    def resnet(block, layers, expansion, classes=1000):
        mods = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(inplace=True), nn.MaxPool2d(3, 2, 1)]
        cin = 64
        for i, n in enumerate(layers):
            width = 64 * 2**i
            for j in range(n):
                stride = 2 if (j == 0 and i > 0) else 1
                mods.append(block(cin, width, stride))
                cin = width * expansion
        mods += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(cin, classes)]
        return nn.Sequential(*mods)

    class Encoder(nn.Module):
        def __init__(self, layers, hidden, heads, ffn):
            super().__init__()
            layer = nn.TransformerEncoderLayer(hidden, heads, ffn, dropout=0.0, activation="gelu", batch_first=True)
            self.enc = nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)

        def forward(self, x):
            return self.enc(x)

    # full: the sizes the docs report; small: a CPU-sized check; smoke: the
    # tests' run of this script (it must work, its numbers mean nothing).
    f = {"full": 0, "small": 1, "smoke": 2}[size]
    pick = lambda *v: v[f]  # noqa: E731
    img = pick(224, 64, 32)
    builders = [
        # name, mode, module builder, input shape
        ("resnet50", "inference", lambda: resnet(Bottleneck, pick([3, 4, 6, 3], [1, 1, 1, 1], [1, 1, 1, 1]), 4),
         (pick(8, 2, 1), 3, img, img)),
        ("bert-base", "inference",
         lambda: Encoder(pick(12, 2, 1), pick(768, 128, 32), pick(12, 4, 2), pick(3072, 512, 64)),
         (pick(8, 2, 1), pick(128, 32, 8), pick(768, 128, 32))),
        ("mlp", "train", lambda: nn.Sequential(nn.Linear(784, pick(2048, 256, 32)), nn.ReLU(),
                                               nn.Linear(pick(2048, 256, 32), pick(2048, 256, 32)), nn.ReLU(),
                                               nn.Linear(pick(2048, 256, 32), 10)),
         (pick(256, 32, 4), 784)),
        ("resnet18", "train", lambda: resnet(Basic, pick([2, 2, 2, 2], [1, 1, 1, 1], [1, 1, 1, 1]), 1),
         (pick(32, 2, 2), 3, img, img)),  # BatchNorm trains on >= 2 values per channel
        # a BERT-style fine-tune: 4 layers, hidden 256, 4 heads, FFN 1024, batch 8, sequence 128
        ("bert-small", "train", lambda: Encoder(pick(4, 2, 1), pick(256, 128, 32), pick(4, 4, 2), pick(1024, 512, 64)),
         (pick(8, 2, 1), pick(128, 32, 8), pick(256, 128, 32))),
    ]
    out = []
    for i, (name, mode, build, shape) in enumerate(builders):
        if names is None or name in names:
            torch.manual_seed(i)
            out.append((name, mode, build(), shape))
    return out


def export(module, x, path, train):
    """Training workloads are exported in training mode, so BatchNormalization
    carries training_mode=1 and normalises with batch statistics in Onyx, as
    PyTorch's train() does."""
    import torch

    mode = torch.onnx.TrainingMode.TRAINING if train else torch.onnx.TrainingMode.EVAL
    module.train(train)
    torch.onnx.export(module, (x,), path, input_names=["x"], output_names=["y"], opset_version=17, dynamo=False,
                      training=mode, do_constant_folding=not train)


def torch_step(module, mode, x_host, dev, lr, bf16=False):
    """One call of the workload in PyTorch (inference, or a training step
    with SGD), and a function that waits for the device."""
    import contextlib
    import torch

    def autocast():
        return torch.autocast(device_type="cpu", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()

    def sync():
        if dev.type == "cuda":
            torch.cuda.synchronize(dev)

    if mode == "inference":
        module.eval()

        def step():
            with torch.no_grad(), autocast():
                module(x_host.to(dev)).float().cpu()
    else:
        module.train()
        opt = torch.optim.SGD(module.parameters(), lr=lr)

        def step():
            opt.zero_grad(set_to_none=True)
            with autocast():
                out = module(x_host.to(dev))
            out = out.float()
            loss = (out * out).mean()
            loss.backward()
            opt.step()
            loss.item()

    return step, sync


def time_torch(module, mode, x_host, dev, warmup, iters, lr, bf16=False):
    step, sync = torch_step(module, mode, x_host, dev, lr, bf16)
    for _ in range(1 + warmup):
        step()
    sync()
    samples = []
    for _ in range(iters):
        t0 = time.perf_counter()
        step()
        sync()
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples


def cold_first(args, name):
    """The hidden --cold-first mode: in this new process, build the workload's
    module, load the weights the parent saved, and time its first call, as
    onnx-bench's "first run" is the first call of a new process (after
    Model::load). The module of the parent has run many steps by then (and
    torch.onnx.export traced it), so its first step there is a warm one.
    Two more calls follow, and the process's peak resident memory is
    reported with the resident memory before the first call."""
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    dev = torch.device("cpu" if args.device == "cpu" else f"cuda:{int(args.device[3:] or 0)}")
    (_, mode, module, _), = torch_models(args.size, {name})
    module.load_state_dict(torch.load(args.state, map_location="cpu"))
    module = module.to(dev)
    x = torch.from_numpy(np.load(args.x))
    step, sync = torch_step(module, mode, x, dev, args.lr, args.precision == "bf16")
    before = vm_hwm_mb()
    t0 = time.perf_counter()
    step()
    sync()
    first_ms = (time.perf_counter() - t0) * 1e3
    # Two more calls for the peak: a process's memory settles after its
    # second step (onnx-bench's peak is over all its runs).
    for _ in range(2):
        step()
    sync()
    print(json.dumps({"first_ms": first_ms, "peak_rss_mb": vm_hwm_mb(), "rss_before_mb": before}))
    return 0


def vm_hwm_mb():
    """This process's peak resident memory in MiB (VmHWM, as onnx-bench
    reports its own)."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024.0
    import resource
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0


def quantile(v, q):
    v = sorted(v)
    k = max(0, min(len(v) - 1, int(np.ceil(q * len(v))) - 1))
    return v[k]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "tools"), help="folder with onnx-bench")
    ap.add_argument("--device", default="gpu0", help="cpu or gpu0 (PyTorch: cpu or cuda:0)")
    ap.add_argument("--size", choices=["full", "small", "smoke"], default="full")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads of both (0: their defaults)")
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--only", default="", help="comma-separated workload names")
    ap.add_argument("--out", default="", help="write the section of this markdown page (docs/performance.md)")
    ap.add_argument("--precision", choices=["float32", "bf16"], default="float32",
                    help="bf16 (CPU only): Onyx --precision bf16 against PyTorch's bfloat16 autocast")
    ap.add_argument("--cold-first", default="", help=argparse.SUPPRESS)
    ap.add_argument("--x", default="", help=argparse.SUPPRESS)
    ap.add_argument("--state", default="", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.cold_first:
        return cold_first(args, args.cold_first)
    bf16 = args.precision == "bf16"
    if bf16 and args.device != "cpu":
        print("bench_vs_torch: --precision bf16 is a CPU comparison (--device cpu)", file=sys.stderr)
        return 2

    import torch

    if args.device == "cpu":
        dev = torch.device("cpu")
    elif args.device.startswith("gpu"):
        if not torch.cuda.is_available():
            print(f"bench_vs_torch: --device {args.device}: PyTorch sees no CUDA device", file=sys.stderr)
            return 2
        dev = torch.device(f"cuda:{int(args.device[3:] or 0)}")
    else:
        print(f"bench_vs_torch: --device must be cpu or gpuN, got '{args.device}'", file=sys.stderr)
        return 2
    if args.threads:
        torch.set_num_threads(args.threads)
    # float32 in float32 on both sides: Onyx uses no TF32 (cuBLAS and cuDNN
    # are told so), so neither does PyTorch here.
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    bench = os.path.join(args.bin, "onnx-bench")
    if not os.path.exists(bench):
        print(f"bench_vs_torch: no onnx-bench in {args.bin} (build the tools first)", file=sys.stderr)
        return 2
    only = set(filter(None, args.only.split(",")))

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, mode, module, shape in torch_models(args.size):
            if only and name not in only:
                continue
            gen = torch.Generator().manual_seed(1)
            x = torch.rand(shape, generator=gen) * 2 - 1
            model_path = os.path.join(tmp, name + ".onnx")
            x_path = os.path.join(tmp, name + "_x.npy")
            export(module, x, model_path, mode == "train")
            np.save(x_path, x.numpy())
            state_path = os.path.join(tmp, name + "_state.pt")
            torch.save(module.state_dict(), state_path)
            cold = [sys.executable, os.path.abspath(__file__), "--cold-first", name, "--size", args.size, "--x", x_path,
                    "--state", state_path, "--device", args.device, "--threads", str(args.threads), "--lr",
                    str(args.lr), "--precision", args.precision]
            module = module.to(dev)
            cmd = [bench, model_path, "--input", f"x={x_path}", "--device", args.device, "--iters", str(args.iters),
                   "--warmup", str(args.warmup), "--threads", str(args.threads), "--json"]
            if mode == "train":
                cmd += ["--train", "--lr", str(args.lr)]
            if bf16:
                cmd += ["--precision", "bf16"]
            onyx, tor, onyx_first, torch_first, onyx_rss, torch_rss, torch_base = [], [], [], [], [], [], []
            onyx_precision = "float32"
            for _ in range(args.rounds):
                p = subprocess.run(cmd, capture_output=True, text=True)
                if p.returncode != 0:
                    print(f"bench_vs_torch: {name}: onnx-bench failed: {p.stderr.strip()}", file=sys.stderr)
                    return 1
                r = json.loads(p.stdout.strip().splitlines()[-1])
                onyx += r["samples_ms"]
                onyx_first.append(r["first_run_ms"])
                onyx_rss.append(r["peak_rss_mb"])
                onyx_precision = r.get("precision", "float32")
                tor += time_torch(module, mode, x, dev, args.warmup, args.iters, args.lr, bf16)
                p = subprocess.run(cold, capture_output=True, text=True)
                if p.returncode != 0:
                    print(f"bench_vs_torch: {name}: PyTorch's first step in a new process failed: "
                          f"{p.stderr.strip()}", file=sys.stderr)
                    return 1
                cf = json.loads(p.stdout.strip().splitlines()[-1])
                torch_first.append(cf["first_ms"])
                torch_rss.append(cf["peak_rss_mb"])
                torch_base.append(cf["rss_before_mb"])
            row = {"name": name, "mode": mode, "shape": "x".join(map(str, shape)),
                   "onyx_median": float(np.median(onyx)), "onyx_p90": quantile(onyx, 0.9),
                   "torch_median": float(np.median(tor)), "torch_p90": quantile(tor, 0.9),
                   "onyx_first": float(np.median(onyx_first)), "torch_first": float(np.median(torch_first)),
                   "onyx_rss": max(onyx_rss), "torch_rss": max(torch_rss), "torch_base": max(torch_base)}
            row["ratio"] = row["onyx_median"] / row["torch_median"]
            if bf16 and onyx_precision != "bf16":
                print(f"bench_vs_torch: {name}: onnx-bench computed in {onyx_precision} (no bfloat16 on this CPU)",
                      file=sys.stderr)
                return 1
            rows.append(row)
            print(f"{name} ({mode}): onyx {row['onyx_median']:.3f} ms, torch {row['torch_median']:.3f} ms, "
                  f"ratio {row['ratio']:.2f}; peak RSS onyx {row['onyx_rss']:.0f} MiB, torch {row['torch_rss']:.0f} "
                  f"MiB", file=sys.stderr)

    def git(*a):
        try:
            return subprocess.run(["git", "-C", REPO] + list(a), capture_output=True, text=True).stdout.strip()
        except OSError:
            return "?"

    where = torch.cuda.get_device_name(dev) if dev.type == "cuda" else platform.processor() or platform.machine()
    if dev.type == "cpu":
        sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
        import bench_vs_ort
        where = bench_vs_ort.cpu_line(args.bin, args.threads)
    cmdline = "python3 " + shlex.join([os.path.relpath(os.path.abspath(__file__), REPO)] + (argv or sys.argv[1:]))
    title = f"## Onyx and PyTorch on {args.device} ({args.size} workloads)"
    if bf16:
        title = f"## Onyx and PyTorch on {args.device}, bfloat16 compute ({args.size} workloads)"
    L = [title + "\n",
         "Generated by `tools/bench_vs_torch.py`; every number in this section was measured by that script in "
         "one run. Re-run it to refresh the section.\n",
         "### Set-up\n",
         f"- Command: `{cmdline}`",
         f"- Date: {datetime.datetime.now().strftime('%Y-%m-%d %H:%M')}",
         f"- Device: {where}",
         f"- Onyx: commit {git('rev-parse', '--short', 'HEAD')}, `onnx-bench` from `{os.path.relpath(args.bin, REPO)}`",
         (f"- PyTorch {torch.__version__} (eager, torch.autocast('cpu', dtype=torch.bfloat16) around the forward, "
          "the loss in float32) against Onyx's `--precision bf16` (matmul, Gemm and convolutions, forward and "
          f"backward, on bfloat16-rounded operands; values in float32); Python {platform.python_version()}"
          if bf16 else
          f"- PyTorch {torch.__version__} (eager, float32, TF32 off for matmul and cuDNN as in Onyx, cuDNN "
          f"{torch.backends.cudnn.version() if dev.type == 'cuda' else 'n/a'}); Python {platform.python_version()}"),
         f"- Per workload: {args.rounds} alternating rounds (an Onyx process, then PyTorch), each {args.warmup} "
         f"warm-up + {args.iters} timed iterations; median and p90 over all timed iterations. Both time the input "
         "upload and the output (or loss) read-back.",
         "- Training: loss = mean(output squared), one SGD step (lr "
         f"{args.lr}); Onyx rebuilds its graph every step (as its training loop does), which is in its time.",
         "- First: the first call in a new process of each (median over the rounds): Onyx's `onnx-bench` after "
         "`Model::load`, PyTorch's after building the module and loading the same weights (and its device "
         "set-up); it includes what either does once (graph building, kernel generation, first touch of memory).",
         "- Peak RSS: the highest resident memory (VmHWM) of a whole process over the rounds, libraries and "
         "interpreter included: Onyx's `onnx-bench` process (load, first run, warm-up and timed runs); "
         "PyTorch's new process of the first call (Python, torch, the module and its weights, then three calls); "
         "in brackets that process's resident memory before its first call, so the difference is what the "
         "calls themselves took.\n",
         "### Latency\n",
         "Ratio = Onyx median / PyTorch median (below 1: Onyx faster).\n",
         "| workload | mode | input | Onyx median ms | Onyx p90 ms | PyTorch median ms | PyTorch p90 ms | ratio | "
         "Onyx first ms | PyTorch first ms | Onyx peak RSS MiB | PyTorch peak RSS MiB |",
         "|---|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        L.append(f"| {r['name']} | {r['mode']} | {r['shape']} | {r['onyx_median']:.3f} | {r['onyx_p90']:.3f} | "
                 f"{r['torch_median']:.3f} | {r['torch_p90']:.3f} | {r['ratio']:.2f} | {r['onyx_first']:.1f} | "
                 f"{r['torch_first']:.1f} | {r['onyx_rss']:.0f} | {r['torch_rss']:.0f} ({r['torch_base']:.0f}) |")
    text = "\n".join(L) + "\n"
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from perfdoc import emit
    emit(args.out, f"bench_vs_torch_{args.device}" + ("_bf16" if bf16 else ""), text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
