#!/usr/bin/env python3
"""Structure-aware fuzzing of model loading, import and one run (issue 19).

Mutates parsed ONNX models (dims of inputs, outputs and initializers,
attribute values, initializer and input values, op types, wiring) taken from
a seed corpus (ONNX's node tests and the bundled models), runs each mutant
through `onnx-run --test-data` (best built with -DONYX_SANITIZE=address,undefined)
and sorts the outcomes: a one-line error or a run is fine; a sanitizer report,
a signal, a multi-line or empty error, or a hang is a finding, saved with its
report under --out.

  python3 tools/fuzz_models.py --bin build-asan/tools --seeds build/onnx-1.22.0/onnx/backend/test/data/node \\
      --minutes 10 --out /tmp/fuzz

Exits 1 when anything was found (CI runs it for a fixed budget).
"""
import argparse
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import onnx
from onnx import numpy_helper

INTERESTING = [0, 1, 2, 3, -1, -2, 7, 255, 2**31 - 1, 2**31, 2**32, 2**32 + 1, 2**53, 2**61, 2**62,
               2**63 - 1, -2**63, -2**31, 10**6]
FLOATS = [0.0, -0.0, 1e-30, 1e30, float("inf"), float("-inf"), float("nan"), -1.0, 3.5]


def pick_int(rng):
    v = rng.choice(INTERESTING)
    return v if rng.random() < 0.8 else rng.randint(-5, 40)


def seeds_from(dirs):
    out = []
    for d in dirs:
        for root, _, files in os.walk(d):
            if "model.onnx" in files:
                data = [os.path.join(root, s) for s in sorted(os.listdir(root)) if s.startswith("test_data_set")]
                out.append((os.path.join(root, "model.onnx"), data[0] if data else None))
    return sorted(out)


def all_graphs(g):
    yield g
    for n in g.node:
        for a in n.attribute:
            if a.type == onnx.AttributeProto.GRAPH:
                yield from all_graphs(a.g)
            for sg in a.graphs:
                yield from all_graphs(sg)


def mutate_dims(rng, g):
    vis = list(g.input) + list(g.output) + list(g.value_info)
    if vis and rng.random() < 0.5:
        v = rng.choice(vis)
        shp = v.type.tensor_type.shape
        if len(shp.dim):
            shp.dim[rng.randrange(len(shp.dim))].dim_value = pick_int(rng)
            return True
    if g.initializer:
        t = rng.choice(g.initializer)
        if len(t.dims):
            t.dims[rng.randrange(len(t.dims))] = pick_int(rng)
        else:
            t.dims.append(pick_int(rng))
        return True
    return False


def mutate_attr(rng, g):
    nodes = [n for n in g.node if n.attribute]
    if not nodes:
        return False
    a = rng.choice(rng.choice(nodes).attribute)
    if a.type == onnx.AttributeProto.INT:
        a.i = pick_int(rng)
    elif a.type == onnx.AttributeProto.INTS:
        if a.ints and rng.random() < 0.8:
            a.ints[rng.randrange(len(a.ints))] = pick_int(rng)
        else:
            a.ints.append(pick_int(rng))
    elif a.type == onnx.AttributeProto.FLOAT:
        a.f = rng.choice(FLOATS)
    elif a.type == onnx.AttributeProto.FLOATS and a.floats:
        a.floats[rng.randrange(len(a.floats))] = rng.choice(FLOATS)
    elif a.type == onnx.AttributeProto.STRING:
        a.s = rng.choice([b"", b"x", a.s + b"_", b"NOTSET", b"../../etc/passwd"])
    elif a.type == onnx.AttributeProto.TENSOR:
        return mutate_tensor(rng, a.t)
    else:
        return False
    return True


def mutate_tensor(rng, t):
    try:
        arr = numpy_helper.to_array(t).copy()
    except Exception:
        return False
    if arr.size == 0:
        return False
    flat = arr.reshape(-1)
    i = rng.randrange(flat.size)
    if np.issubdtype(arr.dtype, np.integer):
        info = np.iinfo(arr.dtype)
        v = pick_int(rng)
        flat[i] = np.array(min(max(v, info.min), info.max)).astype(arr.dtype)
    elif np.issubdtype(arr.dtype, np.floating):
        with np.errstate(all="ignore"):  # 1e30 in float16 is inf, as meant
            flat[i] = rng.choice(FLOATS)
    elif arr.dtype == np.bool_:
        flat[i] = not flat[i]
    else:
        return False
    name = t.name
    t.CopyFrom(numpy_helper.from_array(arr, name))
    return True


def mutate_init(rng, g):
    if not g.initializer:
        return False
    return mutate_tensor(rng, rng.choice(g.initializer))


def mutate_wiring(rng, g, ops):
    if not g.node:
        return False
    n = rng.choice(g.node)
    r = rng.random()
    if r < 0.4 and ops:
        n.op_type = rng.choice(ops)
    elif r < 0.7 and n.input:
        names = [x for m in g.node for x in m.output] + [i.name for i in g.input] + [""]
        n.input[rng.randrange(len(n.input))] = rng.choice(names)
    elif n.input:
        del n.input[-1]
    else:
        return False
    return True


