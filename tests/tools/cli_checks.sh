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

# --max-memory: a run over the limit is a one-line error naming it, not a kill.
python3 -c "import numpy as np; np.save('$T/xbig.npy', np.ones((200000,4), np.float32))"
"$BIN/onnx-run" "$M/model.onnx" --input x="$T/xbig.npy" --max-memory 64K > "$T/o" 2> "$T/e"
check "onnx-run --max-memory: over the limit is a one-line error" sh -c "[ $? -eq 1 ] && [ \$(wc -l < '$T/e') -eq 1 ] && grep -q 'memory limit' '$T/e' && grep -q '65536' '$T/e'"
"$BIN/onnx-run" "$M/model.onnx" --input x="$T/x.npy" --max-memory 64M > "$T/o" 2> "$T/e"
check "onnx-run --max-memory: within the limit runs" sh -c "[ $? -eq 0 ] && grep -q 'probs: float32 2x3' '$T/o'"
"$BIN/onnx-run" "$M/model.onnx" --input x="$T/x.npy" --max-memory 12Q > "$T/o" 2> "$T/e"
check "onnx-run --max-memory with a bad size names the flag" sh -c "[ $? -eq 1 ] && grep -q -- \"--max-memory '12Q'\" '$T/e'"

# A wrong reference makes onnx-run fail.
mkdir -p "$T/wrong"; cp "$M/test_data_set_0/input_0.pb" "$T/wrong/"
python3 -c "
import numpy as np, onnx
from onnx import numpy_helper
open('$T/wrong/output_0.pb','wb').write(numpy_helper.from_array(np.zeros((5,3),np.float32)).SerializeToString())"
"$BIN/onnx-run" "$M/model.onnx" --test-data "$T/wrong" > "$T/o" 2> "$T/e"
check "onnx-run exits non-zero on a mismatch" [ $? -ne 0 ]
check "the mismatch is one line naming the output" sh -c "lines() { [ \$(wc -l < \$1) -eq \$2 ]; }; lines '$T/e' 1 && grep -q \"output 'probs'\" '$T/e'"

# Test data that would check nothing is an error, not a match.
"$BIN/onnx-run" "$M/model.onnx" --test-data "$T/no_such_folder" > "$T/o" 2> "$T/e"
check "onnx-run --test-data on a missing folder fails in one line" sh -c "[ $? -ne 0 ] && [ \$(wc -l < '$T/e') -eq 1 ] && grep -q 'no such folder' '$T/e' && ! grep -q 'outputs match' '$T/o'"
mkdir -p "$T/inputs_only"; cp "$M/test_data_set_0/input_0.pb" "$T/inputs_only/"
"$BIN/onnx-run" "$M/model.onnx" --test-data "$T/inputs_only" > "$T/o" 2> "$T/e"
check "onnx-run --test-data without expected outputs fails" sh -c "[ $? -ne 0 ] && grep -q 'no expected outputs' '$T/e' && ! grep -q 'outputs match' '$T/o'"
"$BIN/onnx-import" "$M/model.onnx" -o "$T/ck.npz" --check-with "$T/inputs_only" > "$T/o" 2> "$T/e"
check "onnx-import --check-with without expected outputs fails" sh -c "[ $? -ne 0 ] && grep -q 'no expected outputs' '$T/e'"

# Output names from the model never write outside --output-dir.
python3 - "$T" <<'PY'
import sys, onnx
from onnx import helper, TensorProto
names = ["../escape", "/tmp/abs_" + sys.argv[1].replace("/", "_"), "sub/dir"]
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
nodes = [helper.make_node("Identity", ["x"], [n]) for n in names]
outs = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in names]
m = helper.make_model(helper.make_graph(nodes, "names", [x], outs), opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
onnx.save(m, sys.argv[1] + "/names.onnx")
clash = helper.make_graph([helper.make_node("Identity", ["x"], ["a/b"]), helper.make_node("Identity", ["x"], ["a_b"])],
                          "clash", [x], [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2]) for n in ("a/b", "a_b")])
