#!/usr/bin/env python3
"""Every real architecture of the benchmarks (tools/bench_models.py:
torchvision's CNNs, BERT-base, the BiLSTM tagger, the U-Net, the MLP)
through onyx.InferenceSession and onnxruntime on the same inputs, and
against PyTorch's own output of the model: prints the largest difference of
each output against its scale, and fails when one is above the tolerance.
Needs torch and torchvision to export the models once (into
build/bench_models, as the benchmark does). The test suite runs the same
comparison (tests/python/architectures).

    PYTHONPATH=build/python python3 tools/check_python_models.py
    PYTHONPATH=build/python python3 tools/check_python_models.py --models resnet50 bert_base --batch 2
"""
import argparse
import os
import sys

import numpy as np
import onnxruntime as ort

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))

import bench_models  # noqa: E402
import onyx  # noqa: E402

# Largest |onyx - reference| / max|reference| accepted, against onnxruntime
# (the same float32 graph) and against PyTorch (the module before its export;
# seen: at most 2.1e-5, ResNet-50's 53 layers of float32 sums).
RTOL = 1e-4


def _rel(got, want):
    diff = float(np.max(np.abs(got.astype(np.float64) - want)))
    return diff, diff / max(float(np.max(np.abs(want))), 1e-30)


def compare(name, batch=1, threads=2, cache=bench_models.DEFAULT_CACHE):
    """Runs model `name` through onyx.InferenceSession and onnxruntime.
    Returns rows (output, shape, reference, max abs diff, diff / scale):
    one per output against onnxruntime, and the first output against
    PyTorch's. Raises AssertionError when names, shapes or dtypes differ."""
    meta = bench_models.ensure(name, batch, cache=cache)
    feeds = {k: np.load(v) for k, v in meta["inputs"].items()}
    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    ref = ort.InferenceSession(meta["path"], so, providers=["CPUExecutionProvider"])
    sess = onyx.InferenceSession(meta["path"], threads=threads)
    names = [o.name for o in ref.get_outputs()]
    assert names == [o.name for o in sess.get_outputs()], (name, names)
    got_all = sess.run(None, feeds)
    rows = []
    for out, want, got in zip(names, ref.run(None, feeds), got_all):
        assert got.shape == want.shape and got.dtype == want.dtype, (name, out, got.shape, want.shape)
        rows.append((out, got.shape, "onnxruntime") + _rel(got, want))
    torch_y = np.load(meta["torch_output"])
    assert got_all[0].shape == torch_y.shape, (name, got_all[0].shape, torch_y.shape)
    rows.append((names[0], torch_y.shape, "pytorch") + _rel(got_all[0], torch_y))
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=bench_models.MODELS)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args(argv)
    bad = 0
    print("| model | output | shape | against | max abs diff | max abs diff / max abs |")
    print("|---|---|---|---|---:|---:|")
    for name in args.models:
        for out, shape, against, diff, rel in compare(name, args.batch, args.threads):
            over = rel > RTOL
            bad += over
            print(f"| {name} | {out} | {'x'.join(map(str, shape))} | {against} | {diff:.3g} | {rel:.3g}"
                  f"{' **over**' if over else ''} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
