"""A CPU subset of TileLang-Ascend's own examples (``shared/conformance-ascend``), run unchanged
as ``python -m tegula run --target ascend-emu:a2a3 FILE`` from the program's folder, exactly as
``run.sh`` runs them: tegula stands in for ``tilelang`` and for the Ascend host. Each passes when
it exits 0 (the examples check themselves against torch). The whole corpus:
``bash ../shared/conformance-ascend/run.sh a2a3``; the table is in docs/conformance.md."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")

ROOT = Path(__file__).resolve().parents[2]
# fast programs that pass, one per mechanism: the host stand-in and a vector kernel, the scalar
# unit's loads and stores of UB elements, developer mode (memories inferred) with gemm_v0
PROGRAMS = [
    "elementwise/elementwise_add.py",
    "elementwise/setvalue_example.py",
    "developer_mode/gemm_developer.py",
]


def corpus() -> Path | None:
    for d in (ROOT, *ROOT.parents):
        for name in (".conformance-ascend", "shared/conformance-ascend"):
            c = d / name / "tilelang-ascend" / "examples"
            if c.is_dir():
                return c
    return None


@pytest.mark.parametrize("program", PROGRAMS)
def test_ascend_example_runs_unchanged(program):
    examples = corpus()
    if examples is None:
        pytest.skip("the TileLang-Ascend corpus (shared/conformance-ascend) is not here")
    path = examples / program
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    r = subprocess.run([sys.executable, "-m", "tegula", "run", "--target", "ascend-emu:a2a3", path.name],
                       cwd=path.parent, capture_output=True, text=True, timeout=300, env=env)
    assert r.returncode == 0, (r.stdout + r.stderr)[-3000:]
    assert "Traceback" not in r.stderr