onnx.save(helper.make_model(clash, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), sys.argv[1] + "/clash.onnx")
PY
python3 -c "import numpy as np; np.save('$T/x2.npy', np.ones(2, np.float32))"
mkdir -p "$T/od/inner"
"$BIN/onnx-run" "$T/names.onnx" --input x="$T/x2.npy" --output-dir "$T/od/inner" > "$T/o" 2> "$T/e"
check "output names with separators are written inside --output-dir" sh -c "[ $? -eq 0 ] && [ -f '$T/od/inner/.._escape.npy' ] && [ -f '$T/od/inner/sub_dir.npy' ] && [ \$(ls -A '$T/od/inner' | wc -l) -eq 3 ] && [ ! -e '$T/od/escape.npy' ] && [ ! -e '/tmp/abs_$(echo "$T" | tr / _).npy' ]"
"$BIN/onnx-run" "$T/clash.onnx" --input x="$T/x2.npy" --output-dir "$T/od2" > "$T/o" 2> "$T/e"
check "two outputs on one file are an error naming both" sh -c "[ $? -ne 0 ] && grep -q \"outputs 'a/b' and 'a_b'\" '$T/e' && [ ! -e '$T/od2' ]"

# Two nodes writing one value: a one-line error naming the node, not the last writer's value.
python3 - "$T" <<'PY'
import sys, onnx
from onnx import helper, TensorProto
x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2])
y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])
g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="first"), helper.make_node("Neg", ["x"], ["y"], name="second")],
                      "twice", [x], [y])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), sys.argv[1] + "/twice.onnx")
PY
"$BIN/onnx-run" "$T/twice.onnx" --input x="$T/x2.npy" > "$T/o" 2> "$T/e"
check "a value written by two nodes is a one-line error naming the second" sh -c "[ $? -ne 0 ] && [ \$(wc -l < '$T/e') -eq 1 ] && grep -q \"second\" '$T/e' && grep -q \"'y' is already defined\" '$T/e'"

# Loop's trip count is read exactly: M = INT64_MAX ran no iteration (it went
# through double); here the condition stops it after three.
python3 - "$T" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
body = helper.make_graph(
    [helper.make_node("Add", ["v_in", "one"], ["v_out"]), helper.make_node("Less", ["v_out", "three"], ["cond_out"])],
    "body",
    [helper.make_tensor_value_info("iter", TensorProto.INT64, []), helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
     helper.make_tensor_value_info("v_in", TensorProto.INT64, [])],
    [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []), helper.make_tensor_value_info("v_out", TensorProto.INT64, [])],
    [numpy_helper.from_array(np.array(1, np.int64), "one"), numpy_helper.from_array(np.array(3, np.int64), "three")])
g = helper.make_graph([helper.make_node("Loop", ["M", "cond", "v0"], ["v"], body=body)], "loop", [],
                      [helper.make_tensor_value_info("v", TensorProto.INT64, [])],
                      [numpy_helper.from_array(np.array(2**63 - 1, np.int64), "M"), numpy_helper.from_array(np.array(True), "cond"),
                       numpy_helper.from_array(np.array(0, np.int64), "v0")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), sys.argv[1] + "/loop.onnx")
PY
"$BIN/onnx-run" "$T/loop.onnx" --output-dir "$T/loop_out" > "$T/o" 2> "$T/e"
check "Loop with M = INT64_MAX runs until its condition stops it" python3 -c "import numpy as np; v = np.load('$T/loop_out/v.npy'); assert v == 3, v"

# A thread count OpenMP cannot create is a one-line error, not a crash.
for n in 100000 -3; do
  "$BIN/onnx-run" "$M/model.onnx" --test-data "$M/test_data_set_0" --threads $n > "$T/o" 2> "$T/e"
  check "onnx-run --threads $n is a one-line error" sh -c "[ $? -eq 1 ] && [ \$(wc -l < '$T/e') -eq 1 ] && grep -q 'threads = $n' '$T/e'"
done

