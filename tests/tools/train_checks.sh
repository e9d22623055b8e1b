#!/usr/bin/env bash
# End-to-end checks of onnx-train: fine-tuning the bundled models, the
# exported model in onnxruntime, checkpoints that survive SIGKILL, and bad
# input (missing keys, labels out of range, wrong shapes, NaN loss, damaged
# checkpoints, changed settings on resume).
#   train_checks.sh BIN_DIR SOURCE_DIR
set -uo pipefail
BIN=$1; SRC=$2
M=$SRC/models/onnx/tiny_mlp
CNN=$SRC/models/onnx/tiny_cnn
DATA=$SRC/models/data
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
fails=0
check() {  # check NAME COND...
  local name=$1; shift
  if "$@"; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}
python3 -c "import numpy as np; np.save('$T/x.npy', np.ones((2,4), np.float32))"

# ---- tiny_mlp: fine-tune, export, run it elsewhere.
python3 - "$T" <<'PY'
import sys, numpy as np
t = sys.argv[1]
rng = np.random.default_rng(0)
x = rng.normal(size=(96, 4)).astype(np.float32)
y = (x[:, 0] > 0).astype(np.int64) + (x[:, 1] > 0.5).astype(np.int64)
onehot = np.eye(3, dtype=np.float32)[y]
np.savez(f"{t}/train.npz", x=x[:64], y=y[:64], yoh=onehot[:64])
np.savez(f"{t}/valid.npz", x=x[64:], y=y[64:], yoh=onehot[64:])
bad = y[:64].copy(); bad[5] = 7
np.savez(f"{t}/badlabels.npz", x=x[:64], y=bad)
PY
"$BIN/onnx-train" "$M/model.onnx" --data "$T/train.npz" --valid "$T/valid.npz" --input x=x --target yoh --output probs \
  --loss mse --lr 0.05 --epochs 5 --batch-size 16 -o "$T/tuned.onnx" > "$T/o" 2> "$T/e"
check "onnx-train runs and writes the model" sh -c "[ $? -eq 0 ] && [ -s '$T/tuned.onnx' ] && grep -q 'valid loss' '$T/o'"
check "the training loss goes down" python3 -c "
import re
l = [float(m) for m in re.findall(r'train loss ([0-9.e+-]+)', open('$T/o').read())]
assert len(l) == 5 and l[-1] < 0.5 * l[0], l"
"$BIN/onnx-run" "$T/tuned.onnx" --input x="$T/x.npy" --output-dir "$T/tuned_out" > /dev/null 2>&1
check "the trained model runs in onnxruntime with Onyx's outputs" python3 -c "
import numpy as np, onnx, onnxruntime as ort
onnx.checker.check_model(onnx.load('$T/tuned.onnx'), full_check=True)
x = np.load('$T/x.npy')
s = ort.InferenceSession('$T/tuned.onnx', providers=['CPUExecutionProvider'])
got = s.run(None, {'x': x})[0]
want = np.load('$T/tuned_out/probs.npy')
assert np.allclose(got, want, rtol=1e-4, atol=1e-6), abs(got - want).max()
orig = ort.InferenceSession('$M/model.onnx', providers=['CPUExecutionProvider']).run(None, {'x': x})[0]
assert not np.allclose(orig, got), 'training changed nothing'"
"$BIN/onnx-train" "$M/model.onnx" --data "$T/train.npz" --input x=nosuch --target yoh --output probs -o "$T/t2.onnx" > "$T/o" 2> "$T/e"; rc=$?
check "onnx-train: a missing data key is one line naming it" sh -c "[ $rc -eq 1 ] && [ \$(wc -l < '$T/e') -eq 1 ] && grep -q \"no array 'nosuch'\" '$T/e' && [ ! -e '$T/t2.onnx' ]"
"$BIN/onnx-train" "$M/model.onnx" --data "$T/badlabels.npz" --input x=x --target y --output probs --loss ce -o "$T/t2.onnx" > "$T/o" 2> "$T/e"; rc=$?
check "onnx-train: a label out of range is named" sh -c "[ $rc -eq 1 ] && grep -q 'label 7 at index 5 is out of range for 3 classes' '$T/e'"
"$BIN/onnx-train" "$M/model.onnx" --data "$T/train.npz" --input x=x --target y --output probs --loss mse -o "$T/t2.onnx" > "$T/o" 2> "$T/e"; rc=$?
check "onnx-train: a loss on a target of the wrong shape is an error" sh -c "[ $rc -eq 1 ] && grep -q 'mse' '$T/e' && grep -q 'probs' '$T/e'"

