#!/usr/bin/env bash
# Every input the fuzzer (tools/fuzz_models.py) found that crashed, hung or
# tripped a sanitizer, run again (tests/regress/fuzz/<site>/) with
# --max-memory 1G as the fuzzer runs them: it must end with exit status 0 or
# 1, an error of one line (warnings aside), no sanitizer report, within 60 s.
# Run by ctest and by tools/dev.sh sanitize.
#   fuzz_regressions.sh BIN_DIR SOURCE_DIR
BIN=$1; SRC=$2
fails=0; n=0
for d in "$SRC"/tests/regress/fuzz/*/; do
  name=$(basename "$d"); n=$((n + 1))
  err=$(timeout 60 "$BIN/onnx-run" "$d/model.onnx" --threads 1 --max-memory 1G --test-data "$d/test_data_set_0" 2>&1 >/dev/null); rc=$?
  lines=$(printf '%s\n' "$err" | grep -v -i 'warning' | grep -c .)
  if [ $rc -gt 1 ] || [ "$lines" -gt 1 ] || printf '%s' "$err" | grep -q 'Sanitizer\|runtime error'; then
    echo "FAIL $name: rc $rc"; printf '%s\n' "$err" | head -5; fails=$((fails + 1))
  else
    echo "ok   $name: rc $rc ${err:+($(printf '%s' "$err" | grep -v -i warning | head -1))}"
  fi
done
[ $n -gt 0 ] || { echo "no regression inputs under $SRC/tests/regress/fuzz"; exit 1; }
echo "$((n - fails)) of $n fuzz regressions pass"
[ $fails -eq 0 ]