# An If branch must yield the types it declares.
python3 - "$T" <<'PY'
import sys, numpy as np, onnx
from onnx import helper, TensorProto, numpy_helper
def branch(name, elem):
    return helper.make_graph([helper.make_node("Constant", [], ["r"], value=numpy_helper.from_array(np.array([1], np.int64)))],
                             name, [], [helper.make_tensor_value_info("r", elem, [1])])
g = helper.make_graph([helper.make_node("If", ["c"], ["y"], name="the_if", then_branch=branch("then", TensorProto.FLOAT),
                                        else_branch=branch("else", TensorProto.FLOAT))], "iftypes", [],
                      [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])], [numpy_helper.from_array(np.array(True), "c")])
onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8), sys.argv[1] + "/iftypes.onnx")
PY
"$BIN/onnx-run" "$T/iftypes.onnx" > "$T/o" 2> "$T/e"
check "an If branch yielding int64 where it declares float is a one-line error" sh -c "[ $? -ne 0 ] && [ \$(wc -l < '$T/e') -eq 1 ] && grep -q 'the_if' '$T/e' && grep -q 'is int64 but the subgraph declares float32' '$T/e'"

# Optimization levels: every level matches the reference outputs.
for level in none basic all; do
  "$BIN/onnx-run" "$M/model.onnx" --test-data "$M/test_data_set_0" --opt-level $level > "$T/o" 2> "$T/e"
  check "onnx-run --opt-level $level matches the reference" [ $? -eq 0 ]
done
"$BIN/onnx-run" "$M/model.onnx" --test-data "$M/test_data_set_0" --opt-level fast > "$T/o" 2> "$T/e"
check "onnx-run --opt-level fast is refused" sh -c "[ $? -ne 0 ] && grep -q 'opt-level' '$T/e'"

# The profiler: per op type, the slowest nodes, a Chrome trace.
"$BIN/onnx-bench" "$M/model.onnx" --iters 3 --warmup 1 --profile --profile-top 2 --profile-json "$T/trace.json" > "$T/o" 2> "$T/e"
check "onnx-bench --profile runs" [ $? -eq 0 ]
check "the profile counts the timed runs only" grep -q "^profile: 3 run(s)" "$T/o"
check "the profile lists op types and two top nodes" sh -c "grep -q '^per op type:' '$T/o' && grep -q '^top 2 nodes:' '$T/o'"
check "onnx-bench names the passes that fired" grep -q "^graph passes: " "$T/o"
check "the Chrome trace is JSON with one event per node and run" python3 -c "
import json; t = json.load(open('$T/trace.json'))
ev = t['traceEvents']; assert ev and all(e['ph'] == 'X' and e['dur'] >= 0 for e in ev), ev[:2]
assert len(ev) % 3 == 0, len(ev)"
"$BIN/onnx-bench" "$M/model.onnx" --iters 2 --warmup 0 --disable-pass no_such_pass > "$T/o" 2> "$T/e"
check "onnx-bench --disable-pass names an unknown pass" sh -c "[ $? -ne 0 ] && grep -q \"no graph pass 'no_such_pass'\" '$T/e'"
"$BIN/onnx-bench" "$M/model.onnx" --iters 2 --warmup 0 --opt-level none --json > "$T/o" 2> "$T/e"
check "onnx-bench --opt-level none runs no pass" python3 -c "
import json; r = json.load(open('$T/o')); assert r['opt_level'] == 'none' and r['passes'] == 'none fired', r"

# onnx-export --optimized: the passes' graph, checker-valid, same outputs.
"$BIN/onnx-import" "$M/model.onnx" -o "$T/opt_in.npz" > "$T/o" 2> "$T/e"
"$BIN/onnx-export" "$T/opt_in.npz" -o "$T/optimized.onnx" --optimized > "$T/o" 2> "$T/e"
check "onnx-export --optimized writes a checked model" sh -c "[ $? -eq 0 ] && [ -s '$T/optimized.onnx' ]"
"$BIN/onnx-run" "$T/optimized.onnx" --test-data "$M/test_data_set_0" > "$T/o" 2> "$T/e"
check "the optimized export matches the reference" [ $? -eq 0 ]

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

