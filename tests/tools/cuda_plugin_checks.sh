#!/usr/bin/env bash
# The CUDA backend is a plugin (core/device_backend.h): libonyx links no CUDA
# library, a CPU run maps none, a GPU request loads libonyx_cuda.so or says
# in one line why it cannot.
#   cuda_plugin_checks.sh links   LIBONYX
#   cuda_plugin_checks.sh loading BIN_DIR SOURCE_DIR PLUGIN_BUILT(0|1)
set -uo pipefail
fails=0
check() {  # check NAME COND...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
# Library names (not paths: a checkout may sit in a folder named cuda).
cudaLibs='libcuda\|libcudart\|libcublas\|libcudnn'

if [ "$1" = links ]; then
  LIB=$2
  check "libonyx exists" [ -f "$LIB" ]
  n=$(ldd "$LIB" | grep -ci "$cudaLibs")
  check "ldd libonyx shows no CUDA library ($n)" [ "$n" -eq 0 ]
  n=$(readelf -d "$LIB" | grep NEEDED | grep -ci "$cudaLibs")
  check "libonyx needs no CUDA library ($n)" [ "$n" -eq 0 ]
  [ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
  exit 0
fi

BIN=$2; SRC=$3; BUILT=$4
M=$SRC/models/onnx/tiny_mlp
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
run() { "$BIN/onnx-run" "$M/model.onnx" --test-data "$M/test_data_set_0" "$@" > "$T/o" 2> "$T/e"; }
oneLine() { [ "$(wc -l < "$T/e")" -eq 1 ]; }

# A CPU run maps neither the plugin nor a CUDA library.
LD_DEBUG=files run
check "a CPU run passes" grep -q "outputs match" "$T/o"
n=$(grep -ci "libonyx_cuda\|$cudaLibs" "$T/e")
check "a CPU run loads no CUDA library ($n)" [ "$n" -eq 0 ]

# A GPU request: it runs where there is a GPU; otherwise one line, why.
LD_DEBUG=files run --device gpu0
rc=$?
grep -v "^ *[0-9]*:" "$T/e" > "$T/why"  # without the loader's lines
if [ "$BUILT" = 1 ]; then
  check "a GPU request loads the plugin" grep -q "libonyx_cuda.so" "$T/e"
  if [ $rc -ne 0 ]; then
    check "no GPU: one line" [ "$(wc -l < "$T/why")" -eq 1 ]
    check "no GPU: says why" grep -q "gpu0.*\(no usable CUDA device\|no such CUDA device\)" "$T/why"
  else
    check "on the GPU the run passes" grep -q "outputs match" "$T/o"
  fi
else
  check "no plugin in this build: the request fails" [ $rc -ne 0 ]
  check "no plugin in this build: one line" [ "$(wc -l < "$T/why")" -eq 1 ]
  check "no plugin in this build: says so" grep -q "gpu0.*this build of Onyx has no CUDA backend" "$T/why"
fi

# ONYX_CUDA_PLUGIN names a file that is not there, or not a plugin.
ONYX_CUDA_PLUGIN=$T/missing/libonyx_cuda.so run --device gpu0
check "a missing plugin fails the request" [ $? -ne 0 ]
check "a missing plugin: one line" oneLine
check "a missing plugin: the line names the file" grep -q "ONYX_CUDA_PLUGIN=$T/missing/libonyx_cuda.so does not exist" "$T/e"
ONYX_CUDA_PLUGIN=$M/model.onnx run --device gpu0
check "a file that is no library fails the request" [ $? -ne 0 ]
check "no library: one line naming it" sh -c "[ \$(wc -l < '$T/e') -eq 1 ] && grep -q 'cannot load the CUDA backend ONYX_CUDA_PLUGIN=$M/model.onnx' '$T/e'"

[ $fails -eq 0 ] || { echo "$fails check(s) failed"; exit 1; }
