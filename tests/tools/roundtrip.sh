#!/usr/bin/env bash
# The export round trip of a conformance set: ONNX -> native -> ONNX with
# bit-identical outputs and a byte-identical second trip (onnx-test
# --round-trip), then onnx's own checker with full shape inference on every
# exported model.
#   roundtrip.sh BIN_DIR SOURCE_DIR DATA_DIR KNOWN_FAILURES
set -uo pipefail
BIN=$1; SRC=$2; DATA=$3; KNOWN=$4
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
"$BIN/onnx-test" "$DATA" --round-trip --export-dir "$T" --known-failures "$KNOWN"
rc1=$?
python3 "$SRC/tools/check_onnx.py" "$T"
rc2=$?
[ $rc1 -eq 0 ] && [ $rc2 -eq 0 ]