# ---- onnx-import / onnx-export: the round trip of the bundled model.
"$BIN/onnx-import" "$M/model.onnx" -o "$T/tiny.npz" --check-with "$M/test_data_set_0" > "$T/o" 2> "$T/e"
check "onnx-import --check-with matches the reference" sh -c "[ $? -eq 0 ] && grep -q 'outputs match' '$T/o'"
check "onnx-import summary lists ops and params" grep -q "params" "$T/o"
check "the native model is readable with numpy" python3 -c "
import numpy as np, json
z = np.load('$T/tiny.npz')
g = json.loads(z['graph.json'])
assert g['format'] == 'onyx-native' and g['inputs'][0]['name'] == 'x', g['inputs']
params = [n for n in g['nodes'] if n.get('kind') == 'param']
assert params and all(z[n['name']].shape == tuple(n['shape']) for n in params)
assert any(n.get('op') for n in g['nodes'])"
"$BIN/onnx-export" "$T/tiny.npz" -o "$T/tiny.onnx" --dynamic-axis x:0=batch > "$T/o" 2> "$T/e"
check "onnx-export writes a checked model" sh -c "[ $? -eq 0 ] && grep -q 'validated by' '$T/o' && grep -q 'opset 17' '$T/o'"
"$BIN/onnx-run" "$T/tiny.onnx" --test-data "$M/test_data_set_0" > "$T/o" 2> "$T/e"
check "the exported model matches the reference in Onyx" [ $? -eq 0 ]
check "the exported model runs in onnxruntime with another batch size" python3 -c "
import numpy as np, onnxruntime as ort, onnx
m = onnx.load('$T/tiny.onnx'); onnx.checker.check_model(m, full_check=True)
assert m.graph.input[0].type.tensor_type.shape.dim[0].dim_param == 'batch'
s = ort.InferenceSession('$T/tiny.onnx', providers=['CPUExecutionProvider'])
y = s.run(None, {'x': np.ones((7, 4), np.float32)})[0]
assert y.shape == (7, 3) and abs(y.sum() - 7) < 1e-4, y"
"$BIN/onnx-import" "$T/tiny.onnx" -o "$T/tiny2.npz" > /dev/null 2>&1 && "$BIN/onnx-export" "$T/tiny2.npz" -o "$T/tiny2.onnx" > /dev/null 2>&1
check "a second round trip gives the same file" cmp -s "$T/tiny.onnx" "$T/tiny2.onnx"

# Bad native models: one line naming the file, exit 1, the existing output untouched.
echo precious > "$T/keep.onnx"
head -c 300 "$T/tiny.npz" > "$T/trunc.npz"
python3 - "$T" <<'PY'
import json, sys, zipfile
t = sys.argv[1]
src = zipfile.ZipFile(f"{t}/tiny.npz")
g = json.loads(src.read("graph.json"))
def write(name, graph=None, replace=None):
    with zipfile.ZipFile(f"{t}/{name}.npz", "w") as z:
        for n in src.namelist():
            if n == "graph.json":
                z.writestr(n, json.dumps(graph) if graph is not None else "{not json")
            elif replace and n == replace[0]:
                z.writestr(n, replace[1])
            else:
                z.writestr(n, src.read(n))
import copy, io, numpy as np
bad = copy.deepcopy(g); [n for n in bad["nodes"] if n.get("op")][0]["op"] = "no_such_op"
write("unknown_op", bad)
write("bad_json")
p = [n for n in g["nodes"] if n.get("kind") == "param"][0]
buf = io.BytesIO(); np.save(buf, np.zeros([d + 1 for d in p["shape"]], np.float32))
write("bad_shape", g, (p["name"] + ".npy", buf.getvalue()))
tri = {"format": "onyx-native", "version": 1,
       "inputs": [{"name": "x", "type": "float32", "shape": [3, 3]}],
       "nodes": [{"name": "y", "op": "trilu", "inputs": ["x"], "attrs": {"upper": 1, "k": 0},
                  "type": "float32", "shape": [3, 3]}],
       "outputs": [{"name": "y", "node": "y"}]}
