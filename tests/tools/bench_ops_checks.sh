#!/usr/bin/env bash
# bench-ops and fma-peak run and print what docs/cli.md says (their output's
# format only: no timing is checked).
#   bench_ops_checks.sh BIN_DIR SOURCE_DIR
set -uo pipefail
BIN=$1; SRC=$2
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0
check() {  # check NAME COND...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
LINE='^[a-z0-9_]+: .+: median [0-9.]+ ms, p90 [0-9.]+ ms, [0-9.]+ (GFLOP/s|GB/s)$'

# Every example line of docs/cli.md's bench-ops block (the ```sh block after
# the word "Examples"), one timed run each.
examples=$(awk '/^## bench-ops/{s=1} s&&/^Examples/{e=1} e&&/^```sh/{b=1; next} b&&/^```/{exit} b' "$SRC/docs/cli.md")
check "docs/cli.md has bench-ops examples" [ -n "$examples" ]
while IFS= read -r ex; do
  [ -z "$ex" ] && continue
  # shellcheck disable=SC2086
  "$BIN/"$ex --iters 1 --warmup 0 > "$T/o" 2> "$T/e"
  check "runs: $ex" [ $? -eq 0 ]
  if [[ "$ex" == *--json* ]]; then
    check "JSON lines: $ex" python3 -c "
import json, sys
rows = [json.loads(l) for l in open('$T/o')]
assert rows and all(r['median_ms'] > 0 and r['iters'] == 1 and ('gflops' in r or 'gbps' in r) for r in rows), rows"
  else
    n=$(grep -c . "$T/o"); want=$(grep -o -- "--preset" <<< "$ex" | wc -l); [ "$want" -eq 0 ] && want=1
    check "one line per op: $ex" [ "$n" -eq "$want" ]
    check "line format: $ex" sh -c "! grep -Ev '$LINE' '$T/o'"
  fi
done <<< "$examples"

# One preset with one run, as the brief of the tool promises.
"$BIN/bench-ops" --preset resnet50_conv3x3_256 --iters 1 --warmup 0 > "$T/o" 2> "$T/e"
check "a preset runs" [ $? -eq 0 ]
check "the preset's line" grep -Eq '^resnet50_conv3x3_256: x 1x256x14x14, W 256x256x3x3, .* -> 1x256x14x14: median [0-9.]+ ms, p90 [0-9.]+ ms, [0-9.]+ GFLOP/s$' "$T/o"
"$BIN/bench-ops" --list > "$T/o"
check "--list names every preset" [ "$(grep -c . "$T/o")" -ge 13 ]

# Bad input: one line on stderr, exit 1.
"$BIN/bench-ops" --preset no_such_preset > "$T/o" 2> "$T/e"; rc=$?
check "an unknown preset fails" [ $rc -eq 1 ]
check "with one line naming it" sh -c "[ \$(wc -l < '$T/e') -eq 1 ] && grep -q no_such_preset '$T/e'"
"$BIN/bench-ops" conv --c 3 --m 4 --group 2 > "$T/o" 2> "$T/e"; rc=$?
check "channels not divisible by the groups fail" [ $rc -eq 1 ]

# fma-peak: one short run per thread count, in JSON.
"$BIN/fma-peak" --threads 1 --threads 2 --seconds 0.01 --reps 1 --json > "$T/o" 2> "$T/e"
check "fma-peak runs" [ $? -eq 0 ]
check "fma-peak reports each thread count" python3 -c "
import json
r = json.load(open('$T/o'))
assert r['isa'] in ('avx512f', 'avx2+fma') and [x['threads'] for x in r['results']] == [1, 2], r
assert all(x['gflops'] > 0 for x in r['results']), r"

echo "$fails failed"
[ $fails -eq 0 ]
