"""A trace as one self-contained HTML page: no scripts, no network, no external assets.

The page has a table of pass times (each row links to its pass), then every step in order: the
IR after the pass, with the lines the pass added highlighted and the lines it removed shown
struck through (a checkbox at the top hides removed lines), and any verifier problems.
"""
from __future__ import annotations

import difflib
import html
from typing import Any, Optional

_CSS = """
body { font-family: system-ui, sans-serif; margin: 1.5em; color: #1b1b1b; background: #fdfdfd; }
h1 { font-size: 1.3em; } h2 { font-size: 1.05em; margin: 0; }
table.times { border-collapse: collapse; margin: 0.8em 0 1.2em; }
table.times td, table.times th { border: 1px solid #ccc; padding: 2px 10px; text-align: right; }
table.times td.name, table.times th.name { text-align: left; }
table.times td.bar { text-align: left; width: 220px; }
.bar span { display: inline-block; height: 0.8em; background: #5b8def; }
section.step { border: 1px solid #ddd; border-radius: 4px; margin: 0.8em 0; padding: 0.5em 0.8em; }
.meta { color: #666; font-weight: normal; font-size: 0.9em; }
pre.ir { font-family: ui-monospace, Menlo, Consolas, monospace; font-size: 12px; line-height: 1.35;
         background: #f6f8fa; padding: 0.5em; overflow-x: auto; margin: 0.4em 0 0; }
pre.ir span { display: block; white-space: pre; }
.add { background: #d7f5dd; }
.del { background: #fbe0e0; color: #8a1f1f; text-decoration: line-through; }
.problem { color: #b00020; font-family: ui-monospace, monospace; }
.error { color: #b00020; font-weight: bold; }
#hide-del:checked ~ main .del { display: none; }
"""


def _lines(prev: Optional[str], cur: str) -> tuple[str, int, int]:
    """``cur`` as HTML lines, marked against ``prev``; and the counts of added and removed lines."""
    new = cur.rstrip("\n").split("\n")
    if prev is None:
        return "".join(f"<span>{html.escape(x) or ' '}</span>" for x in new), 0, 0
    old = prev.rstrip("\n").split("\n")
    out: list[str] = []
    added = removed = 0
    sm = difflib.SequenceMatcher(None, old, new, autojunk=False)
    for tag, i1, i2, j1, j2 in sm.get_opcodes():
        if tag == "equal":
            out.extend(f"<span>{html.escape(x) or ' '}</span>" for x in new[j1:j2])
            continue
        for x in old[i1:i2]:
            out.append(f'<span class="del">{html.escape(x) or " "}</span>')
            removed += 1
        for x in new[j1:j2]:
            out.append(f'<span class="add">{html.escape(x) or " "}</span>')
            added += 1
    return "".join(out), added, removed


def trace_to_html(tr: Any, title: Optional[str] = None) -> str:
    """The page for a :class:`~tegula.tools.trace.Trace` (see the module docstring)."""
    title = title or f"tegula trace: {tr.func_name} ({tr.target})"
    longest = max((s.seconds for s in tr), default=0.0) or 1.0
    rows = []
    for i, s in enumerate(tr):
        width = int(200 * s.seconds / longest)
        rows.append(
            f'<tr><td>{i}</td><td class="name"><a href="#step-{i}">{html.escape(s.name)}</a></td>'
            f"<td>{s.seconds * 1e3:.3f}</td>"
            f'<td class="bar"><span style="width:{width}px"></span></td>'
            f"<td>{len(s.problems)}</td></tr>")
    rows.append(f'<tr><td></td><td class="name"><b>total</b></td><td><b>{tr.total_seconds * 1e3:.3f}'
                f'</b></td><td class="bar"></td><td>{len(tr.problems)}</td></tr>')
    sections = []
    prev: Optional[str] = None
    for i, s in enumerate(tr):
        body, added, removed = _lines(prev, s.ir)
        change = "" if prev is None else (f" · +{added} −{removed} lines" if added or removed
                                          else " · no change")
        problems = "".join(f'<div class="problem">verifier: {html.escape(p)}</div>' for p in s.problems)
        sections.append(
            f'<section class="step" id="step-{i}"><h2>[{i}] {html.escape(s.name)} '
            f'<span class="meta">{s.seconds * 1e3:.3f} ms{change}</span></h2>'
            f'{problems}<pre class="ir">{body}</pre></section>')
        prev = s.ir
    error = ""
    if tr.error is not None:
        error = (f'<p class="error">The pipeline stopped after step {len(tr) - 1}: '
                 f"{html.escape(type(tr.error).__name__)}: {html.escape(str(tr.error))}</p>")
    return (
        "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
        f"<title>{html.escape(title)}</title><style>{_CSS}</style></head><body>"
        f"<h1>{html.escape(title)}</h1>"
        '<input type="checkbox" id="hide-del"><label for="hide-del"> hide removed lines</label>'
        "<main>"
        '<table class="times"><tr><th>#</th><th class="name">pass</th><th>ms</th><th class="bar">'
        "</th><th>problems</th></tr>" + "".join(rows) + "</table>" + error
        + "".join(sections) + "</main></body></html>\n")
