#!/usr/bin/env bash
# Set-up and the two things a new user runs (see README.md):
#   tools/dev.sh demo   install deps, build, run the bundled example end to end
#   tools/dev.sh test   install deps, build, run the whole test suite (ctest)
#   tools/dev.sh sanitize  the tools built with ASan + UBSan (build-asan, CUDA
#                       off) run ONNX's node tests, the CLI checks, the fuzz
#                       regressions and a fixed fuzz run (FUZZ_RUNS, default
#                       600); then the libFuzzer target (below, FUZZ_EXECS);
#                       then the server tests under TSan (build-tsan); any
#                       sanitizer report fails it (docs/security.md)
#   tools/dev.sh fuzz   the libFuzzer target (tests/fuzz/fuzz_model.cpp) built
#                       with clang, ASan + UBSan (build-fuzz), on a seed corpus
#                       of ONNX's node tests and the bundled models, for
#                       FUZZ_EXECS inputs (default 60000, about 2.5 minutes); a
#                       finding fails it and is kept in build-fuzz/findings
#                       (sanitize runs it too)
#   tools/dev.sh bench [ARGS]  install deps (+ torchvision), build, run
#                       tools/bench_vs_ort.py ARGS (docs/performance.md)
# BUILD_DIR (default: build) and JOBS (default: nproc) can be overridden.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}

deps() {
  local pkgs="build-essential cmake ccache pkgconf libopenblas-openmp-dev libdnnl-dev libsleef-dev libomp-dev zlib1g-dev libgtest-dev libgmock-dev \
libjpeg62-turbo-dev libpng-dev libtiff-dev libwebp-dev libopenjp2-7-dev \
libcli11-dev libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata graphviz python3 python3-pip"
  local missing=""
  for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    echo "installing:$missing"
    local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
  fi
  # From PyPI, for cross-checks only: numpy (reads our .npz), onnx and
  # onnxruntime (reference outputs), pytest; torch and onnxscript (its ONNX
  # exporter) for the training parity tests against PyTorch. nanobind builds
  # the Python package (python/, docs/python.md) beside the C++ build.
  python3 -c "import numpy, onnx, onnxruntime, pytest" 2>/dev/null ||
    python3 -m pip install -q "numpy<3" "onnx==1.23.2" "onnxruntime==1.31.1" pytest
  # scikit-build-core: the test suite's `pip install .` (no build isolation);
  # build and auditwheel: its wheel and the check of the libraries it needs.
  python3 -c "import nanobind, scikit_build_core, build, auditwheel" 2>/dev/null ||
    python3 -m pip install -q "nanobind==3.1.0" "scikit-build-core==1.1.2" "build==1.3.0" "auditwheel==6.8.2"
  if [ "${1:-}" = test ] || [ "${1:-}" = bench ]; then
    python3 -c "import torch, onnxscript" 2>/dev/null ||
      python3 -m pip install -q "torch==2.15.0" "onnxscript==0.7.2"
    # Classic-ML models made by the real converters (ai.onnx.ml tests).
    # xgboost-cpu: XGBoost without its CUDA libraries (5 MB instead of hundreds).
    python3 -c "import sklearn, skl2onnx, onnxmltools, lightgbm, xgboost" 2>/dev/null ||
      python3 -m pip install -q "scikit-learn==1.9.1" "skl2onnx==1.20.0" "onnxmltools==1.16.0" "lightgbm==4.7.0" \
        "xgboost-cpu==3.2.0"
  fi
  # torchvision's model definitions: the benchmark's CNNs
  # (tools/bench_models.py) and the quantized ResNet-18/MobileNetV2 of
  # tests/python/quantized. No torchvision release declares torch 2.15 as its
  # match, so 0.29.2 goes in without its dependencies (its model definitions
  # work with torch 2.15), plus the one it imports at load time, pillow.
  if [ "${1:-}" = test ] || [ "${1:-}" = bench ]; then
    python3 -c "import torchvision" 2>/dev/null || {
      python3 -m pip install -q "pillow==13.0.0"
      python3 -m pip install -q --no-deps "torchvision==0.29.2"
    }
  fi
  node_tests
}