with zipfile.ZipFile(f"{t}/trilu.npz", "w") as z:
    z.writestr("graph.json", json.dumps(tri))
fixed = {"format": "onyx-native", "version": 1,
         "inputs": [{"name": "x", "type": "float32", "shape": [2, 3]}],
         "nodes": [{"name": "y", "op": "reshape", "inputs": ["x"], "attrs": {"shape": [6]},
                    "type": "float32", "shape": [6]}],
         "outputs": [{"name": "y", "node": "y"}]}
with zipfile.ZipFile(f"{t}/fixed.npz", "w") as z:
    z.writestr("graph.json", json.dumps(fixed))
PY
for f in trunc unknown_op bad_json bad_shape; do
  "$BIN/onnx-export" "$T/$f.npz" -o "$T/keep.onnx" > "$T/o" 2> "$T/e"; rc=$?
  check "onnx-export $f: exit 1, one line naming the file" sh -c "[ $rc -eq 1 ] && [ \$(wc -l < '$T/e') -eq 1 ] && grep -q '$f.npz' '$T/e'"
  check "onnx-export $f: the existing output is untouched" grep -qx precious "$T/keep.onnx"
done
check "unknown op is named" grep -q "unknown op 'no_such_op'" <("$BIN/onnx-export" "$T/unknown_op.npz" -o "$T/keep.onnx" 2>&1)
check "a param of the wrong shape is named" grep -q "contradicts\|but the graph says" <("$BIN/onnx-export" "$T/bad_shape.npz" -o "$T/keep.onnx" 2>&1)
"$BIN/onnx-export" "$T/trilu.npz" -o "$T/keep.onnx" --opset 8 > "$T/o" 2> "$T/e"; rc=$?
check "a node with no ONNX form at the opset is refused naming node and op" sh -c "[ $rc -eq 1 ] && [ \$(wc -l < '$T/e') -eq 1 ] && grep -q \"node 'y' (trilu, opset 8)\" '$T/e' && grep -qx precious '$T/keep.onnx'"
"$BIN/onnx-export" "$T/trilu.npz" -o "$T/tri.onnx" > "$T/o" 2> "$T/e"
check "a hand-written graph.json exports at the default opset" sh -c "[ $? -eq 0 ] && grep -q 'opset 17' '$T/o'"
echo precious > "$T/keep.onnx"
"$BIN/onnx-import" "$T/trunc.onnx" -o "$T/keep.onnx" > "$T/o" 2> "$T/e"; rc=$?
check "onnx-import of a truncated model: exit 1, output untouched" sh -c "[ $rc -eq 1 ] && grep -qx precious '$T/keep.onnx'"

"$BIN/onnx-export" "$T/trilu.npz" -o "$T/tri21.onnx" --opset 21 > "$T/o" 2> "$T/e"
check "above libonnx's opsets, python's onnx checker validates" sh -c "[ $? -eq 0 ] && grep -q 'opset 21' '$T/o' && grep -q 'python onnx checker' '$T/o'"
"$BIN/onnx-export" "$T/tiny.npz" -o "$T/ext.onnx" --external-data-threshold 16 > "$T/o" 2> "$T/e"; rc=$?
first_data=$(ls "$T"/ext.onnx.*.data 2> /dev/null)
check "large initializers go to external data named by its CRC-32" sh -c "[ $rc -eq 0 ] && [ ! -e '$T/ext.onnx.data' ] && echo '$first_data' | grep -Eq '/ext[.]onnx[.][0-9a-f]{8}[.]data\$' && [ -s '$first_data' ]"
"$BIN/onnx-run" "$T/ext.onnx" --test-data "$M/test_data_set_0" > "$T/o" 2> "$T/e"
check "the model with external data runs and matches" [ $? -eq 0 ]
"$BIN/onnx-export" "$T/tiny.npz" -o "$T/ext.onnx" --external-data-threshold 16 --opset 18 > "$T/o" 2> "$T/e"
check "an export over a model with the same data keeps one data file" sh -c "[ $? -eq 0 ] && [ \$(ls '$T'/ext.onnx.*.data | wc -l) -eq 1 ]"
"$BIN/onnx-export" "$T/tiny.npz" -o "$T/ext.onnx" --external-data-threshold 100000 > "$T/o" 2> "$T/e"
check "an export without external data removes the old model's data file" sh -c "[ $? -eq 0 ] && [ ! -e '$first_data' ]"
"$BIN/onnx-run" "$T/ext.onnx" --test-data "$M/test_data_set_0" > "$T/o" 2> "$T/e"
check "the re-exported model runs and matches" [ $? -eq 0 ]

