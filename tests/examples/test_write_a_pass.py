"""examples/write_a_pass.py: the guide's passes (docs/passes.md) through pipeline_for(...).insert_after
on cpu, cuda-emu and cuda:sm_90a (compile-only)."""
import contextlib
import io
import re

import pytest

import tegula
from tegula.layout import Swizzled
from tegula.tools import trace


def _report(text):
    """{buffer: (loads, stores)} from the printed report."""
    return {m[1]: (int(m[2]), int(m[3])) for m in re.finditer(r"^  (\w+)\s+(\d+)\s+(\d+)$", text, re.M)}


def test_the_count_on_cpu_is_the_tile_traffic(example, seed, capsys):
    ex = example("write_a_pass")
    M, N, K = 128, 192, 96
    assert ex.main(M, N, K, target="cpu", seed=seed) < 1e-2
    out = capsys.readouterr().out
    assert "CountGlobalAccesses" in out.splitlines()[1]
    # every block (64 x 64 tile of C) reads its rows of A and columns of B once, writes its tile once
    assert _report(out) == {"A": (M * K * (N // 64), 0), "B": (K * N * (M // 64), 0), "C": (0, M * N)}


def test_after_layout_inference_on_cuda_emu(example, seed, capsys):
    ex = example("write_a_pass")
    M, N, K = 128, 128, 128
    assert ex.main(M, N, K, target="cuda-emu", seed=seed) < 1e-2  # still right with row-major tiles
    out = capsys.readouterr().out
    # after PipelineCopies the copy for the next step is issued under a guard, which the count
    # includes: K / 32 = 4 steps, 5 copies of each tile
    assert _report(out)["A"] == (M * K * (N // 64) * 5 // 4, 0)
    assert "-            A_shared: Swizzled(shape=(2, 64, 32), elem_bytes=2)," in out
    assert "+            A_shared: RowMajor(shape=(2, 64, 32))," in out


def test_the_rewrite_changes_the_lowered_code(example):
    ex = example("write_a_pass")
    func = ex.matmul(128, 128, 128)
    with contextlib.redirect_stdout(io.StringIO()):
        tr = trace(func, target="cuda-emu", pipeline=ex.with_passes("cuda-emu"))
    plain = trace(func, target="cuda-emu")
    assert tr.names().index("RowMajorShared") == tr.names().index("InferLayouts") + 2
    layouts = tr["RowMajorShared"].func.body.annotations["layout_map"]
    assert layouts and not any(isinstance(v, Swizzled) for v in layouts.values())
    assert any(isinstance(v, Swizzled) for v in plain["InferLayouts"].func.body.annotations["layout_map"].values())
    assert " ^ " in plain["LowerTileOps"].ir and " ^ " not in tr["LowerTileOps"].ir


def test_compile_only_for_sm_90a(example, capsys):
    ex = example("write_a_pass")
    pytest.importorskip("cuda.bindings.nvrtc")
    assert ex.main(128, 128, 128, target="cuda:sm_90a") == 0.0
    assert "RowMajorShared" in capsys.readouterr().out
    func = ex.matmul(128, 128, 128)
    # the XOR of the swizzle shows in the addressing on the mma.sync path (on sm_90a's default,
    # TMA and wgmma apply it in hardware)
    with contextlib.redirect_stdout(io.StringIO()):
        mine = tegula.compile(func, out_idx=[-1], target="cuda:sm_80", pipeline=ex.with_passes("cuda:sm_80"))
    plain = tegula.compile(func, out_idx=[-1], target="cuda:sm_80")
    assert "^" in plain.get_kernel_source() and "^" not in mine.get_kernel_source()


def test_a_layout_the_gemm_cannot_use_is_a_layout_error(example):
    import dataclasses

    from tegula.errors import LayoutError
    from tegula.ir.visitor import Mutator
    from tegula.layout import MmaLayout
    from tegula.transform import Pass, pipeline_for

    class FourByOne(Mutator):
        def visit_Kernel(self, k):
            lm = {b: MmaLayout(v.M, v.N, 4, 1) if isinstance(v, MmaLayout) else v
                  for b, v in k.annotations["layout_map"].items()}
            return dataclasses.replace(k, annotations={**k.annotations, "layout_map": lm})

    p = pipeline_for("cuda:sm_80").insert_after("InferLayouts", Pass("FourByOne", lambda f: FourByOne().visit(f)))
    with pytest.raises(LayoutError, match="'C_local'") as e:
        p.run(example("write_a_pass").matmul(128, 128, 128))
    assert "gemm.py:" in str(e.value) and "T.gemm(A_shared, B_shared, C_local)" in str(e.value)
