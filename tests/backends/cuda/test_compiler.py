"""Tests of compile_cuda (NVRTC and nvcc), compile errors, the disk cache and its settings."""
from __future__ import annotations

import os

import pytest

import tegula
from tegula import config
from tegula.backends.cuda import cache, compiler
from tegula.errors import CompileError, ConfigError

BACKENDS = compiler.available_backends()
needs_compiler = pytest.mark.skipif(not BACKENDS, reason="neither NVRTC (cuda-bindings) nor nvcc found")

SAXPY = r"""
#include "tegula/common.h"
extern "C" __global__ void saxpy(float a, const half_t* x, float* y, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * tl::cast<float>(x[i]) + y[i];
}
"""

BROKEN = r"""#include "tegula/common.h"
extern "C" __global__ void broken(float* y) {
  float ok = 1.0f;
  y[threadIdx.x] = ok + undefined_name_here;
  y[0] = 2.0f;
}
"""


@pytest.fixture
def tmp_cache(tmp_path):
    with config.override(cache_dir=str(tmp_path / "cache"), disable_cache=False):
        yield tmp_path / "cache"


# ------------------------------------------------------------------------------ compile_cuda
@needs_compiler
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("arch", ("sm_80", "sm_90a"))
def test_compile_returns_cubin(backend: str, arch: str) -> None:
    with config.override(cuda_backend=backend):
        result = compiler.compile_cuda(SAXPY, arch, name="saxpy")
    assert result.cubin.startswith(b"\x7fELF")
    assert (result.backend, result.arch, result.cached) == (backend, arch, False)
    assert result.seconds > 0
    assert result.ptx is None or ".entry saxpy" in result.ptx


@needs_compiler
@pytest.mark.parametrize("backend", BACKENDS)
def test_fast_math_and_options_are_accepted(backend: str) -> None:
    with config.override(cuda_backend=backend):
        result = compiler.compile_cuda(SAXPY, "sm_80", fast_math=True, options=["-DTL_TEST=1"])
    assert result.cubin


@needs_compiler
@pytest.mark.parametrize("backend", BACKENDS)
def test_compile_error_shows_log_and_source_line(backend: str) -> None:
    with config.override(cuda_backend=backend), pytest.raises(CompileError) as info:
        compiler.compile_cuda(BROKEN, "sm_80", name="broken")
    message = str(info.value)
    assert f"CUDA compilation failed ({backend}, sm_80)" in message
    assert "undefined_name_here" in message and "error" in message  # the compiler's log
    assert ">    4 |   y[threadIdx.x] = ok + undefined_name_here;" in message  # the offending line
    assert "    3 |   float ok = 1.0f;" in message  # with context
    assert "broken.cu" in message
    assert "tegula-nvcc-" not in message.split("command:")[0]  # no temp paths in the log part
    assert info.value.source == BROKEN and "undefined_name_here" in info.value.log


@pytest.mark.parametrize("arch", ("80", "sm80", "compute_80", "sm_90b", ""))
def test_bad_arch_is_rejected(arch: str) -> None:
    with pytest.raises(ConfigError, match="sm_80"):
        compiler.compile_cuda(SAXPY, arch)


def test_unknown_backend_setting_is_rejected() -> None:
    with pytest.raises(ConfigError, match="nvrtc"):
        with config.override(cuda_backend="clang"):
            pass
    with pytest.raises(ConfigError, match="TEGULA_CUDA_BACKEND"):
        config.from_env({"TEGULA_CUDA_BACKEND": "clang"})


def test_forced_backend_that_is_missing_raises(monkeypatch) -> None:
    monkeypatch.setattr(compiler, "find_nvcc", lambda: None)
    with config.override(cuda_backend="nvcc"), pytest.raises(CompileError, match="nvcc was not found"):
        compiler.compile_cuda(SAXPY, "sm_80")


