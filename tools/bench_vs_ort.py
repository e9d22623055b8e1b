#!/usr/bin/env python3
"""Benchmarks Onyx (onnx-bench) against onnxruntime on the models of
models/onnx/make_models.py and writes a markdown report.

    python3 tools/bench_vs_ort.py --bin build/tools --out docs/performance.md

For each model, batch size and thread count, the two engines run in
alternation (ROUNDS rounds of Onyx then onnxruntime), each round a fresh
process on the same .npy inputs, so slow phases of a busy machine hit both.
Latencies of all rounds are pooled into median and p90. Peak memory is each
process's VmHWM (the onnxruntime worker is a Python process: its figure
includes the interpreter, numpy and the onnxruntime library).
"""
import argparse
import datetime
import json
import os
import platform
import resource
import shlex
import subprocess
import sys
import tempfile
import time

import numpy as np

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(REPO, "models", "onnx"))


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
    for _ in range(args.warmup):
        sess.run(None, inputs)
    samples = []
    for _ in range(args.iters):
        t0 = time.perf_counter()
        sess.run(None, inputs)
        samples.append((time.perf_counter() - t0) * 1e3)
    # VmHWM: this address space's peak (ru_maxrss would include the parent's
    # RSS at fork, which Linux carries across exec).
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024.0  # KiB on Linux
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
        raise RuntimeError(f"{shlex.join(cmd)} failed ({r.returncode}): {r.stderr.strip()}")
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


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", default=os.path.join(REPO, "build", "tools"), help="folder with onnx-bench")
    ap.add_argument("--out", help="markdown file to write (default: print)")
    ap.add_argument("--models", nargs="*", help="model names (default: all)")
    ap.add_argument("--batch", type=int, nargs="*", default=[1, 8])
    ap.add_argument("--threads", type=int, nargs="*", default=[1, 2])
    ap.add_argument("--rounds", type=int, default=5, help="alternating rounds per configuration")
    ap.add_argument("--iters", type=int, default=20, help="timed runs per round")
    ap.add_argument("--warmup", type=int, default=3, help="untimed runs per round")
    ap.add_argument("--cmake-cache", help="CMakeCache.txt of the Onyx build (default: BIN/../CMakeCache.txt)")
    ap.add_argument("--onyx-env", action="append", default=[], metavar="KEY=VALUE",
                    help="environment variable for the onnx-bench processes (repeatable; listed in the report)")
    # worker mode (internal)
    ap.add_argument("--ort-worker", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--model", help=argparse.SUPPRESS)
    ap.add_argument("--input", action="append", default=[], help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.ort_worker:
        args.threads = args.threads[0]
        return ort_worker(args)

    import onnx
    import onnxruntime
    import make_models

    bench = os.path.join(args.bin, "onnx-bench")
    if not os.access(bench, os.X_OK):
        sys.exit(f"{bench} not found (build the onnx-bench target)")
    names = args.models or list(make_models.BUILDERS)
    work = tempfile.mkdtemp(prefix="onyx-bench-")
    paths = make_models.write_all(work, names)
    onyx_env = dict(os.environ)
    for kv in args.onyx_env:
        k, _, v = kv.partition("=")
        onyx_env[k] = v
    load_before = os.getloadavg()
    started = datetime.datetime.now()

    rows = []
    for name in names:
        for batch in args.batch:
            inputs = make_models.make_inputs(name, batch, seed=batch)
            specs = []
            for k, v in inputs.items():
                p = os.path.join(work, f"{name}_b{batch}_{k}.npy")
                np.save(p, v)
                specs.append(f"{k}={p}")
            for threads in args.threads:
                onyx_cmd = [bench, paths[name], "--threads", str(threads), "--iters", str(args.iters),
                            "--warmup", str(args.warmup), "--json"]
                ort_cmd = [sys.executable, os.path.abspath(__file__), "--ort-worker", "--model", paths[name],
                           "--threads", str(threads), "--iters", str(args.iters), "--warmup", str(args.warmup)]
                for s in specs:
                    onyx_cmd += ["--input", s]
                    ort_cmd += ["--input", s]
                onyx_runs, ort_runs = [], []
                for _ in range(args.rounds):
                    onyx_runs.append(run_json(onyx_cmd, onyx_env))
                    ort_runs.append(run_json(ort_cmd))
                oy = [x for r in onyx_runs for x in r["samples_ms"]]
                ot = [x for r in ort_runs for x in r["samples_ms"]]
                row = {
                    "model": name, "batch": batch, "threads": threads,
                    "onyx_median": float(np.median(oy)), "onyx_p90": p90(oy),
                    "ort_median": float(np.median(ot)), "ort_p90": p90(ot),
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
                rows.append(row)
                print(f"{name} batch {batch} threads {threads}: onyx {row['onyx_median']:.3f} ms, "
                      f"ort {row['ort_median']:.3f} ms, ratio {row['ratio']:.2f}", file=sys.stderr)
    load_after = os.getloadavg()

    cpu = machine()
    build = describe_build(args.bin, args.cmake_cache)
    cmd = "python3 " + shlex.join([os.path.relpath(os.path.abspath(__file__), REPO)] + (argv or sys.argv[1:]))
    L = []
    L.append("## Onyx and onnxruntime on CPU\n")
    L.append("Generated by `tools/bench_vs_ort.py`; every number in this section was measured by that script "
             "in one run. Re-run it to refresh the section.\n")
    L.append("### Set-up\n")
    L.append(f"- Command: `{cmd}`")
    L.append(f"- Date: {started:%Y-%m-%d %H:%M}")
    L.append(f"- CPU: {cpu.get('Model name', platform.processor() or 'unknown')}, "
             f"{cpu.get('CPU(s)', os.cpu_count())} logical CPUs "
             f"({cpu.get('Core(s) per socket', '?')} cores per socket, {cpu.get('Thread(s) per core', '?')} "
             f"threads per core, {cpu.get('Socket(s)', '?')} socket(s))")
    L.append(f"- System load average (1 min) before / after the run: {load_before[0]:.2f} / {load_after[0]:.2f}")
    L.append(f"- Onyx: commit {git_rev()}, CMAKE_BUILD_TYPE={build.get('CMAKE_BUILD_TYPE', '?')}, "
             f"compiler flags \"{build.get('effective', '?')}\" (CMAKE_CXX_FLAGS then CMAKE_CXX_FLAGS_<type>)")
    blas_env = {k: os.environ[k] for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS") if k in os.environ}
    L.append(f"- Environment of the Onyx processes: {', '.join(args.onyx_env + [f'{k}={v}' for k, v in blas_env.items()]) or 'nothing set (OMP_NUM_THREADS, OPENBLAS_NUM_THREADS unset)'}")
    L.append(f"- onnxruntime {onnxruntime.__version__} (CPUExecutionProvider, default graph optimizations, "
             f"ORT_SEQUENTIAL, intra_op_num_threads = threads, inter_op_num_threads = 1); "
             f"onnx {onnx.__version__}; Python {platform.python_version()}")
    L.append(f"- Per configuration: {args.rounds} alternating rounds (Onyx process, then onnxruntime process), "
             f"each {args.warmup} warm-up + {args.iters} timed runs on the same inputs; "
             f"median and p90 over all {args.rounds * args.iters} timed runs of each engine.")
    L.append("- Models: `models/onnx/make_models.py` (float32, opset 17): resnet (3 residual blocks, 32x32 input), "
             "mobilenet (depthwise-separable, 32x32 input), bert (2-layer encoder, hidden 64, 4 heads, "
             "16 tokens), mlp (64-128-128-10).\n")
    L.append("### Latency\n")
    L.append("Ratio = Onyx median / onnxruntime median (below 1: Onyx faster).\n")
    L.append("| model | batch | threads | Onyx median ms | Onyx p90 ms | ORT median ms | ORT p90 ms | ratio |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        L.append(f"| {r['model']} | {r['batch']} | {r['threads']} | {r['onyx_median']:.3f} | {r['onyx_p90']:.3f} | "
                 f"{r['ort_median']:.3f} | {r['ort_p90']:.3f} | {r['ratio']:.2f} |")
    L.append("\n### Load time and memory\n")
    L.append("Load: Onyx `Model::load` + `Session` construction; onnxruntime `InferenceSession(...)` "
             "(which includes its graph optimizations). First run: the first `run` after loading "
             "(Onyx builds its graph for the input shapes then). Peak RSS: the process's resident high-water mark (`VmHWM` of /proc/self/status; "
             "`ru_maxrss` is not used because Linux carries the parent's RSS at fork into it). "
             "Onyx graph peak: the workspace peak of the last run's graph (`memoryStats().peakBytes`). "
             "The onnxruntime worker is a Python process; ORT RSS before session is its resident memory "
             "after importing numpy and onnxruntime and loading the inputs, before creating the session.\n")
    L.append("| model | batch | threads | Onyx load ms | Onyx first run ms | ORT load ms | ORT first run ms | "
             "Onyx peak RSS MiB | Onyx graph peak MiB | ORT peak RSS MiB | ORT RSS before session MiB |")
    L.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        L.append(f"| {r['model']} | {r['batch']} | {r['threads']} | {r['onyx_load']:.1f} | {r['onyx_first']:.1f} | "
                 f"{r['ort_load']:.1f} | {r['ort_first']:.1f} | {r['onyx_rss']:.1f} | {r['onyx_graph']:.3f} | "
                 f"{r['ort_rss']:.1f} | {r['ort_base']:.1f} |")
    L.append("")
    text = "\n".join(L)
    from perfdoc import emit
    emit(args.out, "bench_vs_ort", text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
