"""Every example kernel goes through the CUDA pipeline and compiles for sm_80 and sm_90a
(no GPU needed: NVRTC or nvcc compiles ahead of time)."""
import importlib
import re
import sys
from pathlib import Path

import pytest

import tegula
from tegula import config
from tegula.backends.cuda.compiler import available_backends

EXAMPLES = Path(__file__).resolve().parents[3] / "examples"

pytestmark = pytest.mark.skipif(not available_backends(), reason="no CUDA compiler (NVRTC or nvcc) here")


def ex(name):
    sys.path.insert(0, str(EXAMPLES))
    try:
        return importlib.import_module(name)
    finally:
        sys.path.pop(0)


CASES = {
    "gemm": lambda: ex("gemm").matmul.get_tir(200, 130, 70, 64, 64, 32),
    "gemm_bf16_big_tiles": lambda: ex("gemm").matmul.get_tir(512, 512, 512, 128, 256, 32, 3, 256, dtype="bfloat16"),
    "flash_attention": lambda: ex("flash_attention").flash_attention(1, 4, 300, 64),
    "flash_attention_causal_gqa": lambda: ex("flash_attention").flash_attention(2, 8, 200, 128, True, 4, 128, 64, 2),
    "rmsnorm": lambda: ex("rmsnorm").rms_norm(100, 512),
    "softmax": lambda: ex("softmax").softmax(256),
    "elementwise_add": lambda: ex("elementwise_add").elementwise_add(100, 70),
    "gemm_int8": lambda: ex("gemm_int8").matmul_int8.get_tir(128, 128, 128)
    if hasattr(ex("gemm_int8").matmul_int8, "get_tir") else ex("gemm_int8").matmul_int8(128, 128, 128),
    "splitk": lambda: ex("splitk_gemm").splitk_matmul(128, 128, 256),
    "quantize": lambda: ex("quantize").quantize_rows(64, 128),
    "linear_macro": lambda: ex("linear_macro").linear(64, 64, 64),
    "gemm_fp8": lambda: ex("gemm_fp8").matmul_fp8.__wrapped__(256, 256, 256, 64, 128, 64, 2, 128, promote=1,
                                                              scale_rows=True, bias=True, activation="silu"),
}


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
@pytest.mark.parametrize("name", sorted(CASES))
def test_example_compiles(name, arch, tmp_path):
    with config.override(cache_dir=str(tmp_path)):
        k = tegula.compile(CASES[name](), target=f"cuda:{arch}")
    src = k.get_kernel_source()
    assert "__global__" in src
    # the generated code points back at the kernel's own source lines
    assert re.search(r"// \w+\.py:\d+  ", src)
    assert len(k.artifact.cubin) > 1000


def test_gemm_uses_tensor_cores_and_async_copies(tmp_path):
    with config.override(cache_dir=str(tmp_path)):
        k = tegula.compile(ex("gemm").matmul.get_tir(256, 256, 256), target="cuda:sm_80")
        ragged = tegula.compile(CASES["gemm"](), target="cuda:sm_80")
    src = k.get_kernel_source()
    assert "tl::mma_m16n8k16_f16_f32" in src and "tl::ldmatrix<4" in src
    assert "tl::cp_async_zfill<16>" in src and "tl::cp_async_wait<1>" in src
    # rows of 70 halves are not 16-byte aligned: narrower async copies, still guarded
    assert "tl::cp_async_zfill<4>" in ragged.get_kernel_source()


def test_cached_load_skips_lowering(tmp_path, monkeypatch):
    with config.override(cache_dir=str(tmp_path)):
        first = tegula.compile(CASES["softmax"](), out_idx=[-1], target="cuda:sm_80")
        from tegula.transform import Pipeline

        def no_lowering(*a, **k):
            raise AssertionError("a cached build must not lower again")

        monkeypatch.setattr(Pipeline, "run", no_lowering)
        second = tegula.compile(CASES["softmax"](), out_idx=[-1], target="cuda:sm_80")
    assert second.artifact.metadata["cached"] is True
    assert second.get_kernel_source() == first.get_kernel_source()
    assert second.artifact.cubin == first.artifact.cubin
    assert [k.name for k in second.artifact.module.kernels] == [k.name for k in first.artifact.module.kernels]


def test_too_much_shared_memory_is_a_resource_error_naming_buffers(tmp_path):
    from tegula import errors

    prim = ex("gemm").matmul.get_tir(1024, 1024, 1024, 256, 256, 128, 4, 256)
    with config.override(cache_dir=str(tmp_path)), pytest.raises(errors.ResourceError) as ei:
        tegula.compile(prim, target="cuda:sm_80")
    msg = str(ei.value)
    assert "A_shared [4, 256, 128] float16 = 262144 B" in msg
    assert "166912" in msg and "num_stages" in msg and "gemm.py:" in msg
