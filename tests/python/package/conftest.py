"""The Python package's tests: `import onyx` from $ONYX_PYTHON_DIR (default
build/python, where the build assembles the package), or from an installed
package when ONYX_PYTHON_DIR is "installed"."""
import os
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_where = os.environ.get("ONYX_PYTHON_DIR", os.path.join(REPO, "build", "python"))
if _where != "installed":
    if not os.path.exists(os.path.join(_where, "onyx", "__init__.py")):
        raise RuntimeError(f"no onyx package in {_where}: build it (nanobind installed) or set ONYX_PYTHON_DIR")
    sys.path.insert(0, _where)
sys.path.insert(0, os.path.join(REPO, "models", "onnx"))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
