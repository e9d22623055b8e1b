#!/usr/bin/env python3
"""Keeps the layering of docs/architecture.md: every `#include <onyx/...>` in
the library's sources points to its own layer or a lower one, and no file
reaches into another folder with a relative include.

usage: check_layers.py SOURCE_DIR     (exit 1 and one line per violation)
"""
import pathlib
import re
import sys

# Bottom to top. A layer is a folder of the source tree and the include path
# it is installed under (<onyx/...>).
LAYERS = [
    ("src/core", "core"),
    ("src/backend/cpu", "backend/cpu"),
    ("src/io", "io"),
    ("onnx", "onnx"),
    ("src/graph", "graph"),
    ("src/ops", "ops"),
    ("converters", "converters"),
    ("src/runtime", "runtime"),
    ("src/train", "train"),
    ("src/onyx.h", "onyx.h"),          # the umbrella: every public header of libonyx
    ("src/backend/cuda", "backend/cuda"),  # the CUDA plugin: above libonyx, included by none of it
]
RANK = {inc: i for i, (_, inc) in enumerate(LAYERS)}

INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]')
COND = re.compile(r'^\s*#\s*(if|ifdef|ifndef|elif|else|endif)\b(.*)')
# Code under `#ifdef __CUDACC__` / `#if ONYX_GPU_PLUGIN` is compiled only
# into the CUDA plugin (the functor families nvcc compiles a second time),
# so its includes are the plugin's.
PLUGIN_ONLY = re.compile(r'__CUDACC__|ONYX_GPU_PLUGIN')


def plugin_branch(directive, cond):
    if directive == "ifndef" or "!" in cond:
        return False
    return bool(PLUGIN_ONLY.search(cond)) and directive in ("if", "ifdef", "elif")


def layer_of_file(rel):
    best = None
    for folder, inc in LAYERS:
        if rel == folder or rel.startswith(folder + "/"):
            if best is None or len(folder) > len(best[0]):
                best = (folder, inc)
    return best


def layer_of_include(path):
    if not path.startswith("onyx/"):
        return None
    rest = path[len("onyx/"):]
    best = None
    for _, inc in LAYERS:
        if rest == inc or rest.startswith(inc + "/"):
            if best is None or len(inc) > len(best):
                best = inc
    return best if best is not None else "?"


def main():
    root = pathlib.Path(sys.argv[1]).resolve()
    bad = []
    checked = 0
    for f in sorted(root.rglob("*")):
        if f.suffix not in (".h", ".cpp", ".cu", ".cuh") or not f.is_file():
            continue
        rel = f.relative_to(root).as_posix()
        home = layer_of_file(rel)
        if home is None:
            continue  # tools/, models/, tests/, build folders: above every layer
        checked += 1
        stack = []  # per open #if: whether its current branch is plugin-only
        for no, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            c = COND.match(line)
            if c:
                directive, cond = c.groups()
                if directive in ("if", "ifdef", "ifndef"):
                    stack.append(plugin_branch(directive, cond))
                elif directive == "elif" and stack:
                    stack[-1] = plugin_branch(directive, cond)
                elif directive == "else" and stack:
                    stack[-1] = False
                elif directive == "endif" and stack:
                    stack.pop()
                continue
            m = INCLUDE.match(line)
            if not m:
                continue
            kind, target = m.groups()
            if kind == '"':
                if "/" in target:
                    bad.append(f"{rel}:{no}: relative include \"{target}\" reaches into another folder; "
                               f"use <onyx/...>")
                continue
            layer = layer_of_include(target)
            if any(stack):
                continue  # plugin-only code may include anything
            if layer is None:
                continue  # a system or third-party header
            if layer == "?":
                bad.append(f"{rel}:{no}: <{target}> is in no layer of docs/architecture.md")
            elif RANK[layer] > RANK[home[1]]:
                bad.append(f"{rel}:{no}: {home[1]} includes <{target}> of the higher layer {layer}")
    for b in bad:
        print(b)
    order = " < ".join(inc for _, inc in LAYERS)
    print(f"{checked} files checked against {order}: {len(bad)} upward include(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
