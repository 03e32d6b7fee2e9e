"""Layout plots: files are written, one drawn cell per element, labels name the holders."""
import sys

import pytest

from tegula.errors import ArgumentError, ConfigError
from tegula.layout.fragment import FlatLayout, MmaLayout, Replicated, RowLayout, RowsOf
from tegula.layout.shared import RowMajor, Swizzled
from tegula.tools.plot import fragment_holders, holder_label, shared_offsets
from tool_kernels import gemm


def _cells(fig):
    ax = fig.axes[0]
    return sum(len(c.get_paths()) for c in ax.collections), [t.get_text() for t in ax.texts]


@pytest.mark.parametrize("lay", [MmaLayout(32, 16, 2, 1), RowLayout(8, 64, 128, 16, 4),
                                 FlatLayout((4, 8, 16), 64, 2), RowsOf(MmaLayout(32, 16, 2, 1)),
                                 Replicated((3, 5), 32)])
def test_fragment_plot_has_one_cell_per_element(lay):
    pytest.importorskip("matplotlib")
    from tegula.tools.plot import layout_figure

    n = 1
    for d in lay.shape:
        n *= d
    rects, labels = _cells(layout_figure(lay))
    assert rects == n and len(labels) == n
    assert all(label.startswith("T") for label in labels)


def test_fragment_labels_name_thread_and_register():
    pytest.importorskip("matplotlib")
    from tegula.tools.plot import layout_figure

    lay = MmaLayout(32, 16, 2, 1)
    h = fragment_holders(lay)
    assert h[(0, 0)] == [(0, 0)] and h[(0, 1)] == [(0, 1)] and h[(8, 0)] == [(0, 2)]
    assert h[(16, 0)] == [(32, 0)]
    _, labels = _cells(layout_figure(lay))
    assert labels[:2] == ["T0:0", "T0:1"] or {"T0:0", "T0:1"} <= set(labels)
    # replicated cells list every holder
    assert holder_label([(0, 3), (1, 3), (2, 3), (3, 3), (32, 3)]) == "T0-3,32:3"
    _, rep = _cells(layout_figure(Replicated((2, 2), 32)))
    assert sorted(rep) == ["T0-31:0", "T0-31:1", "T0-31:2", "T0-31:3"]


def test_shared_plot_offsets_and_bank_groups():
    pytest.importorskip("matplotlib")
    from tegula.tools.plot import layout_figure

    sw = Swizzled((32, 64), 2)
    offs = shared_offsets(sw)
    assert sorted(offs.ravel().tolist()) == list(range(32 * 64))
    # an ldmatrix phase (8 rows, one 16-byte chunk column) hits 8 distinct bank groups
    assert len({int(offs[r, 0]) * 2 // 16 % 8 for r in range(8)}) == 8
    assert (shared_offsets(RowMajor((4, 8))).ravel() == list(range(32))).all()
    rects, labels = _cells(layout_figure(sw))
    assert rects == 32 * 64 and sorted(int(x) for x in labels) == list(range(32 * 64))
    rects, _ = _cells(layout_figure(Swizzled((3, 32, 64), 2)))  # stages: the first tile is drawn
    assert rects == 32 * 64


def test_plot_layout_writes_each_format(tmp_path):
    pytest.importorskip("matplotlib")
    from tegula.tools import plot_layout

    paths = plot_layout(MmaLayout(16, 16, 1, 1), str(tmp_path / "mma.png"))
    assert paths == [str(tmp_path / "mma.png"), str(tmp_path / "mma.svg")]
    assert (tmp_path / "mma.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    svg = (tmp_path / "mma.svg").read_text()
    assert "<svg" in svg and "T31:7" in svg
    with pytest.raises(ConfigError, match="format"):
        plot_layout(MmaLayout(16, 16, 1, 1), str(tmp_path / "x"), formats=("bmp",))
    with pytest.raises(ArgumentError):
        plot_layout("not a layout", str(tmp_path / "y"))


def test_plot_kernel_layouts(tmp_path):
    pytest.importorskip("matplotlib")
    from tegula.tools import plot_kernel_layouts
    from tegula.tools.plot import kernel_layouts

    lays = kernel_layouts(gemm(M=64, N=64, K=64, block_M=32, block_N=32, block_K=32, threads=64),
                          target="cuda:sm_80")
    assert set(lays) == {"A_shared", "B_shared", "C_local"}
    assert isinstance(lays["C_local"][0], MmaLayout) and isinstance(lays["A_shared"][0], Swizzled)
    out = plot_kernel_layouts(gemm, str(tmp_path), M=64, N=64, K=64, block_M=32, block_N=32,
                              block_K=32, threads=64, target="cuda:sm_80", formats=("svg",))
    assert sorted(out) == ["A_shared", "B_shared", "C_local"]
    assert all((tmp_path / f"{n}.svg").exists() for n in out)


def test_missing_matplotlib_is_a_clear_error(monkeypatch, tmp_path):
    from tegula.tools import plot_layout

    monkeypatch.setitem(sys.modules, "matplotlib", None)
    monkeypatch.setitem(sys.modules, "matplotlib.figure", None)
    with pytest.raises(ConfigError, match="pip install matplotlib"):
        plot_layout(MmaLayout(16, 16, 1, 1), str(tmp_path / "m"))
