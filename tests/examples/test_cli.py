"""``python -m tegula``: help, the demo's table and its exit codes (run as a subprocess)."""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "tegula", *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT, env=env)


def test_help_lists_every_command():
    from tegula.tools.cli import COMMANDS

    r = run_cli("--help")
    assert r.returncode == 0, r.stderr
    assert "usage: python -m tegula" in r.stdout
    for c in COMMANDS:
        assert c.name in r.stdout
        sub = run_cli(c.name, "--help")
        assert sub.returncode == 0 and c.name in sub.stdout


def test_demo_help_documents_target():
    r = run_cli("demo", "--help")
    assert r.returncode == 0
    assert "--target" in r.stdout and "--seed" in r.stdout


def test_no_command_prints_help():
    r = run_cli()
    assert r.returncode == 2 and "<command>" in r.stdout


def test_demo_cpu_passes(rng):
    r = run_cli("demo", "--target", "cpu", "--seed", str(int(rng.integers(1 << 31))))
    assert r.returncode == 0, r.stdout + r.stderr
    lines = r.stdout.splitlines()
    assert lines[0].split() == ["kernel", "target", "shape", "max", "error", "status", "time", "(ms)"]
    rows = [ln.split() for ln in lines[2:]]
    assert [row[0] for row in rows] == ["gemm", "softmax", "flash_attention"]
    for row in rows:
        assert row[1] == "cpu"
        assert "ok" in row
        float(row[-1])                        # time (ms)
        assert float(row[-3]) < 0.1           # max error


def test_demo_unknown_target_fails():
    r = run_cli("demo", "--target", "nonsense")
    assert r.returncode == 1
    assert "unknown target" in r.stderr


def test_demo_reports_a_wrong_kernel(monkeypatch, capsys, rng):
    """A kernel that disagrees with its reference makes the table say FAIL and the exit code 1."""
    from tegula.tools import demo

    good = demo.cases()
    bad = demo.Case(good[1].name, good[1].shape, good[1].build, good[1].inputs,
                    lambda x: demo.softmax_reference(x) + 0.5, good[1].atol)
    monkeypatch.setattr(demo, "cases", lambda: [bad])
    assert demo.run("cpu", int(rng.integers(1 << 31))) == 1
    out = capsys.readouterr().out
    assert "FAIL" in out and "softmax" in out


def test_demo_kernels_agree_with_references(rng):
    from tegula.tools import demo

    for case in demo.cases():
        res = demo.run_case(case, "cpu", rng)
        assert res.ok, res
        assert res.max_error is not None and np.isfinite(res.max_error)
