"""Every code block of README.md and docs/ runs, so the docs cannot drift from the code.

The ``python`` blocks of one file run in order in one namespace (a later block uses what an
earlier one defined), in a fresh folder (files they write land there) with ``examples/`` importable,
as a reader following the page top to bottom would run them. An HTML comment on the line before a
block changes how it is checked::

    <!-- doc-test: gpu -->               needs a CUDA GPU: skipped without one (and the rest of the page after it)
    <!-- doc-test: fragment -->          a piece of a kernel (``...`` in it): parsed, not run
    <!-- doc-test: raises RaceError -->  running it raises that tegula error (the page shows the report)
    <!-- doc-test: needs matplotlib -->  skipped (with the extra to install) where the module is missing

Blocks in other languages (``bash``, ``diff``, output without a language) are not run; the tests
at the end check the figures those pages quote against what the code says today.
"""
from __future__ import annotations

import ast
import contextlib
import io
import re
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

from optional_extras import EXTRAS, importable, needs_reason

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
FENCE = re.compile(r"^(?:<!-- doc-test: (?P<mark>[^>]*?) -->\n)?```(?P<lang>[\w-]*)\n(?P<body>.*?)^```", re.S | re.M)


@dataclass
class Block:
    page: Path
    line: int
    lang: str
    mark: str
    body: str


def blocks(page: Path) -> list[Block]:
    """The fenced code blocks of ``page``, with their line and ``doc-test`` mark."""
    text = page.read_text()
    out = []
    for m in FENCE.finditer(text):
        line = text[:m.start("body")].count("\n")
        out.append(Block(page, line, m.group("lang"), (m.group("mark") or "").strip(), m.group("body")))
    return out


def _gpu() -> bool:
    from tegula.target import gpu_available

    return gpu_available()


def _rel(page: Path) -> str:
    return str(page.relative_to(ROOT))


@pytest.mark.parametrize("page", [p for p in PAGES if any(b.lang == "python" for b in blocks(p))], ids=_rel)
def test_python_blocks_run(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.syspath_prepend(str(ROOT / "examples"))
    monkeypatch.syspath_prepend(str(ROOT))
    namespace: dict = {"__name__": "__docs__"}
    ran = 0
    for b in blocks(page):
        if b.lang != "python":
            continue
        where = f"{_rel(page)}:{b.line + 1}"
        code = compile(b.body, where, "exec")   # a syntax error names the page's line
        if b.mark == "fragment":
            assert "..." in b.body, f"{where}: a fragment block shows what it leaves out with '...'"
            continue
        if b.mark == "gpu" and not _gpu():
            break   # the rest of the page builds on the GPU's results
        if b.mark.startswith("needs "):
            module = b.mark.split()[1]
            if not importable(module):
                pytest.skip(f"{where}: {needs_reason(module)}")
        expected = b.mark.split()[1] if b.mark.startswith("raises ") else None
        # a file of its own, so tegula can read the source of the kernels it defines
        path = tmp_path / f"{page.stem}_line{b.line + 1}.py"
        path.write_text(b.body)
        code = compile(b.body, str(path), "exec")
        out = io.StringIO()
        try:
            with contextlib.redirect_stdout(out):
                exec(code, namespace)
        except Exception as e:   # noqa: BLE001 (the block's own error, named with its line)
            if expected is not None and type(e).__name__ == expected:
                ran += 1
                continue
            missing = getattr(e, "name", None) or ""
            extra = next((m for m in EXTRAS if missing == m or missing.startswith(m + ".")), None)
            if isinstance(e, ModuleNotFoundError) and extra is not None:
                pytest.skip(f"{where}: {needs_reason(extra)}")   # an optional extra not installed
            raise AssertionError(f"{where}: the block raised {type(e).__name__}: {e}") from e
        assert expected is None, f"{where}: the block should raise {expected} (its mark says so)"
        ran += 1
    if ran == 0 and not _gpu():
        pytest.skip(f"{_rel(page)}: every block needs a GPU")


def test_every_mark_is_known_and_python_blocks_parse():
    for page in PAGES:
        for b in blocks(page):
            where = f"{_rel(page)}:{b.line + 1}"
            assert b.mark in ("", "gpu", "fragment") or re.fullmatch(r"(raises|needs) [\w.]+", b.mark), \
                f"{where}: unknown doc-test mark {b.mark!r}"
            if b.lang == "python":
                ast.parse(b.body, where)


# -- the figures pages quote --------------------------------------------------------------------

def test_trace_page_lists_the_sm90a_pipeline():
    from tegula.transform import pipeline_for

    text = (ROOT / "docs/tools/trace.md").read_text()
    table = next(b for b in blocks(ROOT / "docs/tools/trace.md") if b.lang == "" and "pass" in b.body)
    rows = [ln.split() for ln in table.body.splitlines()[1:] if ln.strip() and ln.split()[0].isdigit()]
    assert [r[1] for r in rows] == ["input", *pipeline_for("cuda:sm_90a").names()], text[:0]


def test_layout_page_lists_the_buffers_plot_kernel_layouts_returns():
    from tegula.tools.plot import kernel_layouts

    sys.path.insert(0, str(ROOT / "examples"))
    try:
        from gemm import matmul
    finally:
        sys.path.remove(str(ROOT / "examples"))
    page = ROOT / "docs/tools/layouts.md"
    calls = [b for b in blocks(page) if "layouts(matmul" in b.body]
    assert len(calls) == 2
    for b in calls:   # each call's comment names the buffers it returns, in order
        target = re.search(r'target="([^"]+)"', b.body).group(1)
        quoted = re.findall(r"'(\w+)':", re.search(r"# \{(.*)\}", b.body).group(1))
        got = kernel_layouts(matmul, 1024, 1024, 1024, block_M=64, block_N=64, target=target)
        assert quoted == list(got), (target, quoted, list(got))
