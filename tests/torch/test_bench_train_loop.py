"""tools/bench_train_loop.py works end to end (its smoke size): onnx-train
and the plain PyTorch loop both train each workload, their loss curves agree
(same weights, data, batches and optimizer), and the script rewrites its own
section of the page and nothing else. Its timings are not checked.

Run: ONYX_BIN_DIR=build/tools python3 -m pytest -q tests/torch/test_bench_train_loop.py
"""
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))

import bench_train_loop  # noqa: E402


def test_smoke_run_compares_both_loops(tmp_path):
    bin_dir = os.environ.get("ONYX_BIN_DIR", os.path.join(REPO, "build", "tools"))
    assert os.path.exists(os.path.join(bin_dir, "onnx-train")), f"no onnx-train in {bin_dir}"
    page = tmp_path / "performance.md"
    other = "<!-- begin bench_vs_torch_cpu -->\n## kept as it is\n<!-- end bench_vs_torch_cpu -->\n"
    page.write_text("# Performance\n\n" + other)
    args = ["--bin", bin_dir, "--size", "smoke", "--rounds", "1", "--epochs", "2", "--threads", "1", "--out", str(page)]
    assert bench_train_loop.main(args) == 0
    text = page.read_text()
    assert other in text
    section = text.split("<!-- begin bench_train_loop_cpu -->", 1)[1].split("<!-- end bench_train_loop_cpu -->")[0]
    rows = [l for l in section.splitlines() if re.match(r"\| (mlp|cnn) \|", l)]
    assert [r.split("|")[1].strip() for r in rows] == ["mlp", "cnn"]
    for r in rows:
        cells = [c.strip() for c in r.strip("|").split("|")]
        onyx, torch_sps, ratio = float(cells[3]), float(cells[4]), float(cells[5])
        assert onyx > 0 and torch_sps > 0
        assert abs(ratio - torch_sps / onyx) <= 0.01 * ratio + 0.01
        losses = [float(v) for v in cells[7].split(",")]
        assert len(losses) == 2 and losses[1] < losses[0], cells  # it trains
        # The same arithmetic in both loops: the epoch losses agree to float rounding.
        assert float(cells[8]) < 1e-4, cells
    # A second run replaces the section instead of adding one; --epochs 1 is refused.
    assert bench_train_loop.main(args) == 0
    assert page.read_text().count("<!-- begin bench_train_loop_cpu -->") == 1
    assert bench_train_loop.main(args[:-2] + ["--epochs", "1"]) == 2
