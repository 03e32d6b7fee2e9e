"""The tests run as any subset: no test module imports a conftest by name (pytest keeps one module
called ``conftest`` per directory without ``__init__.py``, the last loaded), and helper modules
imported by their bare names are unique across the tree."""
import ast
import subprocess
import sys
from collections import Counter
from pathlib import Path

TESTS = Path(__file__).resolve().parent


def _modules():
    return [p for p in TESTS.rglob("*.py") if "golden" not in p.parts]


def test_no_test_module_imports_a_conftest():
    offenders = []
    for path in _modules():
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                     else [node.module or ""] if isinstance(node, ast.ImportFrom) else [])
            if any(n.split(".")[0] == "conftest" for n in names):
                offenders.append(f"{path.relative_to(TESTS)}:{node.lineno}")
    assert not offenders, "a conftest is imported by name (put the value in a fixture): " + ", ".join(offenders)


def test_module_names_are_unique():
    counts = Counter(p.name for p in _modules() if p.name != "conftest.py")
    assert [n for n, c in counts.items() if c > 1] == []


def test_two_directories_with_conftests_collect_together():
    r = subprocess.run([sys.executable, "-m", "pytest", "--co", "-q", "-p", "no:cacheprovider",
                        str(TESTS / "examples"), str(TESTS / "backends" / "npu")],
                       capture_output=True, text=True, timeout=300, cwd=TESTS.parent)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-2000:]