# The node tests of the newest onnx wheel that still ships them (1.22.0; 1.23
# dropped them), pinned, unpacked once into the build folder.
ONNX_NODE_VERSION=1.22.0
ONNX_NODE_DIR="$BUILD_DIR/onnx-$ONNX_NODE_VERSION/onnx/backend/test/data/node"
node_tests() {
  [ -d "$ONNX_NODE_DIR" ] && return
  local tmp; tmp=$(mktemp -d)
  python3 -m pip download -q --no-deps --only-binary :all: "onnx==$ONNX_NODE_VERSION" -d "$tmp"
  mkdir -p "$BUILD_DIR/onnx-$ONNX_NODE_VERSION"
  python3 -m zipfile -e "$tmp"/onnx-*.whl "$tmp/whl"
  mkdir -p "$(dirname "$ONNX_NODE_DIR")"
  mv "$tmp/whl/onnx/backend/test/data/node" "$ONNX_NODE_DIR"
  rm -rf "$tmp"
}

# The libFuzzer target: clang's ASan + UBSan over libonyx with the coverage
# instrumentation libFuzzer steers by (fuzzer-no-link), the target linked with
# -fsanitize=fuzzer. The budget is a count of inputs (FUZZ_EXECS, 60000:
# about 2.5 minutes here), seed 1 from the seeds alone; FUZZ_SECONDS (600)
# caps it. Longer runs: FUZZ_EXECS=-1 FUZZ_SECONDS=3600 FUZZ_SEED=$RANDOM.
fuzz() {
  local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
  dpkg -s clang libclang-rt-14-dev >/dev/null 2>&1 || {
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq clang libclang-rt-14-dev >/dev/null
  }
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
  export CCACHE_NOHASHDIR=1
  local dir=${FUZZ_DIR:-build-fuzz}
  CC=clang CXX=clang++ cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
    -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" -DONYX_SANITIZE=fuzzer-no-link,address,undefined \
    -DONYX_CUDA=OFF -DONYX_PYTHON=OFF -DONYX_BUILD_TESTS=OFF -DONYX_FUZZ=ON >/dev/null
  cmake --build "$dir" -j "$JOBS" --target onyx_fuzz_model
  python3 tools/fuzz_corpus.py --out "$dir/seeds" "$ONNX_NODE_DIR" models/onnx
  mkdir -p "$dir/corpus" "$dir/findings"
  # What it found before (tests/regress/libfuzzer), then every seed, each run
  # once: the same inputs every time, and any finding fails.
  export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # Their artifacts (crash-, slow-unit-) go to $dir/findings, never into the
  # checkout.
  "$dir/onyx_fuzz_model" tests/regress/libfuzzer/* -malloc_limit_mb=1024 -rss_limit_mb=4096 -timeout=60 \
    -artifact_prefix="$dir/findings/"
  "$dir/onyx_fuzz_model" "$dir/seeds" -runs=0 -malloc_limit_mb=1024 -rss_limit_mb=4096 -timeout=60 -print_funcs=0 \
    -artifact_prefix="$dir/findings/"
  # Then FUZZ_EXECS mutated inputs. The run's own limit on a tensor is 16 MiB
  # (fuzz_model.cpp); libFuzzer's malloc limit catches any single allocation
  # beyond 1 GiB, its RSS limit a run that grows past 4 GiB, its timeout a
  # run over 60 s. It starts from the seeds and an empty corpus (FUZZ_CORPUS,
  # default $dir/corpus-run, emptied first) with seed FUZZ_SEED, and runs
  # with address-space randomization off (setarch -R): with it on, hash
  # tables keyed by pointers lay out differently in every process and
  # libFuzzer's coverage feedback follows (the seeds' coverage itself
  # differed between runs). Off, the seeds give the same coverage every time
  # and two runs of 3,000 inputs kept the same 265 units, but runs of 5,000
  # still part ways (23,076 and 23,174 edges): the mutated inputs are not
  # exactly repeatable. A finding fails the job all the same (FUZZ_STRICT=0
  # only reports it): each is a real fault, and its input is printed in
  # base64 below so that it outlives the machine.
  local strict=${FUZZ_STRICT:-1}
  local corpus=${FUZZ_CORPUS:-$dir/corpus-run}
  [ -n "${FUZZ_CORPUS:-}" ] || rm -rf "$corpus"
  mkdir -p "$corpus"
  local norand=()
  if setarch "$(uname -m)" -R true 2>/dev/null; then
    norand=(setarch "$(uname -m)" -R)
  else
    echo "fuzz: setarch -R is not allowed here: address-space randomization stays on, so this run is not repeatable"
  fi
  local rc=0
  "${norand[@]}" "$dir/onyx_fuzz_model" "$corpus" "$dir/seeds" -runs="${FUZZ_EXECS:-60000}" \
    -max_total_time="${FUZZ_SECONDS:-600}" -seed="${FUZZ_SEED:-1}" -timeout=60 -rss_limit_mb=4096 \
    -malloc_limit_mb=1024 -max_len=1048576 -artifact_prefix="$dir/findings/" -print_final_stats=1 -print_funcs=0 || rc=$?
  if [ "$rc" != 0 ]; then
    echo "libFuzzer found an input (rc $rc), kept in $dir/findings: $(ls "$dir/findings" | tr '\n' ' ')"
    local f
    for f in "$dir"/findings/*; do
      if [ -f "$f" ] && [ "$(stat -c %s "$f")" -le 262144 ]; then
        echo "base64 of $(basename "$f"): $(base64 -w0 "$f")"
      fi
    done
    [ "$strict" = 1 ] && return "$rc"
  fi
  return 0
}

build() {
  # ccache keys on the compiler's command line: paths under the checkout are
  # made relative, so a clean clone elsewhere (CI) hits this machine's cache.
  export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
  # ONYX_CUDA_ARCHITECTURES (e.g. 90) narrows the GPU code built (CI: one
  # architecture is enough to compile and link the backend).
  local arch=()
  [ -n "${ONYX_CUDA_ARCHITECTURES:-}" ] && arch=(-DCMAKE_CUDA_ARCHITECTURES="$ONYX_CUDA_ARCHITECTURES")
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DONYX_ONNX_NODE_DATA="$PWD/$ONNX_NODE_DIR" "${arch[@]}" >/dev/null
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

case "${1:-}" in
  demo)
    deps; build
    out=$(mktemp -d)
    "$BUILD_DIR"/models/onyx-spirals --out "$out"
    # The bundled ONNX model: import, run, compare with onnxruntime's outputs.
    "$BUILD_DIR"/tools/onnx-run models/onnx/tiny_mlp/model.onnx \
      --test-data models/onnx/tiny_mlp/test_data_set_0 --output-dir "$out"
    # ONNX -> native .npz -> ONNX, and the exported model checked again.
    "$BUILD_DIR"/tools/onnx-import models/onnx/tiny_mlp/model.onnx -o "$out/tiny_mlp.npz" \
      --check-with models/onnx/tiny_mlp/test_data_set_0
    "$BUILD_DIR"/tools/onnx-export "$out/tiny_mlp.npz" -o "$out/tiny_mlp.onnx" --dynamic-axis x:0=batch
    "$BUILD_DIR"/tools/onnx-run "$out/tiny_mlp.onnx" --test-data models/onnx/tiny_mlp/test_data_set_0
    # Fine-tune the bundled CNN on the bundled dataset, export it, run it.
    "$BUILD_DIR"/tools/onnx-run models/onnx/tiny_cnn/model.onnx --test-data models/onnx/tiny_cnn/test_data_set_0
    "$BUILD_DIR"/tools/onnx-train models/onnx/tiny_cnn/model.onnx --data models/data/bars_train.npz \
      --valid models/data/bars_valid.npz --input x=x --target y --output logits --loss ce --lr 0.02 \
      --epochs 3 --batch-size 32 --checkpoint-dir "$out/ckpt" -o "$out/tiny_cnn_tuned.onnx"
    "$BUILD_DIR"/tools/onnx-run "$out/tiny_cnn_tuned.onnx" --input x=models/onnx/tiny_cnn/test_data_set_0/input_0.pb
    echo "outputs in $out"
    ;;
  test)
    deps test; build
    cd "$BUILD_DIR" && ctest --output-on-failure -j "$JOBS"
    ;;
  sanitize)
    deps test
    export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$PWD}
    # -g builds: without this ccache hashes the working directory, so a clone
    # at another path (CI) would start cold.
    export CCACHE_NOHASHDIR=1
    SAN_DIR=${SAN_DIR:-build-asan}
    cmake -S . -B "$SAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
      -DONYX_SANITIZE=address,undefined -DONYX_CUDA=OFF -DONYX_PYTHON=OFF -DONYX_BUILD_TESTS=OFF >/dev/null
    cmake --build "$SAN_DIR" -j "$JOBS" --target onnx-run onnx-test onnx-import onnx-export onnx-train onnx-bench
    # Leaks are not checked (the process exits right after); every other
    # report aborts with a non-zero status (-fno-sanitize-recover).
    export ASAN_OPTIONS=detect_leaks=0:allocator_may_return_null=1:max_allocation_size_mb=8192
    export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
    "$SAN_DIR"/tools/onnx-test "$ONNX_NODE_DIR" --rtol 1e-3 --atol 1e-5 \
      --known-failures tests/conformance/pip_onnx_node.txt
    bash tests/tools/cli_checks.sh "$PWD/$SAN_DIR/tools" "$PWD"
    bash tests/tools/fuzz_regressions.sh "$PWD/$SAN_DIR/tools" "$PWD"
    # A fixed run (seed and count) so that CI is repeatable; longer runs with
    # FUZZ_RUNS=0 FUZZ_MINUTES=60 FUZZ_SEED=$RANDOM.
    python3 tools/fuzz_models.py --bin "$SAN_DIR/tools" --seeds "$ONNX_NODE_DIR" models/onnx \
      --runs "${FUZZ_RUNS:-600}" --minutes "${FUZZ_MINUTES:-10}" --seed "${FUZZ_SEED:-1}" --out "$SAN_DIR/fuzz-findings"
    # The libFuzzer target for a fixed time (FUZZ_SECONDS, default 180).
    fuzz
    # ThreadSanitizer over the server tests: 8 threads running one shared
    # Session (threads = 1 each, so no OpenMP region: libgomp is not
    # instrumented, and TSan reports its barriers as races).
    TSAN_DIR=${TSAN_DIR:-build-tsan}
    cmake -S . -B "$TSAN_DIR" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -g1" \
      -DONYX_SANITIZE=thread -DONYX_CUDA=OFF -DONYX_PYTHON=OFF >/dev/null
    cmake --build "$TSAN_DIR" -j "$JOBS" --target onyx_tests
    (cd "$TSAN_DIR/tests" && TSAN_OPTIONS=halt_on_error=1 ./onyx_tests --gtest_filter='ServerSession.*')
    ;;
  fuzz)
    deps; fuzz
    ;;
  bench)
    # e.g. tools/dev.sh bench --out docs/performance.md (the full run, ~20 min)
    deps bench; build
    python3 tools/bench_vs_ort.py --bin "$BUILD_DIR/tools" "${@:2}"
    ;;
  *)
    echo "usage: tools/dev.sh demo|test|sanitize|bench [bench_vs_ort.py args]" >&2
    exit 2
    ;;
esac
