"""Shared fixtures: where the Onyx tools are, and the generated models."""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "models", "onnx"))

import make_models  # noqa: E402


def tool(name):
    """Path of an Onyx tool: $ONYX_BIN_DIR/name (default build/tools)."""
    bin_dir = os.environ.get("ONYX_BIN_DIR", os.path.join(REPO, "build", "tools"))
    path = os.path.join(bin_dir, name)
    if not os.access(path, os.X_OK):
        pytest.fail(f"{path} not found: build it and set ONYX_BIN_DIR to its folder")
    return path


@pytest.fixture(scope="session")
def models_dir(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    make_models.write_all(str(d))
    return d