# A quantized model (tiny_mlp through onnxruntime's quantize_dynamic) is run, not trained.
python3 -c "
from onnxruntime.quantization import quantize_dynamic, QuantType
quantize_dynamic('$M/model.onnx', '$T/quantized.onnx', weight_type=QuantType.QInt8)" 2> /dev/null
"$BIN/onnx-train" "$T/quantized.onnx" --data "$T/train.npz" --input x=x --target y --output probs --loss ce -o "$T/t3.onnx" > "$T/o" 2> "$T/e"; rc=$?
check "onnx-train: a quantized model is one line naming its first quantized op" sh -c "[ $rc -eq 1 ] && [ \$(wc -l < '$T/e') -eq 1 ] && grep -q '(DynamicQuantizeLinear) is quantized: quantized models are run, not trained' '$T/e' && [ ! -e '$T/t3.onnx' ]"

# ---- The bundled CNN (Conv, BatchNormalization, Dropout, Gemm) on the
# bundled "bars" dataset: the stated accuracy, and onnxruntime agrees with
# Onyx on the trained model (running statistics included).
"$BIN/onnx-train" "$CNN/model.onnx" --data "$DATA/bars_train.npz" --valid "$DATA/bars_valid.npz" --input x=x \
  --target y --output logits --loss ce --optimizer adam --lr 0.02 --epochs 8 --batch-size 32 -o "$T/cnn.onnx" \
  --step-log "$T/f32.log" > "$T/o" 2> "$T/e"; rc=$?
cat "$T/o"
check "onnx-train fine-tunes tiny_cnn on bars" [ $rc -eq 0 ]
check "tiny_cnn reaches 95% validation accuracy on bars" python3 -c "
import re
acc = [float(a) for a in re.findall(r'valid accuracy ([0-9.e+-]+)', open('$T/o').read())]
assert len(acc) == 8 and acc[-1] >= 0.95, acc"
# The same run with --precision bf16: the loss curve follows float32's; on
# a CPU without bfloat16 instructions it says so and is float32's exactly.
"$BIN/onnx-train" "$CNN/model.onnx" --data "$DATA/bars_train.npz" --valid "$DATA/bars_valid.npz" --input x=x \
  --target y --output logits --loss ce --optimizer adam --lr 0.02 --epochs 8 --batch-size 32 -o "$T/cnn_bf16.onnx" \
  --step-log "$T/bf16.log" --precision bf16 > "$T/o3" 2> "$T/e3"; rc=$?
cat "$T/o3" "$T/e3"
check "onnx-train --precision bf16: its loss curve follows float32's, 95% validation accuracy" python3 -c "
import re, numpy as np
f32 = np.loadtxt('$T/f32.log')[:, 2]; bf = np.loadtxt('$T/bf16.log')[:, 2]
acc = [float(a) for a in re.findall(r'valid accuracy ([0-9.e+-]+)', open('$T/o3').read())]
assert $rc == 0 and len(bf) == len(f32) and len(acc) == 8 and acc[-1] >= 0.95, ($rc, len(bf), len(f32), acc)
fallback = 'no bfloat16 instructions' in open('$T/e3').read()
if fallback:
    assert (bf == f32).all(), 'the float32 fallback differs from float32'
else:
    assert (bf != f32).any(), 'bf16 gave float32 bits'
    # Step by step within 5% early on; the last epoch's mean within 10%.
    assert np.all(np.abs(bf[:10] - f32[:10]) <= 0.05 * np.abs(f32[:10])), (bf[:10], f32[:10])
    n = len(f32) // 8
    assert abs(bf[-n:].mean() - f32[-n:].mean()) <= 0.1 * f32[-n:].mean() + 0.01, (bf[-n:].mean(), f32[-n:].mean())
