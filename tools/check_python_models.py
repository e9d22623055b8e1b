#!/usr/bin/env python3
"""Every real architecture of the benchmarks (tools/bench_models.py:
torchvision's CNNs, BERT-base, the BiLSTM tagger, the U-Net, the MLP)
through onyx.InferenceSession and onnxruntime on the same inputs: prints the
largest difference of each output against its scale, and fails when one is
above the tolerance. Needs torch and torchvision to export the models once
(into build/bench_models, as the benchmark does).

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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", nargs="+", default=bench_models.MODELS)
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rtol", type=float, default=1e-4, help="largest |onyx - ort| / max|ort| accepted")
    args = ap.parse_args(argv)
    bad = 0
    print("| model | output | shape | max abs diff | max abs diff / max abs |")
    print("|---|---|---|---:|---:|")
    for name in args.models:
        meta = bench_models.ensure(name, args.batch)
        feeds = {k: np.load(v) for k, v in meta["inputs"].items()}
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        ref = ort.InferenceSession(meta["path"], so, providers=["CPUExecutionProvider"])
        sess = onyx.InferenceSession(meta["path"], threads=args.threads)
        names = [o.name for o in ref.get_outputs()]
        assert names == [o.name for o in sess.get_outputs()], name
        for out, want, got in zip(names, ref.run(None, feeds), sess.run(None, feeds)):
            assert got.shape == want.shape and got.dtype == want.dtype, (name, out, got.shape, want.shape)
            diff = float(np.max(np.abs(got.astype(np.float64) - want)))
            rel = diff / max(float(np.max(np.abs(want))), 1e-30)
            flag = "" if rel <= args.rtol else " **over**"
            bad += rel > args.rtol
            print(f"| {name} | {out} | {'x'.join(map(str, got.shape))} | {diff:.3g} | {rel:.3g}{flag} |")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
