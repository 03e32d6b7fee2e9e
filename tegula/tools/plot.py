"""Pictures of layouts: which thread and register hold each element of a fragment, where each
element of a shared tile lives and which bank group it falls in.

- A **fragment** (:mod:`tegula.layout.fragment`) is drawn as a grid of its logical elements, each
  cell coloured by the thread holding it and labelled ``T<thread>:<register>``. A replicated
  element lists all its holders, runs of threads written as ranges (``T0-3,32-35:1``), and its cell
  is hatched.
- A **shared layout** (:mod:`tegula.layout.shared`) is drawn as a grid of logical elements, each
  labelled with its physical offset (in elements) and coloured by its 16-byte bank group
  ``offset * elem_bytes // 16 % 8``: a row of 8 distinct colours is a conflict-free ``ldmatrix``
  phase. Leading (pipeline stage) dimensions are not drawn: every stage has the first one's layout.

Tiles of more than two dimensions are drawn with their leading dimensions flattened into rows.
matplotlib is an optional dependency (``pip install matplotlib``, or the ``vis`` extra).
"""
from __future__ import annotations

import os
from typing import Any, Optional, Sequence

import numpy as np

from tegula.errors import ArgumentError, ConfigError
from tegula.ir import expr as E
from tegula.ir.evaluate import HostEvalError, array_fn

_FORMATS = ("png", "svg", "pdf")


def _matplotlib() -> Any:
    try:
        import matplotlib  # noqa: F401
        from matplotlib.figure import Figure
    except ImportError:
        raise ConfigError("plotting layouts needs matplotlib, which is not installed",
                          hint="pip install matplotlib (or pip install 'tegula[vis]')") from None
    return Figure


# -- evaluating layout expressions on whole numpy arrays at once ----------------------------

def evaluate(e: Any, env: dict) -> np.ndarray:
    """An integer index expression evaluated with numpy arrays bound to its variables (in int64,
    casts dropped: :func:`tegula.ir.evaluate.array_fn`)."""
    try:
        f = array_fn(e, lambda v: lambda env: env[v], wide=True)
    except HostEvalError:
        raise ArgumentError(f"cannot evaluate {type(e).__name__} '{e}' in a layout expression") from None
    return f(env)


# -- what to draw -----------------------------------------------------------------------------

def _grid_shape(shape: Sequence[int]) -> tuple[int, int]:
    shape = [int(d) for d in shape]
    if len(shape) <= 1:
        return 1, (shape[0] if shape else 1)
    return int(np.prod(shape[:-1])), shape[-1]


def _cell(coord: Sequence[int], shape: Sequence[int]) -> tuple[int, int]:
    if len(shape) <= 1:
        return 0, int(coord[0]) if coord else 0
    row = 0
    for c, d in zip(coord[:-1], shape[:-1]):
        row = row * int(d) + int(c)
    return row, int(coord[-1])


def fragment_holders(layout: Any) -> dict[tuple[int, ...], list[tuple[int, int]]]:
    """``{logical coordinate: [(thread, register), ...]}`` of a fragment layout."""
    t = E.Var("t")
    threads = np.arange(layout.threads, dtype=np.int64)
    out: dict[tuple[int, ...], list[tuple[int, int]]] = {}
    for k in range(layout.local_size):
        cols = [np.broadcast_to(evaluate(x, {t: threads}), threads.shape) for x in layout.coords(t, k)]
        for th, coord in zip(threads.tolist(), zip(*[c.tolist() for c in cols])):
            out.setdefault(tuple(coord), []).append((th, k))
    return out


def shared_offsets(layout: Any) -> np.ndarray:
    """Physical offsets (in elements) of every logical element of the first tile of a shared
    layout, as an array of the tile's last two dimensions (one dimension: one row)."""
    shape = [int(d) for d in layout.shape]
    tile = shape[-2:] if len(shape) >= 2 else shape
    idx = np.indices(tile, dtype=np.int64)
    names = [E.Var(f"i{d}") for d in range(len(shape))]
    env = {v: np.zeros(tile, dtype=np.int64) for v in names}
    for v, ix in zip(names[len(shape) - len(tile):], idx):
        env[v] = ix
    return np.broadcast_to(evaluate(layout.offset(names), env), tile).astype(np.int64)


def _ranges(xs: list[int]) -> str:
    xs = sorted(set(xs))
    parts, start = [], xs[0]
    for a, b in zip(xs, xs[1:] + [None]):
        if b != a + 1:
            parts.append(str(start) if start == a else f"{start}-{a}")
            start = b
    return ",".join(parts)


