"""Every public callable of ``tegula.language`` (``T.*``) and ``tegula`` has a docstring."""
import inspect

import tegula
import tegula.language as T


def _public(mod):
    names = getattr(mod, "__all__", None) or [n for n in dir(mod) if not n.startswith("_")]
    return [n for n in names if callable(getattr(mod, n, None))]


def _undocumented(mod, prefix):
    return sorted(f"{prefix}.{n}" for n in _public(mod)
                  if not (inspect.getdoc(getattr(mod, n)) or "").strip())


def test_language_names_have_docstrings():
    assert _public(T), "tegula.language exports no callables"
    missing = _undocumented(T, "T")
    assert not missing, f"{len(missing)} public T.* callables have no docstring: {', '.join(missing)}"


def test_tegula_names_have_docstrings():
    assert _public(tegula), "tegula exports no callables"
    missing = _undocumented(tegula, "tegula")
    assert not missing, f"{len(missing)} public tegula.* callables have no docstring: {', '.join(missing)}"


def test_analyzer_has_class_docstring():
    from tegula.tools.analyzer import Analyzer

    assert (inspect.getdoc(Analyzer) or "").strip(), "tegula.tools.analyzer.Analyzer has no docstring"


def test_reference_page_is_current():
    from pathlib import Path

    from tegula.tools.reference import render

    page = Path(__file__).resolve().parents[2] / "docs/reference/language.md"
    assert page.read_text() == render(), (
        "docs/reference/language.md is stale: run "
        "`python -m tegula.tools.reference > docs/reference/language.md`")


def test_reference_page_lists_every_documented_name():
    from tegula.tools.reference import render

    text = render()
    for name in ("T.Parallel(", "T.Pipelined(", "T.copy(", "T.gemm(", "tegula.jit("):
        assert f"`{name}" in text, name
    assert "(undocumented)" not in text
