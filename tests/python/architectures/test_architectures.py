"""Every real architecture of the benchmarks (tools/bench_models.py:
ResNet-50/18, MobileNetV2, EfficientNet-B0, DenseNet-121, SqueezeNet,
ShuffleNetV2, a BERT-base encoder, a BiLSTM tagger, a U-Net, an MLP) through
onyx.InferenceSession, against onnxruntime on the same inputs and against
PyTorch's output of the module (issue 22). The models are exported once into
build/bench_models (about a minute), as the benchmark does.

    ONYX_PYTHON_DIR=build/python python3 -m pytest -q tests/python/architectures
"""
import os
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
_where = os.environ.get("ONYX_PYTHON_DIR", os.path.join(REPO, "build", "python"))
if not os.path.exists(os.path.join(_where, "onyx", "__init__.py")):
    raise RuntimeError(f"no onyx package in {_where}: build it (nanobind installed) or set ONYX_PYTHON_DIR")
sys.path.insert(0, _where)
sys.path.insert(0, os.path.join(REPO, "tools"))

import bench_models  # noqa: E402
import check_python_models  # noqa: E402

# Every benchmark architecture; the list is the benchmark's, so a model added
# there is checked here too.
assert len(bench_models.MODELS) >= 11, bench_models.MODELS


@pytest.mark.parametrize("name", bench_models.MODELS)
def test_matches_onnxruntime_and_pytorch(name):
    rows = check_python_models.compare(name, batch=1, threads=2)
    against = {r[2] for r in rows}
    assert against == {"onnxruntime", "pytorch"}, rows
    for out, shape, ref, diff, rel in rows:
        assert rel <= check_python_models.RTOL, f"{name} output {out} {shape} against {ref}: {diff:.3g} ({rel:.3g} of scale)"
