"""Golden before/after IR of every CUDA pass, each run alone on a small input (golden_cases.py).

A failure prints the diff. If the change is meant, regenerate with
``python -m tests.transform.regen`` and review the diff it prints.
"""
import difflib

import pytest

from golden_cases import CASES, path_of, render
from tegula.transform import pipeline_for


def test_every_cuda_pass_has_a_golden_case():
    for target in ("cuda:sm_80", "cuda:sm_90a"):
        assert set(pipeline_for(target).names()) <= set(CASES)


@pytest.mark.parametrize("name", list(CASES))
def test_golden(name):
    path = path_of(name)
    assert path.exists(), f"no golden file for {name}: run python -m tests.transform.regen {name}"
    want, got = path.read_text(), render(name)
    if got != want:
        diff = "".join(difflib.unified_diff(want.splitlines(keepends=True), got.splitlines(keepends=True),
                                            fromfile=f"golden/{path.name}", tofile="now"))
        pytest.fail(f"{name} no longer produces its golden IR "
                    f"(if meant: python -m tests.transform.regen {name}):\n{diff}")


@pytest.mark.parametrize("name", list(CASES))
def test_the_pass_changes_its_input_where_it_should(name):
    before, after = render(name).split("## after\n")
    changes = before.split("## before\n")[1] != after
    assert changes == (name != "CheckResources")  # CheckResources only checks
