#!/usr/bin/env bash
# End-to-end checks of the ONNX CLIs on the bundled model and on bad input.
#   cli_checks.sh BIN_DIR SOURCE_DIR
set -uo pipefail
BIN=$1; SRC=$2
M=$SRC/models/onnx/tiny_mlp
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0
check() {  # check NAME COND...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
lines() { [ "$(wc -l < "$1")" -eq "$2" ]; }

# A good run, compared with onnxruntime's reference outputs.
"$BIN/onnx-run" "$M/model.onnx" --test-data "$M/test_data_set_0" --output-dir "$T/out" > "$T/o" 2> "$T/e"
check "onnx-run matches the reference" [ $? -eq 0 ]
check "onnx-run says it matched" grep -q "outputs match" "$T/o"
check "onnx-run wrote probs.npy" python3 -c "import numpy as np; a=np.load('$T/out/probs.npy'); assert a.shape==(5,3) and abs(a.sum()-5)<1e-4"

# Inputs from .npy.
python3 -c "import numpy as np; np.save('$T/x.npy', np.ones((2,4), np.float32))"
"$BIN/onnx-run" "$M/model.onnx" --input x="$T/x.npy" > "$T/o" 2> "$T/e"
check "onnx-run takes .npy inputs" grep -q "probs: float32 2x3" "$T/o"

# A wrong reference makes onnx-run fail.
mkdir -p "$T/wrong"; cp "$M/test_data_set_0/input_0.pb" "$T/wrong/"
python3 -c "
import numpy as np, onnx
from onnx import numpy_helper
open('$T/wrong/output_0.pb','wb').write(numpy_helper.from_array(np.zeros((5,3),np.float32)).SerializeToString())"
"$BIN/onnx-run" "$M/model.onnx" --test-data "$T/wrong" > "$T/o" 2> "$T/e"
check "onnx-run exits non-zero on a mismatch" [ $? -ne 0 ]
check "the mismatch is one line naming the output" sh -c "lines() { [ \$(wc -l < \$1) -eq \$2 ]; }; lines '$T/e' 1 && grep -q \"output 'probs'\" '$T/e'"

# Bad input: one line on stderr naming the file, non-zero exit, no crash.
head -c 100 "$M/model.onnx" > "$T/trunc.onnx"
printf 'GIF89a not a model' > "$T/magic.onnx"
for f in trunc magic; do
  "$BIN/onnx-run" "$T/$f.onnx" > "$T/o" 2> "$T/e"; rc=$?
  check "onnx-run $f: exit 1" [ $rc -eq 1 ]
  check "onnx-run $f: one line naming the file" sh -c "[ \$(wc -l < '$T/e') -eq 1 ] && grep -q '$f.onnx' '$T/e'"
done
"$BIN/onnx-run" "$M/model.onnx" --input nosuch="$T/x.npy" > "$T/o" 2> "$T/e"; rc=$?
check "unknown input name: exit 1 and names the inputs" sh -c "[ $rc -eq 1 ] && grep -q \"no input 'nosuch' (inputs: x)\" '$T/e'"

# onnx-test: the summary line, and the known-failures list only shrinks.
"$BIN/onnx-test" "$M" > "$T/o"; rc=$?
check "onnx-test passes the bundled case" sh -c "[ $rc -eq 0 ] && tail -1 '$T/o' | grep -qx '1 passed, 0 failed, 0 skipped'"
echo "tiny_mlp listed as failing for the test" > "$T/known.txt"
"$BIN/onnx-test" "$M" --known-failures "$T/known.txt" > "$T/o"; rc=$?
check "onnx-test fails when a listed case passes" sh -c "[ $rc -ne 0 ] && grep -q '^FIXED tiny_mlp' '$T/o'"
mkdir -p "$T/case"; cp "$M/model.onnx" "$T/case/"; cp -r "$T/wrong" "$T/case/test_data_set_0"
"$BIN/onnx-test" "$T/case" > "$T/o"; rc=$?
check "onnx-test reports a failing case" sh -c "[ $rc -ne 0 ] && grep -q '^FAIL  case:' '$T/o' && tail -1 '$T/o' | grep -qx '0 passed, 1 failed, 0 skipped'"
echo "case wrong reference on purpose" > "$T/known.txt"
"$BIN/onnx-test" "$T/case" --known-failures "$T/known.txt" > "$T/o"; rc=$?
check "onnx-test counts a listed failure as skipped" sh -c "[ $rc -eq 0 ] && tail -1 '$T/o' | grep -qx '0 passed, 0 failed, 1 skipped'"

echo "$fails failed"
[ $fails -eq 0 ]