def test_no_compiler_at_all_raises(monkeypatch) -> None:
    monkeypatch.setattr(compiler, "available_backends", lambda: ())
    with config.override(cuda_backend=None), pytest.raises(CompileError, match="no CUDA compiler"):
        compiler.compile_cuda(SAXPY, "sm_80")


def test_detect_arch_is_none_or_an_arch() -> None:
    arch = compiler.detect_arch()
    assert arch is None or compiler._ARCH_RE.match(arch)


def test_settings_from_env() -> None:
    s = config.from_env({"TEGULA_CUDA_HOME": "/opt/cuda", "TEGULA_NVCC": "/opt/cuda/bin/nvcc",
                         "TEGULA_CUDA_BACKEND": "NVCC", "TEGULA_CACHE_DIR": "/tmp/tc",
                         "TEGULA_DISABLE_CACHE": "1"})
    assert (s.cuda_home, s.nvcc, s.cuda_backend, s.cache_dir, s.disable_cache) == (
        "/opt/cuda", "/opt/cuda/bin/nvcc", "nvcc", "/tmp/tc", True)
    assert config.from_env({"CUDA_PATH": "/x"}).cuda_home == "/x"
    assert config.from_env({}).cache_dir.endswith(os.path.join(".cache", "tegula"))


def test_override_restores_and_rejects_unknown_names() -> None:
    before = config.settings
    with config.override(cache_dir="/tmp/elsewhere") as s:
        assert config.settings is s and s.cache_dir == "/tmp/elsewhere"
    assert config.settings is before
    with pytest.raises(ConfigError, match="unknown setting"):
        with config.override(cache_dirr="/x"):
            pass


# ------------------------------------------------------------------------------ cache
def test_cache_roundtrip(tmp_cache) -> None:
    key = cache.cache_key("src", "sm_80", ["-DX"])
    assert cache.load(key) is None
    entry = cache.store(key, "src", b"\x7fELFcubin", {"backend": "nvcc"})
    assert sorted(os.listdir(entry)) == ["kernel.cu", "kernel.cubin", "meta.json"]
    source, cubin, meta = cache.load(key)
    assert (source, cubin, meta["backend"], meta["key"]) == ("src", b"\x7fELFcubin", "nvcc", key)
    assert meta["tegula_version"] == tegula.__version__
    assert os.listdir(os.path.dirname(entry)) == [key]  # no temporary directories left behind


def test_cache_key_changes_with_each_input() -> None:
    base = cache.cache_key("src", "sm_80", ["-DX"], version="1")
    variants = [cache.cache_key("src2", "sm_80", ["-DX"], version="1"),
                cache.cache_key("src", "sm_90a", ["-DX"], version="1"),
                cache.cache_key("src", "sm_80", ["-DY"], version="1"),
                cache.cache_key("src", "sm_80", [], version="1"),
                cache.cache_key("src", "sm_80", ["-DX"], version="2"),
                cache.cache_key("src", "sm_80", ["-D", "X"], version="1")]
    assert len({base, *variants}) == len(variants) + 1
    assert base == cache.cache_key("src", "sm_80", ("-DX",), version="1")
    # field boundaries count: moving text between source and arch changes the key
    assert cache.cache_key("ab", "c") != cache.cache_key("a", "bc")
    assert cache.cache_key("s", "sm_80") == cache.cache_key("s", "sm_80", version=tegula.__version__)


def test_bad_key_is_rejected(tmp_cache) -> None:
    with pytest.raises(ValueError):
        cache.load("../../etc")


@needs_compiler
def test_compile_uses_cache(tmp_cache) -> None:
    first = compiler.compile_cuda(SAXPY, "sm_80", use_cache=True)
    second = compiler.compile_cuda(SAXPY, "sm_80", use_cache=True)
    assert (first.cached, second.cached) == (False, True)
    assert second.cubin == first.cubin and second.backend == first.backend
    assert not compiler.compile_cuda(SAXPY, "sm_90a", use_cache=True).cached  # arch is in the key
    with config.override(disable_cache=True):
        assert not compiler.compile_cuda(SAXPY, "sm_80", use_cache=True).cached
