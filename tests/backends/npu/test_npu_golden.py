"""Golden before/after IR of every NPU pass, each run alone on a small input (golden_npu.py).

A failure prints the diff. If the change is meant, regenerate with
``python -m tests.backends.npu.golden_npu`` and review the diff it prints.
"""
import difflib

import pytest

from golden_npu import CASES, CHECKS_ONLY, path_of, render
from tegula.transform import pipeline_for


def test_every_npu_pass_has_a_golden_case():
    for target in ("ascend-emu:a2a3", "ascend-pto:a5", "ascendc:a2a3"):
        assert set(pipeline_for(target).names()) <= set(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_golden(name):
    path = path_of(name)
    assert path.exists(), f"no golden file for {name}: run python -m tests.backends.npu.golden_npu {name}"
    want, got = path.read_text(), render(name)
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(keepends=True), got.splitlines(keepends=True),
                                            fromfile=f"golden/{path.name}", tofile="now"))
        pytest.fail(f"{name} no longer produces its golden IR "
                    f"(if meant: python -m tests.backends.npu.golden_npu {name}):\n{diff}")


@pytest.mark.parametrize("name", list(CASES))
def test_the_pass_changes_its_input_where_it_should(name):
    before, after = render(name).split("## after\n")
    assert (before.split("## before\n")[1] != after) == (name not in CHECKS_ONLY)
