#!/usr/bin/env python3
"""Runs onnx's checker with full shape inference (strict) on every .onnx file
given or found under the folders given. Prints one line per failure and a
summary; exits 1 if any model fails.

    python3 tools/check_onnx.py exported/ model.onnx
"""
import os
import sys

import onnx


def models(args):
    for a in args:
        if os.path.isdir(a):
            for root, _, files in os.walk(a):
                for f in sorted(files):
                    if f.endswith(".onnx"):
                        yield os.path.join(root, f)
        else:
            yield a


def main():
    if len(sys.argv) < 2:
        print(__doc__.strip())
        return 2
    ok = bad = 0
    for path in models(sys.argv[1:]):
        try:
            onnx.checker.check_model(path, full_check=True)
            ok += 1
        except Exception as e:  # the checker raises several exception types
            bad += 1
            msg = " ".join(str(e).split())
            print(f"FAIL {os.path.basename(path)}: {msg[:400]}")
    print(f"onnx {onnx.__version__} checker (full_check): {ok} passed, {bad} failed")
    return 1 if bad or not ok else 0


if __name__ == "__main__":
    sys.exit(main())
