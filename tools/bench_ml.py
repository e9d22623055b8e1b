#!/usr/bin/env python3
"""Classic-ML models (ai.onnx.ml) through onyx.InferenceSession and
onnxruntime, side by side in one process, alternating: a 300-tree random
forest (depth 10, 50 features, skl2onnx) and a 500-tree LightGBM classifier
(onnxmltools), on a 10,000-row batch and on single rows.

    PYTHONPATH=build/python python3 tools/bench_ml.py --bin build/tools
    PYTHONPATH=build/python python3 tools/bench_ml.py --rounds 2 --threads 2

Each round times one engine then the other (the order swapped every round);
times are pooled into a median. The report names the CPU, the load and the
machine's FMA peak (fma-peak from --bin, same run).
"""
import argparse
import os
import sys
import warnings

import numpy as np
import onnxruntime as ort

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))

import bench_vs_ort  # noqa: E402
import onyx  # noqa: E402
from bench_python import time_calls  # noqa: E402


def models():
    import lightgbm
    import onnxmltools
    from onnxmltools.convert.common.data_types import FloatTensorType
    from sklearn.datasets import make_classification
    from sklearn.ensemble import RandomForestClassifier
    from skl2onnx import to_onnx

    x, y = make_classification(4000, 50, n_informative=20, n_classes=3, random_state=0)
    x = x.astype(np.float32)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        rf = RandomForestClassifier(300, max_depth=10, random_state=0, n_jobs=2).fit(x, y)
        rf_onnx = to_onnx(rf, x[:1], target_opset={"": 17, "ai.onnx.ml": 3}, options={id(rf): {"zipmap": False}})
        lg = lightgbm.LGBMClassifier(n_estimators=500, verbose=-1).fit(x, y)
        lg_onnx = onnxmltools.convert_lightgbm(lg, initial_types=[("input", FloatTensorType([None, 50]))],
                                               target_opset=15, zipmap=False)
    return {"random_forest_300": rf_onnx.SerializeToString(), "lightgbm_500": lg_onnx.SerializeToString()}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "tools"))
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args(argv)
    info = bench_vs_ort.machine()
    peak, isa = bench_vs_ort.fma_peak(args.bin, [args.threads])
    print(f"CPU: {info.get('Model name', '?')} ({isa}), load average {os.getloadavg()[0]:.2f}, "
          f"FMA peak {peak[args.threads]:.1f} GFLOP/s on {args.threads} threads; onnxruntime {ort.__version__}")
    print()
    print("| model | rows | Onyx median ms | onnxruntime median ms | Onyx / onnxruntime |")
    print("|---|---:|---:|---:|---:|")
    rng = np.random.default_rng(1)
    for name, data in models().items():
        so = ort.SessionOptions()
        so.intra_op_num_threads = args.threads
        ref = ort.InferenceSession(data, so, providers=["CPUExecutionProvider"])
        ours = onyx.InferenceSession(data, threads=args.threads)
        feed_name = ref.get_inputs()[0].name
        for rows, reps in ((10000, 3), (1, 400)):
            x = rng.normal(size=(rows, 50)).astype(np.float32)
            feeds = {feed_name: x}
            a, b = ours.run(None, feeds), ref.run(None, feeds)
            assert np.array_equal(a[0], b[0]), name
            np.testing.assert_allclose(a[1], b[1], rtol=1e-4, atol=1e-5)
            t = {"onyx": [], "ort": []}
            for r in range(args.rounds):
                order = [("onyx", ours), ("ort", ref)]
                for k, s in (order if r % 2 == 0 else order[::-1]):
                    t[k] += list(time_calls(lambda: s.run(None, feeds), reps))
            mo, mr = np.median(t["onyx"]) * 1e3, np.median(t["ort"]) * 1e3
            print(f"| {name} | {rows} | {mo:.3f} | {mr:.3f} | {mo / mr:.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
