#!/usr/bin/env bash
# `pip install .` gives a working onyx package (issue 22): the checkout is
# installed into a fresh virtual environment (system site-packages visible:
# numpy, onnxruntime, pytest, torch), without build isolation (the build
# requirements scikit-build-core and nanobind come from tools/dev.sh deps),
# then the package's test suite runs against the installed copy from outside
# the source tree. Then `python -m build --wheel` (same build folder, so only
# the packaging runs again): tests/tools/wheel_checks.py checks with
# `auditwheel show` that the wheel carries libonyx and needs only libraries of
# the README's Debian packages, and the suite runs again against the wheel
# installed into a second fresh environment. The build folder is build-pip in
# the checkout (beside build/, so that ccache with CCACHE_BASEDIR finds the
# main build's objects).
#   pip_install_checks.sh SOURCE_DIR TOOLS_DIR
set -euo pipefail
src=$1
bin=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 -m venv --system-site-packages "$work/venv"
# ccache (when the build uses it) reuses the main build's objects.
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$src}
"$work/venv/bin/pip" install -q --no-build-isolation --no-deps "$src" \
  -Cbuild-dir="$src/build-pip" >"$work/pip.log" 2>&1 || { tail -40 "$work/pip.log"; exit 1; }
# check_install VENV: the package imports from VENV, and its test suite passes.
check_install() {
  local venv=$1 where
  where=$(cd "$work" && "$venv/bin/python" -c "import onyx, os; print(os.path.dirname(onyx.__file__))")
  case "$where" in
    "$venv"/*) echo "onyx imported from $where" ;;
    *) echo "onyx imported from $where, not from the fresh install in $venv" >&2; exit 1 ;;
  esac
  ls "$where"
  (cd "$work" && ONYX_PYTHON_DIR=installed ONYX_BIN_DIR="$bin" "$venv/bin/python" -m pytest -q -p no:cacheprovider \
    "$src/tests/python/package")
}
check_install "$work/venv"

# The wheel.
python3 -m build --wheel --no-isolation --outdir "$work/dist" "$src" -Cbuild-dir="$src/build-pip" \
  >"$work/wheel.log" 2>&1 || { tail -40 "$work/wheel.log"; exit 1; }
wheel=$(ls "$work"/dist/onyx-*.whl)
python3 "$src/tests/tools/wheel_checks.py" "$wheel" "$src/tools/dev.sh"
python3 -m venv --system-site-packages "$work/venv-wheel"
"$work/venv-wheel/bin/pip" install -q --no-deps "$wheel"
check_install "$work/venv-wheel"