"$BIN/onnx-export" "$T/fixed.npz" -o "$T/fixed.onnx" --dynamic-axis x:0=batch > "$T/o" 2> "$T/e"; rc=$?
check "a dynamic axis the graph holds fixed is warned about" sh -c "[ $rc -eq 0 ] && grep -q 'warning: .*does not run with its symbolic dims' '$T/e'"
"$BIN/onnx-export" "$T/tiny.npz" -o "$T/tiny3.onnx" --dynamic-axis x:0=batch > "$T/o" 2> "$T/e"
check "a truly dynamic axis gives no warning" sh -c "! grep -q warning '$T/e'"

# Graph growth from one node is bounded: a Loop of 10^6 trips is a one-line
# error naming the limit (it built 3.5 GB in 10 s), an LRN of size 10^6 runs.
python3 - "$T" <<'PY'
import sys, numpy as np, onnx
from onnx import helper as h, TensorProto as P
t = sys.argv[1]
body = h.make_graph([h.make_node("Identity", ["c_in"], ["c_out"]), h.make_node("Add", ["v_in", "one"], ["v_out"])],
                    "body", [h.make_tensor_value_info("i", P.INT64, []), h.make_tensor_value_info("c_in", P.BOOL, []),
                             h.make_tensor_value_info("v_in", P.FLOAT, [1])],
                    [h.make_tensor_value_info("c_out", P.BOOL, []), h.make_tensor_value_info("v_out", P.FLOAT, [1])],
                    [h.make_tensor("one", P.FLOAT, [1], [1.0])])
g = h.make_graph([h.make_node("Loop", ["M", "", "v0"], ["v"], body=body)], "loop",
                 [h.make_tensor_value_info("v0", P.FLOAT, [1])], [h.make_tensor_value_info("v", P.FLOAT, [1])],
                 [h.make_tensor("M", P.INT64, [], [10**6])])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8), t + "/loop.onnx")
g = h.make_graph([h.make_node("LRN", ["x"], ["y"], size=10**6)], "lrn",
                 [h.make_tensor_value_info("x", P.FLOAT, [1, 3, 2, 2])], [h.make_tensor_value_info("y", P.FLOAT, [1, 3, 2, 2])])
onnx.save(h.make_model(g, opset_imports=[h.make_opsetid("", 17)], ir_version=8), t + "/lrn.onnx")
np.save(t + "/v0.npy", np.zeros(1, np.float32))
np.save(t + "/x4.npy", np.ones((1, 3, 2, 2), np.float32))
PY
timeout 120 "$BIN/onnx-run" "$T/loop.onnx" --input v0="$T/v0.npy" > "$T/o" 2> "$T/e"; rc=$?
check "a Loop of 10^6 trips: a one-line error naming the unrolling limit" sh -c "[ $rc -eq 1 ] && [ \$(wc -l < '$T/e') -eq 1 ] && grep -q 'unrolling .* iterations built more than 1048576 nodes' '$T/e'"
timeout 60 "$BIN/onnx-run" "$T/lrn.onnx" --input x="$T/x4.npy" > "$T/o" 2> "$T/e"
check "an LRN of size 10^6 runs" sh -c "[ $? -eq 0 ] && grep -q 'y: float32 1x3x2x2' '$T/o'"

echo "$fails failed"
[ $fails -eq 0 ]
