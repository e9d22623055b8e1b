#!/usr/bin/env python3
"""The Python call of onyx.InferenceSession.run against onnxruntime's, side
by side in one process, alternating, on:

  identity  Identity on float32[1,784]: the engine does nothing, so the time
            per call is the Python binding's overhead (feeds in, outputs out);
  mlp       tools/bench_models.py's MLP 784-512-512-10 at batch 1 (needs
            torch to export it once into build/bench_models).

    PYTHONPATH=build/python python3 tools/bench_python.py --bin build/tools
    PYTHONPATH=build/python python3 tools/bench_python.py --rounds 3 --calls 2000 --threads 1

Each round times CALLS calls of one engine then CALLS of the other (the
order swapped every round); the per-call times of all rounds are pooled into
a median and p90, and the ratio is Onyx's median over onnxruntime's. The
report names the CPU and the load, and measures the machine's FMA peak in
the same run (fma-peak, from --bin).
"""
import argparse
import os
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))

import bench_vs_ort  # noqa: E402  (machine(), fma_peak())
import onyx  # noqa: E402


def identity_model(folder):
    g = helper.make_graph([helper.make_node("Identity", ["x"], ["y"])], "identity",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 784])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 784])])
    path = os.path.join(folder, "identity.onnx")
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), path)
    return path, {"x": np.random.default_rng(0).normal(size=(1, 784)).astype(np.float32)}


def mlp_model():
    import bench_models

    meta = bench_models.ensure("mlp", 1)
    return meta["path"], {k: np.load(v) for k, v in meta["inputs"].items()}


def time_calls(fn, calls):
    out = np.empty(calls)
    for i in range(calls):
        t0 = time.perf_counter()
        fn()
        out[i] = time.perf_counter() - t0
    return out


def bench(path, feeds, threads, rounds, calls):
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    ref = ort.InferenceSession(path, so, providers=["CPUExecutionProvider"])
    ours = onyx.InferenceSession(path, threads=threads)
    want = ref.run(None, feeds)[0]
    got = ours.run(None, feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    engines = {"onyx": lambda: ours.run(None, feeds), "onnxruntime": lambda: ref.run(None, feeds)}
    for fn in engines.values():  # warm-up
        time_calls(fn, max(10, calls // 10))
    times = {k: [] for k in engines}
    order = list(engines)
    for r in range(rounds):
        for k in (order if r % 2 == 0 else order[::-1]):
            times[k].append(time_calls(engines[k], calls))
    return {k: np.concatenate(v) for k, v in times.items()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "tools"), help="folder of fma-peak")
    ap.add_argument("--models", nargs="+", default=["identity", "mlp"], choices=["identity", "mlp"])
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--calls", type=int, default=3000)
    args = ap.parse_args(argv)

    info = bench_vs_ort.machine()
    peak, isa = bench_vs_ort.fma_peak(args.bin, [args.threads])
    print(f"CPU: {info.get('Model name', '?')} ({isa}), load average {os.getloadavg()[0]:.2f}, "
          f"FMA peak {peak[args.threads]:.1f} GFLOP/s on {args.threads} thread(s)")
    print(f"onyx {onyx.__version__}, onnxruntime {ort.__version__}, numpy {np.__version__}, "
          f"Python {sys.version.split()[0]}; {args.rounds} rounds x {args.calls} calls per engine, alternating")
    print()
    print("| model | Onyx median (p90) | onnxruntime median (p90) | Onyx / onnxruntime |")
    print("|---|---:|---:|---:|")
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models:
            path, feeds = identity_model(tmp) if name == "identity" else mlp_model()
            t = bench(path, feeds, args.threads, args.rounds, args.calls)
            med = {k: np.median(v) * 1e6 for k, v in t.items()}
            p90 = {k: np.percentile(v, 90) * 1e6 for k, v in t.items()}
            print(f"| {name} | {med['onyx']:.1f} µs ({p90['onyx']:.1f}) | {med['onnxruntime']:.1f} µs "
                  f"({p90['onnxruntime']:.1f}) | {med['onyx'] / med['onnxruntime']:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
