#!/usr/bin/env python3
"""The libFuzzer target's seed corpus (tests/fuzz/fuzz_model.cpp, issue 19).

Each model.onnx under the given folders (ONNX's node tests, the bundled
models) becomes one file of the corpus, with the tensor inputs of its
test_data_set_0 stored as initializers named like the inputs: the fuzz
target feeds a graph input the initializer of its name, so the seeds run on
their real inputs. Models larger than --max-bytes are left out (libFuzzer's
-max_len).

  python3 tools/fuzz_corpus.py --out build-fuzz/corpus \\
      build/onnx-1.22.0/onnx/backend/test/data/node models/onnx
"""
import argparse
import hashlib
import os
import sys

import onnx


def seeds(dirs):
    for d in dirs:
        for root, _, files in os.walk(d):
            if "model.onnx" in files:
                yield root


def with_inputs(case_dir):
    m = onnx.load(os.path.join(case_dir, "model.onnx"), load_external_data=False)
    data = os.path.join(case_dir, "test_data_set_0")
    if os.path.isdir(data):
        names = {i.name for i in m.graph.initializer}
        for k, vi in enumerate(m.graph.input):
            pb = os.path.join(data, f"input_{k}.pb")
            if vi.name in names or not os.path.exists(pb) or not vi.type.HasField("tensor_type"):
                continue
            t = onnx.TensorProto()
            try:
                with open(pb, "rb") as f:
                    t.ParseFromString(f.read())
            except Exception:  # a sequence or an optional: made up by the target
                continue
            t.name = vi.name
            m.graph.initializer.append(t)
    return m.SerializeToString()


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dirs", nargs="+")
    ap.add_argument("--out", required=True)
    ap.add_argument("--max-bytes", type=int, default=1 << 20)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    n = skipped = 0
    for case in sorted(seeds(a.dirs)):
        try:
            b = with_inputs(case)
        except Exception as e:  # an unreadable seed is reported, not fatal
            print(f"skipped {case}: {e}", file=sys.stderr)
            skipped += 1
            continue
        if len(b) > a.max_bytes:
            skipped += 1
            continue
        with open(os.path.join(a.out, hashlib.sha1(b).hexdigest()), "wb") as f:
            f.write(b)
        n += 1
    print(f"{n} seeds in {a.out} ({skipped} left out)")
    return 0 if n else 1


if __name__ == "__main__":
    sys.exit(main())