def holder_label(holders: list[tuple[int, int]]) -> str:
    """``T<thread>:<register>``; several holders grouped by register, threads as ranges."""
    by_reg: dict[int, list[int]] = {}
    for th, k in holders:
        by_reg.setdefault(k, []).append(th)
    return " ".join(f"T{_ranges(ths)}:{k}" for k, ths in sorted(by_reg.items()))


def _is_fragment(layout: Any) -> bool:
    from tegula.layout.fragment import Fragment

    return isinstance(layout, Fragment)


def _is_shared(layout: Any) -> bool:
    return callable(getattr(layout, "offset", None)) and hasattr(layout, "shape")


def _palette(n: int) -> list:
    from matplotlib import colormaps

    colors = []
    for name in ("tab20", "tab20b", "tab20c", "Pastel1", "Set3"):
        colors.extend(colormaps[name].colors)
    return [colors[i % len(colors)] for i in range(n)]


def layout_figure(layout: Any, title: Optional[str] = None, elem_bytes: Optional[int] = None) -> Any:
    """A matplotlib Figure of ``layout`` (a fragment or a shared layout): one Rectangle per cell in
    the axes' PatchCollections, one label per cell."""
    Figure = _matplotlib()
    from matplotlib.collections import PatchCollection
    from matplotlib.patches import Rectangle

    if _is_fragment(layout):
        shape = tuple(int(d) for d in layout.shape)
        rows, cols = _grid_shape(shape)
        holders = fragment_holders(layout)
        colors = _palette(layout.threads)
        cells = []
        for coord, hs in holders.items():
            r, c = _cell(coord, shape)
            cells.append((r, c, colors[hs[0][0]], holder_label(hs), len(hs) > 1))
        desc = f"{layout.describe()}: {layout.threads} threads x {layout.local_size} registers"
    elif _is_shared(layout):
        eb = elem_bytes or getattr(layout, "elem_bytes", None) or 2
        offs = shared_offsets(layout)
        if offs.ndim == 1:
            offs = offs[None, :]
        rows, cols = offs.shape
        from matplotlib import colormaps

        colors = list(colormaps["tab10"].colors[:8])  # 8 clearly distinct bank groups
        cells = [(r, c, colors[int(offs[r, c]) * eb // 16 % 8], str(int(offs[r, c])), False)
                 for r in range(rows) for c in range(cols)]
        stages = int(np.prod(layout.shape[:-2])) if len(layout.shape) > 2 else 1
        desc = (f"{layout.describe()}: {eb}-byte elements, colour = 16-byte bank group"
                + (f" (first of {stages} stages)" if stages > 1 else ""))
    else:
        raise ArgumentError(f"plot_layout takes a fragment or a shared layout, got {type(layout).__name__}",
                            hint="layouts live in tegula.layout.fragment and tegula.layout.shared")

    longest = max((len(x[3]) for x in cells), default=1)
    cw, ch = max(0.5, 0.07 * longest), 0.3
    width, height = max(3.0, cols * cw + 1.0), max(2.0, rows * ch + 1.2)
    fig = Figure(figsize=(min(width, 320.0), min(height, 320.0)))
    ax = fig.add_axes((0.6 / width, 0.3 / height, 1 - 0.8 / width, 1 - 1.2 / height))
    # one collection per fill style: one Rectangle per cell, drawn fast
    for replicated in (False, True):
        part = [x for x in cells if x[4] == replicated]
        if part:
            ax.add_collection(PatchCollection(
                [Rectangle((c, r), 1, 1) for r, c, *_ in part], facecolors=[x[2] for x in part],
                edgecolors="white", linewidths=0.5, hatch="///" if replicated else None))
    for r, c, _, label, _ in cells:
        ax.text(c + 0.5, r + 0.5, label, ha="center", va="center", fontsize=5.5)
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    step_c, step_r = max(1, cols // 32), max(1, rows // 32)
    ax.set_xticks([c + 0.5 for c in range(0, cols, step_c)], [str(c) for c in range(0, cols, step_c)], fontsize=6)
    ax.set_yticks([r + 0.5 for r in range(0, rows, step_r)], [str(r) for r in range(0, rows, step_r)], fontsize=6)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for s in ax.spines.values():
        s.set_visible(False)
    ax.set_title((title + "\n" if title else "") + desc, fontsize=8, pad=14)
    return fig


def _stem(path: str) -> str:
    base, ext = os.path.splitext(str(path))
    return base if ext.lstrip(".").lower() in _FORMATS else str(path)


def plot_layout(layout: Any, path: str, formats: Sequence[str] = ("png", "svg"), *,
                title: Optional[str] = None, elem_bytes: Optional[int] = None) -> list[str]:
    """Draw ``layout`` to ``<path>.<format>`` for each format; returns the paths written.

    ``layout``: a fragment (e.g. ``MmaLayout(64, 64, 2, 2)``) or a shared layout (``RowMajor``,
    ``Swizzled``); ``elem_bytes`` is a shared layout's element size when it has none of its own
    (default 2). A suffix of ``path`` naming a format is dropped. Raises ConfigError when
    matplotlib is missing or a format is unknown, ArgumentError for something not a layout.
    """
    bad = [f for f in formats if f.lower() not in _FORMATS]
    if bad:
        raise ConfigError(f"unknown plot format(s) {bad}", hint=f"formats: {', '.join(_FORMATS)}")
    fig = layout_figure(layout, title, elem_bytes)
    stem = _stem(path)
    os.makedirs(os.path.dirname(os.path.abspath(stem)), exist_ok=True)
    out = []
    from matplotlib import rc_context

    with rc_context({"svg.fonttype": "none"}):  # labels stay text: small, searchable files
        for fmt in formats:
            p = f"{stem}.{fmt.lower()}"
            fig.savefig(p, format=fmt.lower(), dpi=110)
            out.append(p)
    return out


def kernel_layouts(kernel_or_func: Any, *args: Any, target: Any = None,
                   pass_configs: Optional[dict] = None, **kwargs: Any) -> dict[str, tuple[Any, int]]:
    """``{buffer name: (layout, elem_bytes)}``: the fragment layouts inferred for a kernel and the
    shared layouts chosen for it, as the CUDA pipeline sees them when lowering tile ops."""
    from tegula.backends.cuda.passes.layout_inference import choose_shared_layouts, infer_layouts
    from tegula.ir.stmt import Kernel
    from tegula.ir.visitor import post_order_visit
    from tegula.layout.shared import RowMajor
    from tegula.target import kind_of, parse_target
    from tegula.tools.trace import pipeline_to_trace, resolve

    if target is not None and not kind_of(parse_target(target)).uses_cuda_pipeline:
        raise ConfigError(f"layouts are inferred by the CUDA pipeline, not for target '{target}'",
                          hint="pass target='cuda:sm_80' or 'cuda:sm_90a' (no GPU needed)")
    func, pipeline = pipeline_to_trace(resolve(kernel_or_func, args, kwargs), target, pass_configs, None)
    func = pipeline.until("LowerTileOps").run(func, instruments=[])
    kernels: list = []
    post_order_visit(func.body, lambda n: kernels.append(n) if isinstance(n, Kernel) else None)
    out: dict[str, tuple[Any, int]] = {}
    for i, k in enumerate(kernels):
        prefix = f"k{i}_" if len(kernels) > 1 else ""
        plan = infer_layouts(k)
        for buf, lay in plan.fragments.items():
            out[prefix + buf.name] = (lay, buf.dtype.itemsize)
        chosen = choose_shared_layouts(k, plan.threads)
        for buf in k.allocs:
            if buf.is_shared:
                lay = chosen.get(buf) or RowMajor(tuple(int(d) for d in buf.shape))
                out[prefix + buf.name] = (lay, buf.dtype.itemsize)
    return out


def plot_kernel_layouts(kernel_or_func: Any, out_dir: str, *args: Any, target: Any = None,
                        formats: Sequence[str] = ("png", "svg"), pass_configs: Optional[dict] = None,
                        **kwargs: Any) -> dict[str, list[str]]:
    """Plot every layout of a kernel (see :func:`kernel_layouts`) into ``out_dir`` as
    ``<buffer>.<format>``; returns ``{buffer name: paths}``. ``args``/``kwargs`` go to a factory;
    ``target`` defaults as in :func:`tegula.tools.trace`."""
    _matplotlib()
    layouts = kernel_layouts(kernel_or_func, *args, target=target, pass_configs=pass_configs, **kwargs)
    os.makedirs(out_dir, exist_ok=True)
    return {name: plot_layout(lay, os.path.join(out_dir, name), formats, title=name, elem_bytes=eb)
            for name, (lay, eb) in layouts.items()}
