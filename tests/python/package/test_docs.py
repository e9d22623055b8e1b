"""The python blocks of docs/python.md, in order, as one script from the
repository root: every example of the page runs and prints what it says."""
import os
import re
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def test_docs_python_page_runs():
    text = open(os.path.join(REPO, "docs", "python.md")).read()
    blocks = re.findall(r"```python\n(.*?)```", text, re.S)
    assert len(blocks) >= 5
    env = dict(os.environ)
    where = os.environ.get("ONYX_PYTHON_DIR", os.path.join(REPO, "build", "python"))
    if where != "installed":
        env["PYTHONPATH"] = where + os.pathsep + env.get("PYTHONPATH", "")
    r = subprocess.run([sys.executable, "-c", "\n".join(blocks)], cwd=REPO, env=env, capture_output=True,
                       text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    out = r.stdout
    assert "z=6.9093" in out
    assert re.search(r"\(4, \d+\) float32", out)
    assert "torch.Size" in out
    assert "error:" in out and "float64" in out
    assert "(3, 2)" in out