print('bf16 fallback' if fallback else 'bf16', 'final-epoch mean loss', bf[-(len(bf)//8):].mean(), 'float32', f32[-(len(f32)//8):].mean())"
"$BIN/onnx-train" "$CNN/model.onnx" --data "$DATA/bars_train.npz" --input x=x --target y --output logits \
  --precision fp8 -o "$T/t4.onnx" > "$T/o" 2> "$T/e"; rc=$?
check "onnx-train: an unknown --precision is one line naming it" sh -c "[ $rc -eq 1 ] && [ \$(wc -l < '$T/e') -eq 1 ] && grep -q \"\-\-precision: unknown precision 'fp8'; use float32 or bf16\" '$T/e'"
"$BIN/onnx-train" "$CNN/model.onnx" --data "$DATA/bars_train.npz" --input x=x --target y --output logits \
  --threads -1 -o "$T/t5.onnx" > "$T/o" 2> "$T/e"; rc=$?
check "onnx-train: --threads -1 is one line naming it" sh -c "[ $rc -eq 1 ] && [ \$(wc -l < '$T/e') -eq 1 ] && grep -q -- '--threads = -1: must be 0 (the default) to 1024' '$T/e' && [ ! -e '$T/t5.onnx' ]"
python3 -c "
import numpy as np
np.save('$T/bars_x.npy', np.load('$DATA/bars_valid.npz')['x'].astype(np.float32))"
"$BIN/onnx-run" "$T/cnn.onnx" --input x="$T/bars_x.npy" --output-dir "$T/cnn_out" > /dev/null 2>&1
check "onnxruntime runs the trained CNN with Onyx's outputs and running statistics" python3 -c "
import numpy as np, onnx, onnxruntime as ort
from onnx import numpy_helper
m = onnx.load('$T/cnn.onnx')
onnx.checker.check_model(m, full_check=True)
init = {i.name: numpy_helper.to_array(i) for i in m.graph.initializer}
assert not np.allclose(init['bn.running_mean'], 0) and not np.allclose(init['bn.running_var'], 1), 'running stats not updated'
x = np.load('$T/bars_x.npy')
got = ort.InferenceSession('$T/cnn.onnx', providers=['CPUExecutionProvider']).run(None, {'x': x})[0]
want = np.load('$T/cnn_out/logits.npy')
np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
y = np.load('$DATA/bars_valid.npz')['y']
assert (got.argmax(1) == y).mean() >= 0.95"

# ---- Gradient accumulation: 4 micro-batches of 4 make the step of one batch of 16.
for run in "16 1" "4 4"; do
  set -- $run
  "$BIN/onnx-train" "$M/model.onnx" --data "$T/train.npz" --input x=x --target yoh --output probs --loss mse \
    --optimizer sgd --lr 0.1 --epochs 2 --batch-size $1 --accumulate $2 --no-shuffle --step-log "$T/steps_$1x$2" \
    -o "$T/acc_$1x$2.onnx" > /dev/null 2>&1
done
check "--accumulate 4 x batch 4 gives the loss curve and params of batch 16" python3 -c "
import numpy as np, onnx
from onnx import numpy_helper
a, b = (np.loadtxt('$T/steps_' + r) for r in ('16x1', '4x4'))
assert a.shape == b.shape == (8, 4), (a.shape, b.shape)
np.testing.assert_allclose(b[:, 2], a[:, 2], rtol=1e-5)
pa, pb = ({i.name: numpy_helper.to_array(i) for i in onnx.load('$T/acc_' + r + '.onnx').graph.initializer} for r in ('16x1', '4x4'))
for k in pa: np.testing.assert_allclose(pb[k], pa[k], rtol=1e-5, atol=1e-6, err_msg=k)
assert a[-1, 2] < a[0, 2]"

# ---- On a terminal: a progress bar with the loss and throughput (script(1) gives it a pty).
script -qec "'$BIN/onnx-train' '$CNN/model.onnx' --data '$DATA/bars_train.npz' --input x=x --target y --output logits \
  --loss ce --epochs 1 --batch-size 32 -o '$T/tty.onnx'" /dev/null > "$T/tty" 2>&1
check "on a terminal: a progress bar with loss and samples/s" python3 -c "
t = open('$T/tty', errors='replace', newline='').read()
assert '\r' in t and '[========================] 512/512 loss ' in t and 'samples/s' in t, repr(t[:400])"

# ---- Checkpoints: a run killed (SIGKILL) several times and resumed ends
# with the same params, bit for bit, as an uninterrupted run.
A0=("$M/model.onnx" --data "$T/train.npz" --input x=x --target yoh --output probs --loss mse --optimizer adam
    --lr 0.01 --epochs 2000 --seed 3)
A=("${A0[@]}" --batch-size 5)
"$BIN/onnx-train" "${A[@]}" -o "$T/full.onnx" > /dev/null 2>&1
CK=$T/ck
killed=0
for cycle in 1 2 3; do
  "$BIN/onnx-train" "${A[@]}" -o "$T/res.onnx" --checkpoint-dir "$CK" --checkpoint-every 7 --resume \
    > "$T/k$cycle" 2>&1 & pid=$!
  before=$(stat -c %.9Y "$CK/checkpoint.npz" 2>/dev/null || echo none)
  for _ in $(seq 500); do  # until this run has written a checkpoint of its own
    now=$(stat -c %.9Y "$CK/checkpoint.npz" 2>/dev/null || echo none)
    [ -e "$CK/checkpoint.npz" ] && grep -q "resumed\|no checkpoint" "$T/k$cycle" && [ "$now" != "$before" ] && break
    sleep 0.01
  done
  kill -9 $pid 2>/dev/null; wait $pid; [ $? -eq 137 ] && killed=$((killed + 1))
done
check "onnx-train was killed mid-run 3 times" sh -c "[ $killed -eq 3 ] && [ ! -e '$T/res.onnx' ]"
head -c 1000 "$CK/checkpoint.npz" > "$CK/checkpoint.npz.tmp.99999"  # as if killed while writing
"$BIN/onnx-train" "${A[@]}" -o "$T/res.onnx" --checkpoint-dir "$CK" --checkpoint-every 7 --resume > "$T/o" 2> "$T/e"
check "the resumed run finishes" sh -c "[ $? -eq 0 ] && grep -q 'resumed from' '$T/o'"
check "a temporary file left by a killed write is removed" sh -c "[ ! -e '$CK/checkpoint.npz.tmp.99999' ] && grep -q 'interrupted write' '$T/e'"
check "killed and resumed: the same params as an uninterrupted run, bit for bit" cmp "$T/full.onnx" "$T/res.onnx"

# ---- Bad checkpoints and settings.
"$BIN/onnx-train" "${A0[@]}" --batch-size 6 -o "$T/r2.onnx" --checkpoint-dir "$CK" --resume > "$T/o" 2> "$T/e"; rc=$?
check "resume with another batch size is refused, naming it" sh -c "[ $rc -eq 1 ] && grep -q 'batch_size 5, this run has 6' '$T/e' && [ ! -e '$T/r2.onnx' ]"
mkdir -p "$T/bad"; head -c 3000 "$CK/checkpoint.npz" > "$T/bad/checkpoint.npz"
"$BIN/onnx-train" "${A[@]}" -o "$T/r2.onnx" --checkpoint-dir "$T/bad" --resume > "$T/o" 2> "$T/e"; rc=$?
check "a truncated checkpoint is one line naming the file" sh -c "[ $rc -eq 1 ] && [ \$(wc -l < '$T/e') -eq 1 ] && grep -q 'bad/checkpoint.npz' '$T/e'"

# ---- NaN loss: stops before updating, names the step, keeps the last good checkpoint.
python3 - "$T" <<'PY'
import sys, numpy as np
t = sys.argv[1]
d = dict(np.load(f"{t}/train.npz"))
d["x"] = d["x"].copy(); d["x"][9, 2] = np.nan  # sample 9 is in step 3 with batch 4, file order
np.savez(f"{t}/nan.npz", **d)
PY
"$BIN/onnx-train" "$M/model.onnx" --data "$T/nan.npz" --input x=x --target yoh --output probs --loss mse \
  --no-shuffle --batch-size 4 --checkpoint-dir "$T/ckn" --checkpoint-every 1 -o "$T/n.onnx" > "$T/o" 2> "$T/e"; rc=$?
check "NaN loss: stops with the step and the last good checkpoint" sh -c "[ $rc -eq 1 ] && [ ! -e '$T/n.onnx' ] && grep -q 'the loss is nan at step 3 (epoch 1); stopped before updating; the last good checkpoint is .*checkpoint.npz (step 2)' '$T/e'"
check "NaN loss: the kept checkpoint is step 2 with finite params" python3 -c "
import json, numpy as np
z = np.load('$T/ckn/checkpoint.npz')
assert json.loads(z['state.json'])['step'] == 2
assert all(np.isfinite(z[k]).all() for k in z.files if k.startswith('param/'))"

# ---- --device: a GPU this machine cannot use is a one-line error naming it
# (with a GPU, the GPU checks in tests/unit/test_cuda_device.cpp cover training there).
if nvidia-smi -L > /dev/null 2>&1; then
  echo "skip --device gpu0 error check: this machine has a GPU"
else
  "$BIN/onnx-train" "$M/model.onnx" --data "$T/train.npz" --input x=x --target yoh --output probs --loss mse \
    --device gpu0 -o "$T/gpu.onnx" > "$T/o" 2> "$T/e"; rc=$?
  check "--device gpu0 without a usable GPU: exit 1, one line naming gpu0, no model" \
    sh -c "[ $rc -eq 1 ] && [ \$(wc -l < '$T/e') -eq 1 ] && grep -q 'gpu0' '$T/e' && [ ! -e '$T/gpu.onnx' ]"
fi
"$BIN/onnx-train" "$M/model.onnx" --data "$T/train.npz" --input x=x --target yoh --output probs --loss mse \
  --device cpu --lr 0.05 --epochs 5 --batch-size 16 -o "$T/cpu.onnx" > "$T/o2" 2> "$T/e"
check "--device cpu trains as the default does" sh -c "[ $? -eq 0 ] && cmp -s '$T/cpu.onnx' '$T/tuned.onnx'"
# The tiny MLP has no region large enough to split: one thread gives the same bits.
"$BIN/onnx-train" "$M/model.onnx" --data "$T/train.npz" --input x=x --target yoh --output probs --loss mse \
  --threads 1 --lr 0.05 --epochs 5 --batch-size 16 -o "$T/one.onnx" > "$T/o2" 2> "$T/e"
check "--threads 1 trains as the default does" sh -c "[ $? -eq 0 ] && cmp -s '$T/one.onnx' '$T/tuned.onnx'"

echo "$fails failed"
[ $fails -eq 0 ]
