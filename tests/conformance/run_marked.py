"""Call the test functions of corpus test files directly, with their pytest marks bypassed.

The corpus marks the tests of ``convolution/test_example_convolution.py`` and
``gemm_streamk/test_example_tilelang_gemm_streamk.py`` ``requires_cuda_compute_version_le(8,
9)``; on an sm_90 GPU tegula's ``tilelang.testing`` skips them, as the mark says. This runs them
anyway, so that what their kernels do there is measured (from the project's root, on the GPU)::

    PYTHONPATH=$PWD python tests/conformance/run_marked.py [--corpus DIR] [--timeout S] [FILE ...]

``FILE`` is relative to the corpus's ``tilelang/examples`` (default: the two files above);
``--corpus`` defaults to ``TEGULA_CONFORMANCE`` (else ``config.conformance_root``). Each test
function runs in a process of its own, in its file's directory, with ``import tilelang`` meaning
tegula (:func:`tegula.compat.alias.alias_tilelang`), so that one crash hides nothing else. Prints
``PASS|FAIL FILE::FUNCTION (seconds)`` with the last line of a failure, then ``N passed, N
failed``; exits 1 when any failed.
"""
from __future__ import annotations

import argparse
import ast
import importlib
import os
import re
import subprocess
import sys
import time
import traceback
from pathlib import Path

MARKED = ["convolution/test_example_convolution.py",
          "gemm_streamk/test_example_tilelang_gemm_streamk.py"]


def test_functions(path: Path) -> list[str]:
    """The ``test_*`` functions a test file defines, in order (read, not imported)."""
    tree = ast.parse(path.read_text())
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef) and n.name.startswith("test_")]


def summary(out: str, rc: int) -> str:
    """The line naming a failure: the last ``SomeError: message`` line of the output (tegula's
    errors go on with the source line and a caret), else the last line."""
    lines = out.splitlines()
    named = [ln for ln in lines if re.match(r"^[\w.]+(Error|Exception|Exit)\b.*:", ln)]
    return (named or lines or [f"exit code {rc}"])[-1]


def run_one(path: Path, name: str) -> None:
    """In this process: import the test file as its directory's module and call ``name``."""
    from tegula.compat.alias import alias_tilelang

    alias_tilelang()
    os.chdir(path.parent)
    sys.path.insert(0, str(path.parent))
    sys.argv = [path.name]
    module = importlib.import_module(path.stem)
    getattr(module, name)()  # a plain call: pytest marks (skipif) play no part


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="*", default=MARKED)
    ap.add_argument("--corpus", default=None)
    ap.add_argument("--timeout", type=float, default=600.0, help="seconds per test function")
    ap.add_argument("--one", nargs=2, metavar=("FILE", "FUNCTION"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.one:
        run_one(Path(args.one[0]), args.one[1])
        return 0
    root = Path(__file__).resolve().parents[2]
    if args.corpus is None:
        sys.path.insert(0, str(root))
        from tegula import config

        found = config.conformance_root(root)
        args.corpus = str(found if found is not None else config.conformance_candidates(root)[0])
    examples = Path(args.corpus).resolve() / "tilelang" / "examples"
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(root)] + ([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])))
    passed = failed = 0
    for rel in args.files:
        path = examples / rel
        if not path.is_file():
            print(f"FAIL {rel}: no such file under {examples}")
            failed += 1
            continue
        for name in test_functions(path):
            t0 = time.time()
            try:
                p = subprocess.run([sys.executable, __file__, "--one", str(path), name], env=env,
                                   capture_output=True, text=True, timeout=args.timeout)
                rc, out = p.returncode, (p.stdout + p.stderr).strip()
            except subprocess.TimeoutExpired:
                rc, out = -1, f"timed out after {args.timeout:.0f} s"
            secs = time.time() - t0
            if rc == 0:
                passed += 1
                print(f"PASS {rel}::{name} ({secs:.1f} s)")
            else:
                failed += 1
                print(f"FAIL {rel}::{name} ({secs:.1f} s): {summary(out, rc)[:300]}")
            sys.stdout.flush()
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except Exception:  # the child's failure, printed for the parent to report
        traceback.print_exc()
        sys.exit(1)
