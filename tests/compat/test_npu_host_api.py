"""TileLang-Ascend's host API under ``python -m tegula run --target ascend-emu:ARCH``: the modules
and names its programs import, and a typed tegula error naming what is missing for the rest."""
import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

pytest.importorskip("torch")

ROOT = pathlib.Path(__file__).resolve().parents[2]


def run_program(tmp_path, code, arch="a2a3", name="prog.py"):
    """Run ``code`` as a program with tegula standing in for tilelang and the Ascend host."""
    (tmp_path / name).write_text(textwrap.dedent(code))
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "tegula", "run", "--target", f"ascend-emu:{arch}", name],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)


def last_error(r):
    """The last line of stderr that names an exception."""
    lines = [ln for ln in r.stderr.splitlines() if "Error" in ln.split(":")[0]]
    return lines[-1] if lines else r.stderr[-300:]


def test_missing_tilelang_module_is_a_named_tegula_error(tmp_path):
    r = run_program(tmp_path, '''
        import tilelang
        from tegula.errors import UnsupportedError
        for name in ("tilelang.no_such_module", "tilelang.jit.adapter.libgen", "tilelang.language.no_such"):
            try:
                __import__(name)
            except UnsupportedError as e:
                assert isinstance(e, ModuleNotFoundError) and e.name == name, e
                assert name in str(e) and "tegula does not have" in str(e)
                print("missing", name)
        import tilelang.jit
        assert callable(tilelang.jit)  # still the decorator after its submodules were asked for
        import tilelang.no_such_at_all
    ''')
    assert r.returncode == 1
    assert r.stdout.split() == ["missing", "tilelang.no_such_module", "missing", "tilelang.jit.adapter.libgen",
                                "missing", "tilelang.language.no_such"]
    assert last_error(r).startswith("tegula.compat.alias.MissingModuleError: tilelang.no_such_at_all is a module")


@pytest.mark.parametrize("arch,cores,ub", [("a2a3", 24, 192 * 1024), ("a5", 32, 248 * 1024)])
def test_carver_arch_ascend_describes_the_machine_model(tmp_path, arch, cores, ub):
    r = run_program(tmp_path, f'''
        from tilelang import carver
        from tilelang.carver.arch.ascend import Ascend, is_ascend_arch, is_cube_supported_precision
        a = Ascend()
        assert is_ascend_arch(a) and a.platform == "ascend"
        assert (a.compute_max_core, a.ub_cap, a.smem_cap) == ({cores}, {ub}, {ub}), a
        assert a.l0a_cap == a.l0b_cap == 64 * 1024 and a.l1_cap == 512 * 1024 and a.cube_shape == [16, 16, 16]
        assert is_cube_supported_precision("float16", "float32", a)
        assert not is_cube_supported_precision("float32", "float16", a)
        assert Ascend(chip_name="Ascend950").compute_max_core == 32
        assert Ascend(chip_name="Ascend910B").compute_max_core == 24
        hints = carver.MatmulTemplate(M=1024, N=1024, K=1024, in_dtype="float16", accum_dtype="float16",
                                      out_dtype="float16").with_arch(a).recommend_hints(topk=5)
        assert 1 <= len(hints) <= 5 and all(h.block[0] * h.rstep[0] * 2 <= a.ub_cap for h in hints)
        try:
            Ascend(chip_name="Ascend310P")
        except Exception as e:
            print(type(e).__name__)
    ''', arch=arch)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ConfigError"]


def test_jit_adapter_names_import_and_say_there_is_no_library(tmp_path):
    r = run_program(tmp_path, '''
        from tilelang.jit.adapter import CythonKernelAdapter, CtypesKernelAdapter, BaseKernelAdapter
        assert issubclass(CythonKernelAdapter, BaseKernelAdapter)
        CtypesKernelAdapter()
    ''')
    assert r.returncode == 1
    assert last_error(r).startswith("tegula.errors.UnsupportedError: tilelang.jit.adapter.CtypesKernelAdapter "
                                    "wraps a kernel library")


