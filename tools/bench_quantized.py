#!/usr/bin/env python3
"""Benchmarks quantized models in Onyx against onnxruntime, and against the
same model in float32 in Onyx (docs/performance.md, docs/quantization.md).

    python3 tools/bench_quantized.py --bin build/tools --out /tmp/quantized.md
    python3 tools/bench_quantized.py --models resnet50 --threads 2 --rounds 1   # a quicker run

Models: tools/bench_models.py's float models (random weights, batch-norm
statistics calibrated; batch 1), quantized here with onnxruntime.quantization
(cached beside them):
  static   quantize_static, QDQ format, calibrated on 4 random inputs:
           s8     onnxruntime's defaults (int8 activations and weights, per tensor)
           u8rr   uint8 activations, int8 weights per channel with reduce_range
                  (7-bit weights, which every x86 CPU's int8 kernels sum exactly)
  dynamic  quantize_dynamic (BERT-base): s8 (defaults) and rr (reduce_range).

Each configuration runs as tools/bench_vs_ort.py runs one: alternating
rounds of a fresh onnx-bench process and a fresh onnxruntime process on the
same inputs, latencies pooled; the float model's Onyx latency is measured in
the same rounds. Reported: the quantized model's Onyx / onnxruntime ratio,
and its Onyx latency over the float model's.
"""
import argparse
import datetime
import os
import sys
import types

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "tools"))

import bench_models  # noqa: E402
import bench_vs_ort  # noqa: E402
import perfdoc  # noqa: E402

STATIC = {"s8": dict(per_channel=False, reduce_range=False, act="QInt8"),
          "u8rr": dict(per_channel=True, reduce_range=True, act="QUInt8")}
DYNAMIC = {"s8": dict(reduce_range=False), "rr": dict(reduce_range=True)}


def quantized(meta, kind, variant, cache):
    """The cached quantized copy of a bench model."""
    from onnxruntime.quantization import (CalibrationDataReader, QuantFormat, QuantType, quantize_dynamic,
                                          quantize_static)
    from onnxruntime.quantization.shape_inference import quant_pre_process

    src = meta["path"]
    out = os.path.join(cache, f"{os.path.basename(src)[:-5]}_{kind}_{variant}.onnx")
    if os.path.exists(out):
        return out
    if kind == "dynamic":
        quantize_dynamic(src, out + ".tmp", weight_type=QuantType.QInt8, **DYNAMIC[variant])
    else:
        pre = os.path.join(cache, os.path.basename(src)[:-5] + "_pre.onnx")
        if not os.path.exists(pre):
            quant_pre_process(src, pre)
        name, path = next(iter(meta["inputs"].items()))
        shape = np.load(path).shape

        class Reader(CalibrationDataReader):
            def __init__(self):
                self.data = [{name: np.random.default_rng(s).standard_normal(shape).astype(np.float32)}
                             for s in range(4)]

            def get_next(self):
                return self.data.pop() if self.data else None

        v = STATIC[variant]
        quantize_static(pre, out + ".tmp", Reader(), quant_format=QuantFormat.QDQ,
                        activation_type=getattr(QuantType, v["act"]), weight_type=QuantType.QInt8,
                        per_channel=v["per_channel"], reduce_range=v["reduce_range"])
    os.replace(out + ".tmp", out)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "tools"))
    ap.add_argument("--out", help="the markdown page whose section bench_quantized to write (docs/performance.md; "
                                  "default: print)")
    ap.add_argument("--models", nargs="*", default=["resnet50", "mobilenet_v2", "bert_base"],
                    choices=sorted(bench_models.MODELS), metavar="MODEL",
                    help="models of tools/bench_models.py (default: resnet50 mobilenet_v2 bert_base)")
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--iters", type=int, default=100)
    ap.add_argument("--min-iters", type=int, default=3)
    ap.add_argument("--time-limit", type=float, default=1.0)
    ap.add_argument("--warmup", type=int, default=1)
    ap.add_argument("--cache", default=os.path.join(REPO, "build", "bench_models"))
    args = ap.parse_args(argv)
    args.opt_none = False
    bench = os.path.join(args.bin, "onnx-bench")
    peak = bench_vs_ort.fma_peak(args.bin, sorted(set(args.threads)))
    rows = []
    for name in args.models:
        meta = bench_models.ensure(name, 1, args.cache)
        specs = [f"{k}={v}" for k, v in meta["inputs"].items()]
        kinds = [("dynamic", v) for v in DYNAMIC] if name == "bert_base" else [("static", v) for v in STATIC]
        for kind, variant in kinds:
            qpath = quantized(meta, kind, variant, args.cache)
            for t in args.threads:
                try:
                    q = bench_vs_ort.bench_config(args, bench, qpath, specs, t, dict(os.environ))
                    f = bench_vs_ort.bench_config(args, bench, meta["path"], specs, t, dict(os.environ))
                except RuntimeError as e:
                    rows.append((name, kind, variant, t, None, str(e)))
                    print(f"{name} {kind} {variant} {t} threads: FAILED {e}", file=sys.stderr)
                    continue
                rows.append((name, kind, variant, t, (q, f), ""))
                print(f"{name} {kind} {variant} {t} threads: onyx {q['onyx_median']:.2f} ms, ort "
                      f"{q['ort_median']:.2f} ms (ratio {q['ratio']:.2f}); onyx float {f['onyx_median']:.2f} ms",
                      file=sys.stderr)
    info = bench_vs_ort.machine()
    cpu = f"{info.get('Model name', 'an unknown CPU')} ({os.cpu_count()} CPUs)"
    lines = [f"Measured {datetime.date.today()} with `python3 tools/bench_quantized.py "
             f"{' '.join(argv if argv is not None else sys.argv[1:])}` on {cpu}; fma-peak ({peak[1]}) "
             + ", ".join(f"{t} threads {g:.0f} GFLOP/s" for t, g in peak[0].items()) + ".",
             "",
             "| model | quantization | threads | Onyx ms | onnxruntime ms | Onyx / onnxruntime | Onyx float32 ms "
             "| quantized / float32 (Onyx) |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for name, kind, variant, t, r, err in rows:
        if r is None:
            lines.append(f"| {name} | {kind} {variant} | {t} | failed: {err} | | | | |")
            continue
        q, f = r
        lines.append(f"| {name} | {kind} {variant} | {t} | {q['onyx_median']:.2f} | {q['ort_median']:.2f} | "
                     f"{q['ratio']:.2f} | {f['onyx_median']:.2f} | {q['onyx_median'] / f['onyx_median']:.2f} |")
    head = ["## Quantized models against onnxruntime (CPU)", "",
            "Written by `tools/bench_quantized.py` (docs/quantization.md says how each form runs): "
            "onnxruntime.quantization's static QDQ form of ResNet-50 and MobileNetV2 and its dynamic form of "
            "BERT-base (sequence 128), batch 1; the two engines alternate, fresh processes, same inputs; the "
            "float32 model's Onyx latency from the same run.", ""]
    perfdoc.emit(args.out, "bench_quantized", "\n".join(head + lines) + "\n")


if __name__ == "__main__":
    main()
