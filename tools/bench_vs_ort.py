#!/usr/bin/env python3
"""Benchmarks Onyx (onnx-bench) against onnxruntime on real architectures
and writes a markdown report (its section of docs/performance.md).

    python3 tools/bench_vs_ort.py --bin build/tools --out docs/performance.md
    python3 tools/bench_vs_ort.py --models mlp resnet18 --batch 1 --threads 2 \\
        --rounds 1 --iters 3 --warmup 0            # a smoke run, well under a minute
    python3 tools/bench_vs_ort.py --suite toy      # the small models of models/onnx/make_models.py

Models (--suite real, the default): tools/bench_models.py's ResNet-50,
ResNet-18, MobileNetV2, EfficientNet-B0, DenseNet-121, SqueezeNet 1.1,
ShuffleNetV2, BERT-base (sequence 128), BiLSTM tagger, U-Net and MLP,
exported from PyTorch at opset 17 with random weights into a cache folder
(--cache, default build/bench_models; exported on first use). Batch 1 and 8
(the MLP 64), 1 and 2 threads.

For each model, batch size and thread count, the two engines run in
alternation (ROUNDS rounds; in each, one fresh Onyx process and one fresh
onnxruntime process, the order swapped every round), on the same .npy
inputs, so slow phases of a busy machine hit both. Each process makes a
first run, WARMUP untimed runs (fewer when the first run and they pass
TIME_LIMIT seconds), then timed runs until ITERS runs or TIME_LIMIT seconds
of them (at least MIN_ITERS). Latencies of all rounds are pooled into
median and p90.

Also measured in the same run: the machine's float32 FMA peak on each thread
count (fma-peak, at the start and at the end; the higher is used), and from
it each model's GFLOP/s (tools/bench_models.py's count of multiply-adds in
Conv/ConvTranspose/Gemm/MatMul/LSTM, over the median latency) as a fraction
of the peak. Peak memory is each process's VmHWM (the onnxruntime worker is a
Python process: its figure includes the interpreter, numpy and the
onnxruntime library, listed separately as its RSS before the session).
A configuration that fails in either engine is reported as failed, and the
run goes on.
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
sys.path.insert(0, os.path.join(REPO, "models", "onnx"))
sys.path.insert(0, os.path.join(REPO, "tools"))

# Defaults per suite: the real models are heavy (BERT-base at batch 8 is
# ~180 GFLOP a run), so their processes stop after TIME_LIMIT seconds of
# timed runs; the toy models keep the fixed counts they always had.
DEFAULTS = {
    "real": dict(rounds=3, iters=100, min_iters=3, time_limit=1.0, warmup=1),
    "toy": dict(rounds=5, iters=20, min_iters=20, time_limit=0.0, warmup=3),
}


def current_rss_mb():
    with open("/proc/self/statm") as f:
        pages = int(f.read().split()[1])
    return pages * os.sysconf("SC_PAGE_SIZE") / 2**20


def ort_worker(args):
    """Runs in a child process: times onnxruntime, prints one JSON object."""
    import onnxruntime as ort

    inputs = {}
    for spec in args.input:
        name, path = spec.split("=", 1)
        inputs[name] = np.load(path)
    base_rss = current_rss_mb()
    so = ort.SessionOptions()
    so.intra_op_num_threads = args.threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    t0 = time.perf_counter()
    sess = ort.InferenceSession(args.model, so, providers=["CPUExecutionProvider"])
    load_ms = (time.perf_counter() - t0) * 1e3
    t0 = time.perf_counter()
    sess.run(None, inputs)
    first_ms = (time.perf_counter() - t0) * 1e3
    warm_ms = first_ms  # as onnx-bench: with a time limit, warm-ups stop at it, the first run counting
    for _ in range(args.warmup):
        if args.time_limit > 0 and warm_ms >= args.time_limit * 1e3:
            break
        t0 = time.perf_counter()
        sess.run(None, inputs)
        warm_ms += (time.perf_counter() - t0) * 1e3
    samples = []
    for i in range(args.iters):
        if args.time_limit > 0 and i >= args.min_iters and sum(samples) >= args.time_limit * 1e3:
            break
        t0 = time.perf_counter()
        sess.run(None, inputs)
        samples.append((time.perf_counter() - t0) * 1e3)
    # VmHWM: this address space's peak (ru_maxrss would include the parent's
    # RSS at fork, which Linux carries across exec).
    peak = 0.0
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                peak = int(line.split()[1]) / 1024.0
    print(json.dumps({"load_ms": load_ms, "first_run_ms": first_ms, "samples_ms": samples,
                      "peak_rss_mb": peak, "base_rss_mb": base_rss}))
    return 0


def run_json(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        msg = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[-1]
        raise RuntimeError(f"{os.path.basename(cmd[0])} failed ({r.returncode}): {msg}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def p90(v):
    v = sorted(v)
    return v[max(0, int(np.ceil(0.9 * len(v))) - 1)]


def machine():
    info = {}
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            k, _, v = line.partition(":")
            info[k.strip()] = v.strip()
    except OSError:
        pass
    return info


def cpu_line(bin_dir, threads):
    """The CPU by name, its vector ISA, the load now and its float32 FMA peak
    measured now on 1 and `threads` threads (0: all), for a benchmark's
    set-up: CPUs differ from machine to machine."""
    cpu = machine()
    flags = set(cpu.get("Flags", "").split())
    line = (f"{cpu.get('Model name', '?')} (family {cpu.get('CPU family', '?')}, model {cpu.get('Model', '?')}), "
            f"{cpu.get('CPU(s)', os.cpu_count())} logical CPUs; avx512f: {'yes' if 'avx512f' in flags else 'no'}, "
            f"avx2: {'yes' if 'avx2' in flags else 'no'}; load average (1 min) at the end {os.getloadavg()[0]:.2f}")
    if os.access(os.path.join(bin_dir, "fma-peak"), os.X_OK):
        peak, isa = fma_peak(bin_dir, sorted({1, threads or os.cpu_count()}))
        line += "; float32 FMA peak (`fma-peak`, " + isa + "): " + ", ".join(
            f"{t} thread{'s' if t > 1 else ''} {g:.1f} GFLOP/s" for t, g in sorted(peak.items()))
    return line


def fma_peak(bin_dir, threads):
    """{threads: GFLOP/s} from one fma-peak run, and the ISA it used."""
    exe = os.path.join(bin_dir, "fma-peak")
    cmd = [exe, "--json", "--seconds", "0.2", "--reps", "3"]
    for t in threads:
        cmd += ["--threads", str(t)]
    r = run_json(cmd)
    return {x["threads"]: x["gflops"] for x in r["results"]}, r["isa"]


def describe_build(bin_dir, cache=None):
    cache = cache or os.path.join(os.path.dirname(os.path.abspath(bin_dir)), "CMakeCache.txt")
    vals = {}
    if os.path.exists(cache):
        for line in open(cache):
            key = line.split(":", 1)[0]
            if key.startswith("CMAKE_CXX_FLAGS") or key in ("CMAKE_BUILD_TYPE", "CMAKE_CXX_COMPILER"):
                vals[key] = line.split("=", 1)[1].strip() if "=" in line else ""
    bt = vals.get("CMAKE_BUILD_TYPE", "")
    # the flags the compiler sees: CMAKE_CXX_FLAGS then CMAKE_CXX_FLAGS_<TYPE>
    vals["effective"] = " ".join(x for x in (vals.get("CMAKE_CXX_FLAGS", ""),
                                             vals.get("CMAKE_CXX_FLAGS_" + bt.upper(), "")) if x)
    return vals


def git_rev():
    try:
        rev = subprocess.run(["git", "-C", REPO, "rev-parse", "--short", "HEAD"], capture_output=True,
                             text=True).stdout.strip()
        dirty = subprocess.run(["git", "-C", REPO, "status", "--porcelain", "--untracked-files=no"],
                               capture_output=True, text=True).stdout.strip()
        return rev + (" (with uncommitted changes)" if dirty else "")
    except OSError:
        return "unknown"


def bench_config(args, bench, model_path, specs, threads, onyx_env):
    """Alternating rounds of Onyx and onnxruntime on one model, batch and
    thread count: returns the row (or raises RuntimeError from either)."""
    limits = ["--iters", str(args.iters), "--warmup", str(args.warmup), "--time-limit", str(args.time_limit),
              "--min-iters", str(args.min_iters)]
    onyx_cmd = [bench, model_path, "--threads", str(threads), "--json"] + limits
    ort_cmd = [sys.executable, os.path.abspath(__file__), "--ort-worker", "--model", model_path,
               "--threads", str(threads)] + limits
    for s in specs:
        onyx_cmd += ["--input", s]
        ort_cmd += ["--input", s]
    onyx_runs, ort_runs, none_runs = [], [], []
    for r in range(args.rounds):
        # Swapping the order every round: neither engine always runs just
        # after the other one (caches, clocks, the other processes).
        if r % 2 == 0:
            onyx_runs.append(run_json(onyx_cmd, onyx_env))
            ort_runs.append(run_json(ort_cmd))
        else:
            ort_runs.append(run_json(ort_cmd))
            onyx_runs.append(run_json(onyx_cmd, onyx_env))
        if args.opt_none:
            # The graph as imported (no optimizer passes), in the same round.
            none_runs.append(run_json(onyx_cmd + ["--opt-level", "none"], onyx_env))
    oy = [x for r in onyx_runs for x in r["samples_ms"]]
    ot = [x for r in ort_runs for x in r["samples_ms"]]
    row = {
        "threads": threads,
        "onyx_median": float(np.median(oy)), "onyx_p90": p90(oy), "onyx_n": len(oy),
        "ort_median": float(np.median(ot)), "ort_p90": p90(ot), "ort_n": len(ot),
        "onyx_load": float(np.median([r["load_ms"] + r["session_ms"] for r in onyx_runs])),
        "onyx_first": float(np.median([r["first_run_ms"] for r in onyx_runs])),
        "ort_load": float(np.median([r["load_ms"] for r in ort_runs])),
        "ort_first": float(np.median([r["first_run_ms"] for r in ort_runs])),
        "onyx_rss": max(r["peak_rss_mb"] for r in onyx_runs),
        "onyx_graph": max(r["graph_peak_mb"] for r in onyx_runs),
        "ort_rss": max(r["peak_rss_mb"] for r in ort_runs),
        "ort_base": float(np.median([r["base_rss_mb"] for r in ort_runs])),
    }
    row["ratio"] = row["onyx_median"] / row["ort_median"]
    # Each round's ratio (its two processes ran back to back): the spread
    # shows how much of a difference the machine's own drift could make.
    rr = [float(np.median(a["samples_ms"]) / np.median(b["samples_ms"])) for a, b in zip(onyx_runs, ort_runs)]
    row["round_ratio_min"], row["round_ratio_max"] = min(rr), max(rr)
    if none_runs:
        on = [x for r in none_runs for x in r["samples_ms"]]
        row["none_median"] = float(np.median(on))
        row["none_ratio"] = row["none_median"] / row["ort_median"]
    return row


def configurations(args, work):
    """(model, batch, model path, [NAME=FILE input specs], meta) to run, in order."""
    if args.suite == "toy":
        import make_models

        names = args.models or list(make_models.BUILDERS)
        paths = make_models.write_all(work, names)
        for name in names:
            for batch in args.batch or [1, 8]:
                specs = []
                for k, v in make_models.make_inputs(name, batch, seed=batch).items():
                    p = os.path.join(work, f"{name}_b{batch}_{k}.npy")
                    np.save(p, v)
                    specs.append(f"{k}={p}")
                yield name, batch, paths[name], specs, {}
        return
    import bench_models

    names = args.models or bench_models.MODELS
    for name in names:
        if name not in bench_models.MODELS:
            sys.exit(f"bench_vs_ort: unknown model '{name}' (models: {', '.join(bench_models.MODELS)})")
    for name in names:
        for batch in args.batch or bench_models.default_batches(name):
            meta = bench_models.ensure(name, batch, args.cache)
            yield name, batch, meta["path"], [f"{k}={v}" for k, v in meta["inputs"].items()], meta


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "tools"), help="folder with onnx-bench and fma-peak")
    ap.add_argument("--out", help="markdown file to write (default: print)")
    ap.add_argument("--suite", choices=["real", "toy"], default="real",
                    help="real: tools/bench_models.py's architectures (section bench_vs_ort); "
                         "toy: models/onnx/make_models.py's small models (section bench_vs_ort_toy)")
    ap.add_argument("--models", nargs="*", help="model names (default: all of the suite)")
    ap.add_argument("--batch", type=int, nargs="*", help="batch sizes (default: each model's, 1 and 8, the MLP 64)")
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--rounds", type=int, help="alternating rounds per configuration (real 3, toy 5)")
    ap.add_argument("--iters", type=int, help="timed runs per process, at most (real 100, toy 20)")
    ap.add_argument("--min-iters", type=int, help="timed runs per process, at least (real 3)")
    ap.add_argument("--time-limit", type=float,
                    help="seconds of timed runs after which a process stops (real 1, toy 0: none)")
    ap.add_argument("--warmup", type=int, help="untimed runs per process after the first (real 1, toy 3)")
    ap.add_argument("--cache", default=os.path.join(REPO, "build", "bench_models"),
                    help="folder of the exported real models (tools/bench_models.py)")
    ap.add_argument("--cmake-cache", help="CMakeCache.txt of the Onyx build (default: BIN/../CMakeCache.txt)")
    ap.add_argument("--opt-none", action="store_true",
                    help="also run Onyx at optimization level none (onnx-bench --opt-level none) in every round, "
                         "for the columns 'level none'")
    ap.add_argument("--onyx-env", action="append", default=[], metavar="KEY=VALUE",
                    help="environment variable for the onnx-bench processes (repeatable; listed in the report)")
    # worker mode (internal)
    ap.add_argument("--ort-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--input", action="append", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    for k, v in DEFAULTS[args.suite].items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.ort_worker:
        args.threads = args.threads[0]
        return ort_worker(args)
    if args.min_iters > args.iters:
        args.min_iters = args.iters

    import onnx
    import onnxruntime

    bench = os.path.join(args.bin, "onnx-bench")
    if not os.access(bench, os.X_OK):
        sys.exit(f"{bench} not found (build the onnx-bench target)")
    real = args.suite == "real"
    if real and not os.access(os.path.join(args.bin, "fma-peak"), os.X_OK):
        sys.exit(f"{os.path.join(args.bin, 'fma-peak')} not found (build the fma-peak target)")
    work = tempfile.mkdtemp(prefix="onyx-bench-")
    onyx_env = dict(os.environ)
    for kv in args.onyx_env:
        k, _, v = kv.partition("=")
        onyx_env[k] = v
    load_before = os.getloadavg()
    started = datetime.datetime.now()
    t_start = time.time()
    peaks = []
    if real:
        peaks.append(fma_peak(args.bin, sorted(set(args.threads))))
        print(f"fma-peak ({peaks[0][1]}): " + ", ".join(f"{t} threads {g:.1f} GFLOP/s" for t, g in peaks[0][0].items()),
              file=sys.stderr)

    rows, models = [], {}
    for name, batch, path, specs, meta in configurations(args, work):
        models.setdefault(name, meta)
        for threads in args.threads:
            try:
                row = bench_config(args, bench, path, specs, threads, onyx_env)
            except RuntimeError as e:
                row = {"threads": threads, "error": str(e)}
            row.update(model=name, batch=batch, flops=meta.get("flops", 0))
            rows.append(row)
            took = time.time() - t_start
            if "error" in row:
                print(f"[{took:6.0f} s] {name} batch {batch} threads {threads}: FAILED: {row['error']}", file=sys.stderr)
            else:
                print(f"[{took:6.0f} s] {name} batch {batch} threads {threads}: onyx {row['onyx_median']:.3f} ms, "
                      f"ort {row['ort_median']:.3f} ms, ratio {row['ratio']:.2f} "
                      f"(rounds {row['round_ratio_min']:.2f}-{row['round_ratio_max']:.2f})", file=sys.stderr)
    if real:
        peaks.append(fma_peak(args.bin, sorted(set(args.threads))))
    load_after = os.getloadavg()
    peak = {t: max([p[0].get(t, 0.0) for p in peaks] or [0.0]) for t in args.threads}
    for r in rows:
        if "error" not in r and r["flops"]:
            for eng in ("onyx", "ort"):
                r[f"{eng}_gflops"] = r["flops"] / r[f"{eng}_median"] / 1e6
                r[f"{eng}_frac"] = r[f"{eng}_gflops"] / peak[r["threads"]] if peak.get(r["threads"]) else 0.0

    cpu = machine()
    flags = set(cpu.get("Flags", "").split())
    build = describe_build(args.bin, args.cmake_cache)
    cmd = "python3 " + shlex.join([os.path.relpath(os.path.abspath(__file__), REPO)] + (argv or sys.argv[1:]))
    L = []
    L.append("## Onyx and onnxruntime on CPU" + ("" if real else " (small models)") + "\n")
    L.append("Generated by `tools/bench_vs_ort.py`; every number in this section was measured by that script "
             "in one run. Re-run it to refresh the section.\n")
    L.append("### Set-up\n")
    L.append(f"- Command: `{cmd}`")
    L.append(f"- Date: {started:%Y-%m-%d %H:%M}; the run took {(time.time() - t_start) / 60:.1f} minutes")
    L.append(f"- CPU: {cpu.get('Model name', platform.processor() or 'unknown')} "
             f"(family {cpu.get('CPU family', '?')}, model {cpu.get('Model', '?')}), "
             f"{cpu.get('CPU(s)', os.cpu_count())} logical CPUs "
             f"({cpu.get('Core(s) per socket', '?')} cores per socket, {cpu.get('Thread(s) per core', '?')} "
             f"threads per core, {cpu.get('Socket(s)', '?')} socket(s)); "
             f"avx512f: {'yes' if 'avx512f' in flags else 'no'}, avx2: {'yes' if 'avx2' in flags else 'no'}, "
             f"fma: {'yes' if 'fma' in flags else 'no'}")
    if real:
        L.append("- float32 FMA peak (`fma-peak`, " + peaks[0][1] + ", independent FMA chains; at the start / "
                 "at the end of the run; the higher is the peak below): " +
                 "; ".join(f"{t} thread{'s' if t > 1 else ''}: {peaks[0][0].get(t, 0):.1f} / "
                           f"{peaks[-1][0].get(t, 0):.1f} GFLOP/s" for t in args.threads))
    L.append(f"- System load average (1 min) before / after the run: {load_before[0]:.2f} / {load_after[0]:.2f}")
    L.append(f"- Onyx: commit {git_rev()}, CMAKE_BUILD_TYPE={build.get('CMAKE_BUILD_TYPE', '?')}, "
             f"compiler flags \"{build.get('effective', '?')}\" (CMAKE_CXX_FLAGS then CMAKE_CXX_FLAGS_<type>)")
    blas_env = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS") if k in os.environ}
    L.append(f"- Environment of the Onyx processes: {', '.join(args.onyx_env + [f'{k}={v}' for k, v in blas_env.items()]) or 'nothing set (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS unset)'}")
    L.append(f"- onnxruntime {onnxruntime.__version__} (CPUExecutionProvider, default graph optimizations, "
             f"ORT_SEQUENTIAL, intra_op_num_threads = threads, inter_op_num_threads = 1); "
             f"onnx {onnx.__version__}; Python {platform.python_version()}")
    limit = (f"then timed runs until {args.iters} or {args.time_limit:g} s of them (at least {args.min_iters})"
             if args.time_limit > 0 else f"then {args.iters} timed runs")
    L.append(f"- Per configuration: {args.rounds} alternating rounds (an Onyx process and an onnxruntime process, "
             f"the order swapped every round), each process a first run, {args.warmup} warm-up runs"
             f"{f' (fewer once they and the first run pass {args.time_limit:g} s)' if args.time_limit > 0 else ''}, {limit}, "
             f"on the same inputs; median and p90 over the timed runs of all rounds (their count is in the table). "
             f"Round ratios: the lowest and highest of the rounds' own ratios (each round's Onyx median over its "
             f"onnxruntime median): how far the machine's drift between rounds moves a ratio.")
    if real:
        import bench_models
        import torch

        L.append(f"- Models: `tools/bench_models.py` (PyTorch {torch.__version__.split('+')[0]}, `torch.onnx.export` "
                 f"opset {bench_models.OPSET}, TorchScript exporter, random weights from a fixed seed, BatchNorm "
                 "statistics from random batches, folded into the convolutions; static shapes, one file per batch):")
        for name in models:
            L.append(f"  - {name}: {bench_models.DESCRIPTION[name]}; "
                     f"{models[name]['flops'] / models[name]['batch'] / 1e9:.3g} GFLOP per sample")
        L.append("- GFLOP/s: 2 FLOP per multiply-add of Conv, ConvTranspose, Gemm, MatMul and the LSTM's gate GEMMs "
                 "(counted from the ONNX graph by `tools/bench_models.py`; element-wise ops, normalisation, "
                 "softmax, pooling and resizing not counted) over the median latency; % peak: of the FMA peak "
                 "measured above on the same thread count.\n")
    else:
        L.append("- Models: `models/onnx/make_models.py` (float32, opset 17): resnet (3 residual blocks, 32x32 input), "
                 "mobilenet (depthwise-separable, 32x32 input), bert (2-layer encoder, hidden 64, 4 heads, "
                 "16 tokens), mlp (64-128-128-10).\n")

    ok = [r for r in rows if "error" not in r]
    L.append("### Latency\n")
    L.append("Ratio = Onyx median / onnxruntime median (below 1: Onyx faster). Runs: timed runs pooled, Onyx / ORT. "
             "Onyx runs at its default optimization level (all)" +
             (("; the 'level none' columns are Onyx with no optimizer pass (`--opt-level none`), run in the same "
               "rounds.\n") if args.opt_none else ".\n"))
    extra = " level none ms | level none ratio |" if args.opt_none else ""
    L.append("| model | batch | threads | Onyx median ms | Onyx p90 ms | ORT median ms | ORT p90 ms | ratio | "
             "round ratios | runs |" + extra)
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|---:|" if args.opt_none else ""))
    for r in rows:
        if "error" in r:
            L.append(f"| {r['model']} | {r['batch']} | {r['threads']} | failed: {r['error'].replace('|', '/')} "
                     "| | | | | | |" + (" | |" if args.opt_none else ""))
        else:
            cols = f" {r['none_median']:.3f} | {r['none_ratio']:.2f} |" if args.opt_none else ""
            L.append(f"| {r['model']} | {r['batch']} | {r['threads']} | {r['onyx_median']:.3f} | {r['onyx_p90']:.3f} | "
                     f"{r['ort_median']:.3f} | {r['ort_p90']:.3f} | {r['ratio']:.2f} | "
                     f"{r['round_ratio_min']:.2f}-{r['round_ratio_max']:.2f} | {r['onyx_n']} / {r['ort_n']} |"
                     + cols)
    if real:
        L.append("\n### Throughput against the machine's peak\n")
        L.append("| model | batch | threads | GFLOP per run | Onyx GFLOP/s | Onyx % peak | ORT GFLOP/s | ORT % peak |")
        L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
        for r in ok:
            L.append(f"| {r['model']} | {r['batch']} | {r['threads']} | {r['flops'] / 1e9:.3f} | "
                     f"{r['onyx_gflops']:.1f} | {100 * r['onyx_frac']:.1f} | {r['ort_gflops']:.1f} | "
                     f"{100 * r['ort_frac']:.1f} |")
        L.append("\n### Against the goal\n")
        L.append("The goal of issues 16 and 17: Onyx at or below 0.9x onnxruntime's median at 2 threads, at most 1.2x at 1 "
                 "thread, peak RSS at or below onnxruntime's (whose worker's RSS includes the Python interpreter: "
                 "see the next table).\n")
        L.append("| model | batch | ratio, 1 thread | ratio, 2 threads | peak RSS Onyx / ORT MiB | goal met |")
        L.append("|---|---:|---:|---:|---:|---|")
        for key in dict.fromkeys((r["model"], r["batch"]) for r in rows):
            rs = {r["threads"]: r for r in rows if (r["model"], r["batch"]) == key}
            if any("error" in r for r in rs.values()):
                L.append(f"| {key[0]} | {key[1]} | | | | failed |")
                continue
            r1, r2 = rs.get(1), rs.get(2)
            rss_o, rss_t = max(r["onyx_rss"] for r in rs.values()), max(r["ort_rss"] for r in rs.values())
            met = (r1 is None or r1["ratio"] <= 1.2) and (r2 is None or r2["ratio"] <= 0.9) and rss_o <= rss_t
            ratio1 = f"{r1['ratio']:.2f}" if r1 else "-"
            ratio2 = f"{r2['ratio']:.2f}" if r2 else "-"
            L.append(f"| {key[0]} | {key[1]} | {ratio1} | {ratio2} | {rss_o:.0f} / {rss_t:.0f} | "
                     f"{'yes' if met else 'no'} |")
    L.append("\n### Session creation and memory\n")
    L.append("Session: Onyx `Model::load` + `Session` construction; onnxruntime `InferenceSession(...)` "
             "(which includes its graph optimizations). First run: the first `run` after it "
             "(Onyx builds its graph for the input shapes then). Peak RSS: the process's resident high-water mark "
             "(`VmHWM` of /proc/self/status; `ru_maxrss` is not used because Linux carries the parent's RSS at "
             "fork into it). Onyx graph peak: the workspace peak of the last run's graph "
             "(`memoryStats().peakBytes`). The onnxruntime worker is a Python process; ORT RSS before session is "
             "its resident memory after importing numpy and onnxruntime and loading the inputs, before creating "
             "the session.\n")
    L.append("| model | batch | threads | Onyx session ms | Onyx first run ms | ORT session ms | ORT first run ms | "
             "Onyx peak RSS MiB | Onyx graph peak MiB | ORT peak RSS MiB | ORT RSS before session MiB |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in ok:
        L.append(f"| {r['model']} | {r['batch']} | {r['threads']} | {r['onyx_load']:.1f} | {r['onyx_first']:.1f} | "
                 f"{r['ort_load']:.1f} | {r['ort_first']:.1f} | {r['onyx_rss']:.1f} | {r['onyx_graph']:.3f} | "
                 f"{r['ort_rss']:.1f} | {r['ort_base']:.1f} |")
    L.append("")
    text = "\n".join(L)
    from perfdoc import emit
    emit(args.out, "bench_vs_ort" if real else "bench_vs_ort_toy", text)
    return 1 if any("error" in r for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
