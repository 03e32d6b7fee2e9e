"""Every kernel of the bad-kernel corpus is a typed tegula error at the expected line, on every
target that runs here; none is an internal error, none is accepted."""
from __future__ import annotations

import importlib.util
import os
import re

import pytest

import tegula
from tegula.errors import TegulaError

from bad_kernels import CORPUS, Bad

TARGETS = ("cpu", "cuda-emu")
_INTERNAL = re.compile(r"tegula[/\\](language|ir|backends|transform|arith|layout|runtime)[/\\]\w+\.py")


def build_errors(bad: Bad, folder: str, index: int) -> tuple[str, list]:
    """The file the kernel is written to, and the errors building it raises: one when loading it
    fails, else one per target (None where a target accepts it). Non-tegula exceptions propagate."""
    path = os.path.join(folder, f"bad_kernel_{index}.py")
    with open(path, "w") as f:
        f.write(bad.source)
    spec = importlib.util.spec_from_file_location(f"bad_kernel_{index}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except TegulaError as e:
        return path, [e]
    out = []
    for target in TARGETS:
        try:
            tegula.compile(module.main, target=target)
            out.append(None)
        except TegulaError as e:
            out.append(e)
    return path, out


def check_located(bad: Bad, path: str, errors: list) -> None:
    for e in errors:
        assert e is not None, f"{bad.name}: accepted"
        msg = str(e)
        assert isinstance(e, bad.error), f"{bad.name}: expected {bad.error.__name__}, got {type(e).__name__}: {msg}"
        assert f"{os.path.basename(path)}:{bad.line}:" in msg, f"{bad.name}: not at line {bad.line}:\n{msg}"
        assert not _INTERNAL.search(msg), f"{bad.name}: names tegula's own files:\n{msg}"
        assert "^" in msg  # a caret under the column


def test_the_corpus_has_at_least_150_kernels():
    assert len(CORPUS) >= 150
    assert len({b.name for b in CORPUS}) == len(CORPUS)


@pytest.mark.parametrize("index", range(len(CORPUS)), ids=[b.name for b in CORPUS])
def test_bad_kernel_is_a_located_tegula_error(index, tmp_path):
    bad = CORPUS[index]
    path, errors = build_errors(bad, str(tmp_path), index)
    check_located(bad, path, errors)
