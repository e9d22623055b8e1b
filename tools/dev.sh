#!/usr/bin/env bash
# Set-up and the two things a new user runs (see README.md):
#   tools/dev.sh demo   install deps, build, run the bundled example end to end
#   tools/dev.sh test   install deps, build, run the whole test suite (ctest)
# BUILD_DIR (default: build) and JOBS (default: nproc) can be overridden.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-$(nproc)}

deps() {
  local pkgs="build-essential cmake ccache libopenblas-dev libomp-dev zlib1g-dev libgtest-dev libgmock-dev \
libcli11-dev libprotobuf-dev protobuf-compiler libonnx-dev libonnx-testdata graphviz python3 python3-pip"
  local missing=""
  for p in $pkgs; do dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"; done
  if [ -n "$missing" ]; then
    echo "installing:$missing"
    local sudo=""; [ "$(id -u)" = 0 ] || sudo=sudo
    $sudo apt-get update -qq
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq $missing >/dev/null
  fi
  # numpy is used by tests that check our .npz files with numpy itself.
  python3 -c "import numpy" 2>/dev/null || python3 -m pip install -q numpy
}

build() {
  cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD_DIR" -j "$JOBS"
}

case "${1:-}" in
  demo)
    deps; build
    out=$(mktemp -d)
    "$BUILD_DIR"/models/onyx-spirals --out "$out"
    echo "outputs in $out"
    ;;
  test)
    deps; build
    cd "$BUILD_DIR" && ctest --output-on-failure -j "$JOBS"
    ;;
  *)
    echo "usage: tools/dev.sh demo|test" >&2
    exit 2
    ;;
esac
