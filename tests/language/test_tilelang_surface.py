"""TileLang 0.1.15's whole `tilelang.language` surface (tilelang_0_1_15_names.txt, derived from its
sources by derive_tilelang_names.py): every name exists in `tegula.language`, and either has a
meaning (a tegula object that is not a refusal; the feature tests check what it does) or is a
refusal (tegula/language/surface.py) whose use in a kernel raises an UnsupportedError at the
user's line naming it and saying why. Nothing is missing silently."""
from __future__ import annotations

import runpy
from pathlib import Path

import pytest

import tegula
import tegula.language as T
from tegula.language.surface import REFUSED, Refused

NAMES = [n for n in (Path(__file__).parent / "tilelang_0_1_15_names.txt").read_text().split("\n")
         if n and not n.startswith("#")]


def test_names_file_is_tilelang_0_1_15_language_all():
    assert len(NAMES) == len(set(NAMES)) == 713
    assert {"Kernel", "gemm", "alloc_tmem", "float32x2", "warp_reduce_sum", "__exp"} <= set(NAMES)


def test_every_name_exists():
    missing = [n for n in NAMES if not hasattr(T, n)]
    assert not missing, f"{len(missing)} TileLang names missing from tegula.language: {missing}"


def test_refusals_are_tilelang_names_and_not_also_defined():
    assert set(REFUSED) <= set(NAMES), set(REFUSED) - set(NAMES)
    defined = [n for n in REFUSED if n in vars(T)]
    assert not defined, f"both defined and refused: {defined}"


def test_counts():
    refused = [n for n in NAMES if isinstance(getattr(T, n), Refused)]
    print(f"\n{len(NAMES) - len(refused)} names with a meaning, {len(refused)} refused")
    assert len(refused) == len(REFUSED)


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_name_in_a_kernel_is_a_located_error(name, tmp_path):
    src = f"""import tegula.language as T

def build():
    @T.prim_func
    def k(A: T.Tensor((4,), "float32")):
        with T.Kernel(1, threads=32):
            x = T.{name}(A)
    return k
"""
    path = tmp_path / f"prog_{name}.py"
    path.write_text(src)
    scope = runpy.run_path(str(path))
    with pytest.raises(tegula.errors.UnsupportedError) as e:
        scope["build"]()
    msg = str(e.value)
    assert f"T.{name} is not supported by tegula: {REFUSED[name]}" in msg
    assert f"prog_{name}.py:7" in msg and f"x = T.{name}(A)" in msg


def test_refused_attribute_and_annotation_uses():
    with pytest.raises(tegula.errors.UnsupportedError, match="T.WSSyncKind"):
        T.WSSyncKind.ARRIVE
    with pytest.raises(tegula.errors.UnsupportedError, match="needs sm_100"):
        @T.prim_func
        def k(A: T.Tensor((4,), "float32")):
            with T.Kernel(1, threads=128):
                T.tcgen05_cp_warpx4(A)


def test_eager_module():
    from tegula.language import eager

    assert eager.prim_func is T.prim_func and eager.macro is T.macro and eager.const is T.const
    assert eager.bfloat16 == "bfloat16" and eager.float8_e8m0fnu == "float8_e8m0fnu"
    with pytest.raises(tegula.errors.UnsupportedError, match="T.annotate_compile_flags"):
        eager.annotate_compile_flags(["-O3"])