def mutate_inputs(rng, data_dir, work):
    """Copies the test data folder with one input's values or dims changed."""
    out = os.path.join(work, "data")
    shutil.copytree(data_dir, out)
    files = sorted(f for f in os.listdir(out) if f.startswith("input_"))
    if not files:
        return out
    p = os.path.join(out, rng.choice(files))
    t = onnx.TensorProto()
    try:
        with open(p, "rb") as f:
            t.ParseFromString(f.read())
    except Exception:
        return out
    if rng.random() < 0.5 or not mutate_tensor(rng, t):
        if len(t.dims):
            t.dims[rng.randrange(len(t.dims))] = pick_int(rng)
    with open(p, "wb") as f:
        f.write(t.SerializeToString())
    return out


def mutate(rng, model, ops):
    graphs = list(all_graphs(model.graph))
    done = 0
    for _ in range(rng.randint(1, 3)):
        g = rng.choice(graphs)
        kind = rng.choice([mutate_dims, mutate_attr, mutate_attr, mutate_init, mutate_wiring])
        ok = kind(rng, g, ops) if kind is mutate_wiring else kind(rng, g)
        done += bool(ok)
    return done > 0


def classify(rc, err):
    if "Sanitizer" in err or "runtime error:" in err or "AddressSanitizer" in err:
        if "allocation-size-too-big" in err or "out of memory" in err or "requested allocation size" in err:
            return "oom"
        return "sanitizer"
    if rc < 0:
        return f"signal {-rc}"
    if rc == 0:
        return None
    lines = [l for l in err.strip().splitlines() if l.strip() and "warning" not in l.lower()]
    if not lines:
        return "silent failure"
    if "terminate called" in err or "std::bad_alloc" in err or "max_size()" in err:
        return "unnamed allocation failure"
    if len(lines) > 1:
        return "multi-line error"
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--bin", required=True, help="folder with onnx-run")
    ap.add_argument("--seeds", nargs="+", required=True, help="folders searched for model.onnx")
    ap.add_argument("--minutes", type=float, default=5)
    ap.add_argument("--runs", type=int, default=0, help="stop after this many runs (0: time only)")
    ap.add_argument("--seed", type=int, default=int(time.time()))
    ap.add_argument("--timeout", type=float, default=20)
    ap.add_argument("--out", default="fuzz-findings")
    args = ap.parse_args()
    rng = random.Random(args.seed)
    seeds = seeds_from(args.seeds)
    if not seeds:
        sys.exit("fuzz_models: no model.onnx under " + " ".join(args.seeds))
    ops = sorted({n.op_type for m, _ in seeds[:2000] for n in onnx.load(m, load_external_data=False).graph.node})
    env = dict(os.environ)
    env.setdefault("ASAN_OPTIONS", "detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=4096")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    env["OMP_NUM_THREADS"] = "1"
    os.makedirs(args.out, exist_ok=True)
    stop = time.time() + args.minutes * 60
    runs = findings = 0
    kinds = {}
    refused = {}
    print(f"fuzz_models: {len(seeds)} seeds, seed {args.seed}", flush=True)
    while time.time() < stop and (not args.runs or runs < args.runs):
        path, data = rng.choice(seeds)
        model = onnx.load(path, load_external_data=False)
        if not mutate(rng, model, ops):
            continue
        with tempfile.TemporaryDirectory() as work:
            mpath = os.path.join(work, "model.onnx")
            with open(mpath, "wb") as f:
                f.write(model.SerializeToString())
            # A legal model may ask for any amount of memory (a window of
            # 2^31 samples): the limit makes that a one-line error, not a
            # run that outlasts the timeout.
            cmd = [os.path.join(args.bin, "onnx-run"), mpath, "--threads", "1", "--max-memory", "1G"]
            if data:
                cmd += ["--test-data", mutate_inputs(rng, data, work) if rng.random() < 0.3 else data]
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, errors="replace", timeout=args.timeout, env=env)
                rc, err = p.returncode, p.stderr
            except subprocess.TimeoutExpired:
                rc, err = None, "timeout"
            runs += 1
            kind = "hang" if rc is None else classify(rc, err)
            if kind == "oom":
                # An allocation the system refuses: in a build without ASan
                # that is std::bad_alloc, reported as a one-line error naming
                # the node; ASan's operator new aborts instead. Counted apart.
                refused[path] = refused.get(path, 0) + 1
                kind = None
            if kind:
                findings += 1
                kinds[kind] = kinds.get(kind, 0) + 1
                dst = os.path.join(args.out, f"{findings:04d}_{kind.replace(' ', '_')}")
                shutil.copytree(work, dst)
                with open(os.path.join(dst, "report.txt"), "w") as f:
                    f.write(f"seed model: {path}\ncommand: {' '.join(cmd)}\nrc: {rc}\n\n{err}")
                first = next((l for l in err.splitlines() if "runtime error" in l or "ERROR:" in l), err[:200])
                print(f"[{runs}] {kind}: {path}: {first.strip()}", flush=True)
    print(f"fuzz_models: {runs} runs, {findings} findings {kinds}; {sum(refused.values())} allocations "
          f"refused (not findings) from {sorted(os.path.basename(os.path.dirname(p)) for p in refused)}", flush=True)
    sys.exit(1 if findings else 0)


if __name__ == "__main__":
    main()
