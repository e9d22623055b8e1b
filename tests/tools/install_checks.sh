#!/usr/bin/env bash
# The installed package runs anywhere: `cmake --install` to a fresh prefix,
# then every installed tool starts with an empty environment (env -i: no
# LD_LIBRARY_PATH, no PATH) and the installed onnx-run runs the bundled model
# against its reference outputs. usage: install_checks.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$1 src=$2
prefix=$(mktemp -d "${TMPDIR:-/tmp}/onyx-install.XXXXXX")
trap 'rm -rf "$prefix"' EXIT
cmake --install "$build" --prefix "$prefix" >/dev/null

fail() { echo "FAIL: $*" >&2; exit 1; }
tools="onnx-run onnx-test onnx-bench onnx-import onnx-export onnx-train onyx-ops"
for t in $tools; do
  [ -x "$prefix/bin/$t" ] || fail "$t is not installed in $prefix/bin"
  out=$(env -i "$prefix/bin/$t" --help 2>&1) || fail "env -i $prefix/bin/$t --help exited $?: $out"
  grep -q 'Usage:' <<<"$out" || fail "$t --help printed no usage: $out"
done
# No tool may depend on the build tree.
for t in $tools; do
  if ldd "$prefix/bin/$t" | grep -q "$build"; then fail "$t loads a library from the build tree"; fi
  if ldd "$prefix/bin/$t" | grep -q "not found"; then fail "$t: $(ldd "$prefix/bin/$t" | grep "not found")"; fi
done
m=$src/models/onnx/tiny_mlp
out=$(cd / && env -i "$prefix/bin/onnx-run" "$m/model.onnx" --test-data "$m/test_data_set_0" 2>&1) ||
  fail "installed onnx-run on the bundled model: $out"
grep -q 'match' <<<"$out" || fail "installed onnx-run did not report matching outputs: $out"
echo "installed to $prefix: $(echo $tools | wc -w) tools start with env -i; the bundled model matches"
