"""tests/conformance/run_marked.py calls marked corpus test functions directly: a skip mark does
not skip, each function runs in its own process with ``tilelang`` meaning tegula, and a failure
is reported by its error line."""
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent / "run_marked.py"

TEST_FILE = '''
import pytest
import tilelang
import tilelang.testing
from helper import value


@pytest.mark.skipif(True, reason="skipped under pytest")
def test_runs_although_marked():
    assert value() == 3 and tilelang.__name__ == "tegula"


@tilelang.testing.requires_cuda_compute_version_le(1, 0)
def test_fails_with_its_error():
    raise ValueError("the kernel disagrees")
'''


def test_marked_functions_run_and_report(tmp_path):
    d = tmp_path / "tilelang" / "examples" / "demo"
    d.mkdir(parents=True)
    (d / "test_demo.py").write_text(TEST_FILE)
    (d / "helper.py").write_text("def value():\n    return 3\n")
    p = subprocess.run([sys.executable, str(SCRIPT), "--corpus", str(tmp_path), "demo/test_demo.py"],
                       capture_output=True, text=True, timeout=300)
    lines = p.stdout.splitlines()
    assert p.returncode == 1, p.stdout + p.stderr
    assert lines[0].startswith("PASS demo/test_demo.py::test_runs_although_marked (")
    assert lines[1].startswith("FAIL demo/test_demo.py::test_fails_with_its_error (")
    assert lines[1].endswith("ValueError: the kernel disagrees")
    assert lines[-1] == "1 passed, 1 failed"
