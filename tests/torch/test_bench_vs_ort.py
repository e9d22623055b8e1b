"""tools/bench_vs_ort.py works end to end on a real model (the MLP of
tools/bench_models.py, exported from PyTorch into a temporary cache): both
engines run, fma-peak runs, and the script rewrites its own section of the
page and nothing else. Its timings are not checked.

Run: ONYX_BIN_DIR=build/tools python3 -m pytest -q tests/torch/test_bench_vs_ort.py
"""
import json
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))

import bench_models  # noqa: E402
import bench_vs_ort  # noqa: E402


def test_smoke_run_writes_its_section_only(tmp_path):
    bin_dir = os.environ.get("ONYX_BIN_DIR", os.path.join(REPO, "build", "tools"))
    for tool in ("onnx-bench", "fma-peak"):
        assert os.path.exists(os.path.join(bin_dir, tool)), f"no {tool} in {bin_dir}"
    page = tmp_path / "performance.md"
    other = "<!-- begin bench_vs_torch_cpu -->\n## kept as it is\n<!-- end bench_vs_torch_cpu -->\n"
    page.write_text("# Performance\n\n" + other)
    cache = tmp_path / "models"
    args = ["--bin", bin_dir, "--models", "mlp", "--batch", "2", "--threads", "1", "--rounds", "1", "--iters", "1",
            "--warmup", "0", "--cache", str(cache), "--out", str(page)]
    assert bench_vs_ort.main(args) == 0
    text = page.read_text()
    assert other in text
    section = text.split("<!-- begin bench_vs_ort -->", 1)[1].split("<!-- end bench_vs_ort -->", 1)[0]
    assert re.search(r"float32 FMA peak .*1 thread: [0-9.]+ / [0-9.]+ GFLOP/s", section)
    latency = [l for l in section.splitlines() if l.startswith("| mlp | 2 | 1 |")]
    assert len(latency) == 3  # latency, throughput and memory tables
    cells = [c.strip() for c in latency[0].strip("|").split("|")]
    onyx, ort, ratio = float(cells[3]), float(cells[5]), float(cells[7])
    assert onyx > 0 and ort > 0 and abs(ratio - onyx / ort) <= 0.01 * ratio + 0.01
    # One round: its own ratio is the ratio (both ends of the range).
    lo, hi = (float(v) for v in cells[8].split("-"))
    assert lo == hi and abs(lo - ratio) <= 0.01
    assert cells[9] == "1 / 1"
    # 784-512-512-10 at batch 2: every multiply-add of the three Gemms, twice.
    meta = json.load(open(cache / "mlp_b2.json"))
    assert meta["flops"] == 2 * 2 * (784 * 512 + 512 * 512 + 512 * 10)
    throughput = [c.strip() for c in latency[1].strip("|").split("|")]
    assert float(throughput[3]) == round(meta["flops"] / 1e9, 3)
    # A second run uses the cached export and replaces the section.
    mtime = os.path.getmtime(cache / "mlp_b2.onnx")
    assert bench_vs_ort.main(args) == 0
    assert os.path.getmtime(cache / "mlp_b2.onnx") == mtime
    assert page.read_text().count("<!-- begin bench_vs_ort -->") == 1


def test_every_model_has_a_description_and_batches():
    for name in bench_models.MODELS:
        assert bench_models.DESCRIPTION[name]
        assert bench_models.default_batches(name)
