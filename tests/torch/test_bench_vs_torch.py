"""tools/bench_vs_torch.py works end to end (its smoke size, on the CPU):
every workload runs in Onyx and PyTorch, and the script rewrites its own
section of the page and nothing else. Its timings are not checked (they
mean nothing at this size and on a shared machine).

Run: ONYX_BIN_DIR=build/tools python3 -m pytest -q tests/torch
"""
import os
import re
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(REPO, "tools"))

import bench_vs_torch  # noqa: E402


def test_smoke_run_writes_its_section_only(tmp_path):
    bin_dir = os.environ.get("ONYX_BIN_DIR", os.path.join(REPO, "build", "tools"))
    assert os.path.exists(os.path.join(bin_dir, "onnx-bench")), f"no onnx-bench in {bin_dir}"
    page = tmp_path / "performance.md"
    other = "<!-- begin bench_vs_ort -->\n## kept as it is\n<!-- end bench_vs_ort -->\n"
    page.write_text("# Performance\n\n" + other)
    args = ["--bin", bin_dir, "--device", "cpu", "--size", "smoke", "--rounds", "1", "--iters", "1", "--warmup", "0",
            "--threads", "1", "--out", str(page)]
    assert bench_vs_torch.main(args) == 0
    text = page.read_text()
    assert other in text
    section = text.split("<!-- begin bench_vs_torch_cpu -->", 1)[1].split("<!-- end bench_vs_torch_cpu -->", 1)[0]
    rows = [l for l in section.splitlines() if re.match(r"\| (resnet50|bert-base|mlp|resnet18|bert-small) \|", l)]
    assert [r.split("|")[1].strip() for r in rows] == ["resnet50", "bert-base", "mlp", "resnet18", "bert-small"]
    for r in rows:
        cells = [c.strip() for c in r.strip("|").split("|")]
        assert cells[1] == ("train" if cells[0] in ("mlp", "resnet18", "bert-small") else "inference")
        onyx, torch_ms, ratio = float(cells[3]), float(cells[5]), float(cells[7])
        assert onyx > 0 and torch_ms > 0
        assert abs(ratio - onyx / torch_ms) <= 0.01 * ratio + 0.01
        # Peak RSS of both processes, PyTorch's with its memory before the
        # first call in brackets (at most its peak).
        assert len(cells) == 12, cells
        m = re.fullmatch(r"([0-9]+) \(([0-9]+)\)", cells[11])
        assert float(cells[10]) > 0 and m, cells
        assert 0 < int(m.group(2)) <= int(m.group(1)), cells
    # On the CPU the set-up names the CPU and the FMA peak measured in the same run.
    device = [l for l in section.splitlines() if l.startswith("- Device: ")]
    assert len(device) == 1 and "avx2: " in device[0], device
    if os.access(os.path.join(bin_dir, "fma-peak"), os.X_OK):
        assert re.search(r"float32 FMA peak \(`fma-peak`, [^)]+\): 1 thread [0-9.]+ GFLOP/s", device[0]), device[0]
    # A second run replaces the section instead of adding one.
    assert bench_vs_torch.main(args) == 0
    assert page.read_text().count("<!-- begin bench_vs_torch_cpu -->") == 1


def test_bf16_writes_its_own_section(tmp_path):
    """--precision bf16: Onyx's bfloat16 compute against PyTorch's bfloat16
    autocast, in a section of its own beside the float32 one. Where the CPU
    has no bfloat16 instructions the script refuses to report a float32 run
    as bfloat16 (exit 1)."""
    import json
    import subprocess

    bin_dir = os.environ.get("ONYX_BIN_DIR", os.path.join(REPO, "build", "tools"))
    page = tmp_path / "performance.md"
    float32 = "<!-- begin bench_vs_torch_cpu -->\n## the float32 section\n<!-- end bench_vs_torch_cpu -->\n"
    page.write_text("# Performance\n\n" + float32)
    args = ["--bin", bin_dir, "--device", "cpu", "--size", "smoke", "--rounds", "1", "--iters", "1", "--warmup", "0",
            "--threads", "1", "--only", "mlp", "--precision", "bf16", "--out", str(page)]
    # What this CPU computes in when asked for bf16 (onnx-bench's JSON says).
    import numpy as np
    np.save(tmp_path / "x.npy", np.ones((1, 4), np.float32))
    probe = subprocess.run([os.path.join(bin_dir, "onnx-bench"), os.path.join(REPO, "models", "onnx", "tiny_mlp",
                                                                             "model.onnx"),
                            "--input", f"x={tmp_path / 'x.npy'}", "--iters", "1", "--warmup", "0", "--precision",
                            "bf16", "--json"], capture_output=True, text=True, check=True)
    has_bf16 = json.loads(probe.stdout.strip().splitlines()[-1])["precision"] == "bf16"
    rc = bench_vs_torch.main(args)
    if not has_bf16:
        assert rc == 1
        assert page.read_text() == "# Performance\n\n" + float32
        return
    assert rc == 0
    text = page.read_text()
    assert float32 in text
    section = text.split("<!-- begin bench_vs_torch_cpu_bf16 -->", 1)[1].split("<!-- end bench_vs_torch_cpu_bf16 -->")[0]
    assert "bfloat16 compute" in section and "torch.autocast" in section
    assert re.search(r"\| mlp \| train \|", section)
