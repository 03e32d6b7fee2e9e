"""The Ascend host on the CPU: ``python -m tegula run --target ascend-emu:ARCH`` and
``tegula.compat.npu_host(arch)`` stand in for ``torch_npu`` / ``torch.npu`` / NPU tensors, and
kernels default to the emulator of that machine; TileLang-Ascend's host API."""
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tegula
from tegula.compat.npu_host import npu_host
from tegula.errors import UnsupportedError

torch = pytest.importorskip("torch")

PROGRAM = textwrap.dedent('''
    import sys
    import tilelang
    import tilelang.language as T
    import torch
    import torch_npu

    tilelang.cache.clear_cache()
    assert tilelang.math.next_power_of_2(5) == 8
    from tilelang.intrinsics import make_zn_layout, make_nz_layout  # noqa: F401

    pass_configs = {tilelang.PassConfigKey.TL_ASCEND_AUTO_SYNC: True,
                    tilelang.PassConfigKey.TL_ASCEND_MEMORY_PLANNING: True,
                    tilelang.PassConfigKey.TL_ASCEND_AUTO_CV_COMBINE: True,
                    tilelang.PassConfigKey.TL_ASCEND_AUTO_CV_SYNC: True}

    @tilelang.jit(out_idx=[-1], pass_configs=pass_configs, target="pto")
    def add(M, N, bm):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float"), B: T.Tensor((M, N), "float"), C: T.Tensor((M, N), "float")):
            with T.Kernel(M // bm, is_npu=True) as (cid, vid):
                a = T.alloc_ub((bm // 2, N), "float")
                b = T.alloc_ub((bm // 2, N), "float")
                with T.Scope("V"):
                    T.copy(A[cid * bm + vid * bm // 2, 0], a)
                    T.copy(B[cid * bm + vid * bm // 2, 0], b)
                    T.tile.add(a, a, b)
                    T.copy(a, C[cid * bm + vid * bm // 2, 0])
        return main

    torch.npu.set_device(0)
    props = torch.npu.get_device_properties("npu")
    print("cores", props.cube_core_num, props.vector_core_num, torch.npu.device_count())
    kernel = add(128, 64, 64)
    print("target", kernel.target)
    a = torch.randn(128, 64).npu()
    b = torch.randn(128, 64, device="npu")
    start = torch.npu.Event(enable_timing=True)
    end = torch.npu.Event(enable_timing=True)
    start.record()
    c = kernel(a, b)
    end.record()
    torch.npu.synchronize()
    assert start.elapsed_time(end) >= 0
    torch.testing.assert_close(c, a + b)
    print("device", c.device, torch.zeros(2, device=torch.device("npu")).device, b.to("npu").device)
    try:
        torch_npu.npu_fusion_attention(a, a, a)
    except Exception as e:
        print(type(e).__name__, e)
    print("Kernel Output Match!")
''')