def test_ascend_only_modules_and_libraries_are_named_errors(tmp_path):
    r = run_program(tmp_path, '''
        import ctypes, os
        from tegula.errors import UnsupportedError
        assert os.path.isabs(__file__)  # as python sets it for a script
        try:
            import torch_tl_ascend
        except ImportError as e:  # the program's own fallback still works
            assert isinstance(e, UnsupportedError) and e.name == "torch_tl_ascend"
            print("no", e.name)
        try:
            ctypes.CDLL("./kernel_lib.so")
        except OSError as e:
            assert isinstance(e, UnsupportedError) and "kernel_lib.so" in str(e) and "CANN" in str(e)
            print("no", e.name)
        assert ctypes.CDLL(None).getpid() == os.getpid()  # a library that loads is unchanged
        import shmem
    ''')
    assert r.returncode == 1
    assert r.stdout.split() == ["no", "torch_tl_ascend", "no", "./kernel_lib.so"]
    assert last_error(r).startswith("tegula.compat.npu_host.AscendModuleError: module 'shmem' is aclshmem's")


def test_the_ascend_host_undoes_its_modules_and_ctypes():
    import ctypes

    from tegula.compat.npu_host import AscendModuleError, npu_host

    cdll, finders = ctypes.CDLL, list(sys.meta_path)
    with npu_host("a2a3"):
        assert ctypes.CDLL is not cdll
        with pytest.raises(AscendModuleError, match="aclshmem"):
            import shmem  # noqa: F401
    assert ctypes.CDLL is cdll and sys.meta_path == finders
    with pytest.raises(ModuleNotFoundError) as e:
        import shmem  # noqa: F401,F811
    assert type(e.value) is ModuleNotFoundError


@pytest.mark.parametrize("arch,platform", [("a2a3", "A3"), ("a5", "A5")])
def test_engine_lower_and_determine_platform(tmp_path, arch, platform):
    r = run_program(tmp_path, '''
        import numpy as np
        import tilelang
        import tilelang.language as T
        import torch
        from tilelang.utils.target import determine_platform

        print(determine_platform(), determine_platform("A2"))

        def add(M, N, bm):
            @T.prim_func
            def main(A: T.Tensor((M, N), "float"), B: T.Tensor((M, N), "float"), C: T.Tensor((M, N), "float")):
                with T.Kernel(M // bm, is_npu=True) as (cid, vid):
                    a = T.alloc_ub((bm // 2, N), "float")
                    b = T.alloc_ub((bm // 2, N), "float")
                    with T.Scope("V"):
                        T.copy(A[cid * bm + vid * bm // 2, 0], a)
                        T.copy(B[cid * bm + vid * bm // 2, 0], b)
                        T.barrier_all()
                        T.tile.add(a, a, b)
                        T.barrier_all()
                        T.copy(a, C[cid * bm + vid * bm // 2, 0])
            return main

        art = tilelang.engine.lower(add(128, 64, 64))
        assert art.host_mod is None and art.device_mod is None
        assert [p.name for p in art.params] == ["A", "B", "C"] and "T.tile.add" in art.kernel_source
        a, b, c = torch.randn(128, 64).npu(), torch.randn(128, 64).npu(), torch.empty(128, 64).npu()
        art.rt_mod(a, b, c)
        np.testing.assert_allclose(c.numpy(), a.double().numpy() + b.double().numpy(), rtol=1e-6, atol=1e-6)
        print(art.rt_mod.target)
        tilelang.engine.lower(add)
    ''', arch=arch)
    assert r.returncode == 1, r.stderr
    assert r.stdout.split() == [platform, "A2", f"ascend-emu:{arch}"], r.stderr[-1500:]
    assert last_error(r).startswith("tegula.errors.ArgumentError: tilelang.engine.lower: expected a @T.prim_func")


def test_host_ints_of_expression_functions_have_value():
    import tegula.language as T

    for got, want in ((T.min(T.ceildiv(1000, 64), 2), 2), (T.max(3, 7), 7), (T.ceildiv(1000, 64), 16),
                      (T.min(9, 4), 4)):
        assert got == want and got.value == want and type(got.value) is int and got.dtype == "int32"
    assert T.min(2.5, 3) == 2.5 and not hasattr(T.min(2.5, 3), "value")  # floats stay floats
    assert T.max(True, False) is not None and not hasattr(T.ceildiv(10, 3) + 1, "value")
