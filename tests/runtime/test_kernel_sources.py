"""``JITKernel``'s TileLang source API: ``get_kernel_source`` / ``kernel_source``,
``get_host_source`` / ``host_source``, ``show_source``, ``export_sources``, ``print_source_code``
(TileLang's older name), and the tuning result accessors."""
import numpy as np
import pytest

import tegula
import tegula.language as T
from tegula.backends.cuda import compiler
from tegula.errors import ArgumentError, ConfigError


def _double(n, block):
    @T.prim_func
    def double(A: T.Tensor((n,), "float32"), B: T.Tensor((n,), "float32")):
        with T.Kernel(T.ceildiv(n, block), threads=32) as bx:
            for i in T.Parallel(block):
                B[bx * block + i] = A[bx * block + i] * 2.0
    return double


def test_sources_shown_and_exported(tmp_path, capsys):
    k = tegula.compile(_double(128, 64), out_idx=[-1], target="cpu")
    a = np.random.default_rng().standard_normal(128).astype(np.float32)
    np.testing.assert_allclose(k(a), a.astype(np.float64) * 2.0, rtol=1e-6)
    src = k.get_kernel_source()
    assert "T.Kernel" in src and k.kernel_source == src == k.get_kernel_source(kernel_only=False)
    assert k.get_host_source() == k.host_source == ""  # the CPU target launches nothing
    k.show_source()
    assert src in capsys.readouterr().out
    k.print_source_code()
    assert src in capsys.readouterr().out
    k.show_source("both")
    out = capsys.readouterr().out
    assert "===== Kernel Source =====" in out and "===== Host Source =====" in out and src in out
    k.print_source_code(file=str(tmp_path / "sub" / "k.txt"))
    assert (tmp_path / "sub" / "k.txt").read_text() == src
    k.export_sources(kernel_path=str(tmp_path / "a.txt"), host_path=str(tmp_path / "h.txt"))
    assert (tmp_path / "a.txt").read_text() == src and (tmp_path / "h.txt").read_text() == ""
    with pytest.raises(ArgumentError, match="kernel_path"):
        k.export_sources()
    with pytest.raises(ArgumentError, match="'kernel', 'host', 'both'"):
        k.show_source("device")


@pytest.mark.skipif(not compiler.available_backends(), reason="no CUDA compiler (NVRTC or nvcc)")
def test_cuda_host_source_names_each_launch():
    k = tegula.compile(_double(256, 64), out_idx=[-1], target="cuda:sm_80")
    host = k.get_host_source()
    assert host.startswith("// launch ") and "(4, 1, 1)" in host and "(32, 1, 1)" in host
    assert "__global__" in k.kernel_source


def test_tuner_result():
    k = tegula.compile(_double(128, 64), out_idx=[-1], target="cpu")
    with pytest.raises(ConfigError, match="not tuned"):
        k.get_tuner_result()
    assert k.update_tuner_result(0.5, {"block": 64}, 0.7) is k
    assert k.get_tuner_result() == {"latency": 0.5, "config": {"block": 64}, "ref_latency": 0.7}