@pytest.mark.parametrize("arch, cores", [("a2a3", 24), ("a5", 32)])
def test_run_target_stands_in_for_the_ascend_host(tmp_path, arch, cores):
    prog = tmp_path / "prog.py"
    prog.write_text(PROGRAM)
    env = dict(os.environ, PYTHONPATH=os.getcwd())
    r = subprocess.run([sys.executable, "-m", "tegula", "run", "--target", f"ascend-emu:{arch}", str(prog)],
                       capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert r.returncode == 0, r.stderr[-3000:]
    out = r.stdout
    assert f"cores {cores} {2 * cores} 1" in out
    assert f"target ascend-emu:{arch}" in out
    assert "device cpu cpu cpu" in out
    assert "UnsupportedError torch_npu.npu_fusion_attention needs Ascend hardware" in out
    assert "Kernel Output Match!" in out


def test_run_target_rejects_an_unknown_target(tmp_path):
    prog = tmp_path / "prog.py"
    prog.write_text("print('ran')\n")
    r = subprocess.run([sys.executable, "-m", "tegula", "run", "--target", "ascend-emu:a9", str(prog)],
                       capture_output=True, text=True, timeout=120)
    assert r.returncode == 2 and "a9" in r.stderr and "ran" not in r.stdout


def _no_npu() -> bool:
    """No NPU outside the stand-in: torch.npu absent, or (once a stand-in named torch's device
    slot 'npu') present and answering that none is available."""
    return not hasattr(torch, "npu") or (not torch.npu.is_available() and torch.npu.device_count() == 0)


def test_npu_host_in_process_and_nothing_active_outside():
    assert "torch_npu" not in sys.modules and _no_npu()
    with npu_host("a5") as host:
        import torch_npu

        assert host.arch == "a5"
        x = torch.ones(3).npu()
        assert x.device.type == "cpu" and torch.npu.is_available()
        assert torch.npu.get_device_properties(0).cube_core_num == 32
        assert str(tegula.target.parse_target("auto")) == "ascend-emu:a5"
        assert str(tegula.target.parse_target("pto")) == "ascend-emu:a5"
        assert str(tegula.target.parse_target("ascendc")) == "ascend-emu:a5"
        with pytest.raises(UnsupportedError, match="torch_npu.npu_rotary_mul needs Ascend hardware"):
            torch_npu.npu_rotary_mul(x)
        with pytest.raises(UnsupportedError, match="torch.ops.npu.npu_swiglu needs Ascend hardware"):
            torch.ops.npu.npu_swiglu(x)
    assert "torch_npu" not in sys.modules and _no_npu()
    assert not hasattr(torch.Tensor, "npu")
    assert str(tegula.target.parse_target("ascendc")) == "ascendc:a2a3"
    with pytest.raises((RuntimeError, ImportError)):  # no NPU device outside the stand-in
        torch.zeros(1, device="npu")


def test_jit_workspace_idx_is_allocated_and_hidden():
    import tegula.language as T

    @tegula.jit(out_idx=[2], workspace_idx=[1], target="ascend-emu:a2a3",
                pass_configs={"tl.ascend_auto_sync": True})
    def twice(M, N):
        @T.prim_func
        def main(A: T.Tensor((M, N), "float32"), W: T.Tensor((M, N), "float32"),
                 C: T.Tensor((M, N), "float32")):
            with T.Kernel(1, is_npu=True) as (cid, vid):
                a = T.alloc_ub((M // 2, N), "float32")
                with T.Scope("V"):
                    T.copy(A[vid * M // 2, 0], a)
                    T.tile.add(a, a, a)
                    T.copy(a, W[vid * M // 2, 0])
                    T.copy(W[vid * M // 2, 0], a)
                    T.tile.add(a, a, 1.0)
                    T.copy(a, C[vid * M // 2, 0])
        return main
    assert twice.__jit_impl__ is twice and twice.__jit_impl__.target == "ascend-emu:a2a3"
    A = torch.randn(32, 16)
    C = twice(32, 16)(A)
    np.testing.assert_allclose(C.numpy(), 2 * A.numpy() + 1, rtol=1e-6)


def test_autotune_configs_function_gets_key_args_and_kwargs():
    seen = []

    def get_configs(key_args, key_kwargs=None):
        seen.append((key_args, key_kwargs))
        return [{"scale": 2.0}, {"scale": 3.0}]

    import tegula.language as T

    @tegula.autotune(configs=get_configs, skip_check=True, warmup=1, rep=1)
    @tegula.jit(out_idx=[-1], target="cpu")
    def k(N, scale=1.0):
        @T.prim_func
        def main(A: T.Tensor((N,), "float32"), B: T.Tensor((N,), "float32")):
            with T.Kernel(1, threads=32) as bx:
                for i in T.Parallel(N):
                    B[i] = A[i] * scale
        return main
    kern = k(64)
    assert seen[0] == ((64,), ())
    a = torch.randn(64)
    out = kern(a)
    assert torch.allclose(out, a * 2.0) or torch.allclose(out, a * 3.0)


def test_ascend_pass_config_keys_are_documented():
    from tegula import passconfig

    for key in ("tl.ascend_memory_planning", "tl.ascend_auto_cv_combine", "tl.ascend_auto_cross_core_sync"):
        assert passconfig.effect(key) != passconfig.NO_EFFECT  # says what tegula does instead
    assert tegula.PassConfigKey.TL_ASCEND_AUTO_CV_SYNC.value == "tl.ascend_auto_cross_core_sync"


def test_intrinsics_layouts_are_the_documented_fractal_orders():
    from tegula.compat.intrinsics import make_nz_layout, make_zn_layout
    from tegula.ir.buffer import Buffer

    b = Buffer("x", (32, 32), "float16", "l1")
    zn, nz = make_zn_layout(b).offsets(), make_nz_layout(b).offsets()
    i, j = np.meshgrid(np.arange(32), np.arange(32), indexing="ij")
    np.testing.assert_array_equal(zn, (i // 16) * 256 + (j // 16) * 32 * 16 + (i % 16) * 16 + j % 16)
    np.testing.assert_array_equal(nz, (i // 16) * 32 * 16 + (j // 16) * 256 + i % 16 + (j % 16) * 16)


def test_torch_compile_works_after_the_npu_host_is_removed():
    """torch's device slot keeps the name 'npu' after the stand-in leaves (a rename is final);
    torch.compile then asks torch.npu whether an NPU is there, and it must answer no, not be
    missing (a RuntimeError inside Dynamo before)."""
    with npu_host("a2a3"):
        assert torch.npu.is_available()
    assert not torch.npu.is_available() and torch.npu.device_count() == 0
    assert "torch_npu" not in sys.modules
    x = torch.randn(8, dtype=torch.float64)
    f = torch.compile(lambda t: t * 2 + 1, fullgraph=True, backend="eager")
    assert torch.equal(f(x), x * 2 + 1)
