"""Compile-only tests of the device headers under include/tegula/ for sm_80 and sm_90a.

One translation unit instantiates every helper (guarded by the same arch macros that guard the
headers); each header must also compile on its own, since generated kernels include only what
they use. Runs with every compiler present here (NVRTC, nvcc); skips when there is none.
"""
from __future__ import annotations

import re

import pytest

from tegula import config
from tegula.backends.cuda import compiler

HEADERS = ("common.h", "copy.h", "ldmatrix.h", "mma.h", "reduce.h", "barrier.h", "tma.h",
           "wgmma.h", "print.h", "tegula.h")
ARCHS = ("sm_80", "sm_89", "sm_90", "sm_90a")
BACKENDS = compiler.available_backends()
# Headers may include each other and these toolkit headers (NVRTC-safe), nothing else.
ALLOWED_SYSTEM_INCLUDES = {"cuda_fp16.h", "cuda_bf16.h", "cuda_fp8.h", "stdint.h", "cstdio"}

needs_compiler = pytest.mark.skipif(not BACKENDS, reason="neither NVRTC (cuda-bindings) nor nvcc found")

USE_ALL = r"""
#include "tegula/tegula.h"

// Every helper, instantiated at least once.
extern "C" __global__ void __launch_bounds__(128) use_all(float* out, const half_t* gh, const bfloat16_t* gb,
                                               const int8_t* gi8, float* fatom, double* datom,
                                               half_t* hatom, bfloat16_t* batom, int* iatom,
                                               int64_t* latom, const tl::TensorMap* tmap_in) {
  __shared__ alignas(1024) half_t sh[64 * 64];
  __shared__ alignas(1024) half_t sh2[64 * 64];
  __shared__ float red[128];
  const int tid = threadIdx.x;

  // common.h: conversions, math, limits, integer helpers
  float f = tl::cast<float>(gh[tid]) + tl::cast<float>(gb[tid]) + tl::cast<float>(gi8[tid]);
  half_t h = tl::cast<half_t>(f);
  bfloat16_t b = tl::cast<bfloat16_t>(h);
  fp8_e4_t e4 = tl::cast<fp8_e4_t>(b);
  fp8_e5_t e5 = tl::cast<fp8_e5_t>(static_cast<double>(f));
  double d = tl::cast<double>(e4) + tl::cast<double>(e5) + tl::cast<double>(h);
  int i = tl::cast<int>(b) + tl::cast<int>(e4) + tl::cast<int>(d);
  int64_t l = tl::cast<int64_t>(h) + tl::cast<int64_t>(f);
  uint8_t u8 = tl::cast<uint8_t>(f);
  half_t h2 = tl::cast<half_t>(d) + tl::cast<half_t>(i) + tl::cast<half_t>(l) + tl::cast<half_t>(e5);
  bool flag = tl::cast<bool>(h2);
  half2 hv = tl::float2_to_half2(make_float2(f, 1.0f));
  __nv_bfloat162 bv = tl::float2_to_bfloat162(tl::half2_to_float2(hv));
  float2 fv = tl::bfloat162_to_float2(bv);
  unsigned packed = tl::pack_half2(fv.x, fv.y) ^ tl::pack_bfloat162(fv.y, fv.x);
  fp8_e4x4_t q4 = tl::float4_to_fp8_e4x4(make_float4(f, fv.x, fv.y, 2.0f));
  float4 dq = tl::fp8_e4x4_to_float4(q4);
  fp8_e5x2_t q2 = tl::float2_to_fp8_e5x2(fv);
  half2 hq = tl::half2_from_fp8_e4x2(tl::float2_to_fp8_e4x2(fv)) + tl::half2_from_fp8_e5x2(q2);
  f += tl::exp2(f) + tl::exp(f) + tl::log(f) + tl::log2(f) + tl::sqrt(f) + tl::rsqrt(f) + tl::sin(f)
       + tl::cos(f) + tl::tanh(f) + tl::abs(f) + tl::floor(f) + tl::ceil(f) + tl::round(f)
       + tl::sigmoid(f) + tl::pow(f, 2.0f) + tl::fma(f, f, f) + tl::max(f, 1.0f) + tl::min(f, 1.0f);
  f += tl::fast_exp2(f) + tl::fast_exp(f) + tl::fast_log2(f) + tl::fast_log(f) + tl::fast_rcp(f)
       + tl::fast_rsqrt(f) + tl::fast_tanh(f) + tl::fast_sin(f) + tl::fast_cos(f);
  f += tl::cast<float>(tl::exp2(h) + tl::rsqrt(h) + tl::max(h, h2) + tl::fma(h, h, h2));
  f += tl::cast<float>(tl::exp(b) + tl::min(b, b) + tl::fma(b, b, b));
  f += (float)tl::exp2(d) + __half2float(__low2half(tl::fast_exp2(hv)));
  f += dq.x + dq.w + __half2float(__high2half(hq)) + (float)packed + (float)u8 + (flag ? 1.f : 0.f);
  f += (float)(tl::ceildiv(i, 7) + tl::floordiv(i, -3) + tl::floormod(i, -3) + tl::abs(i));
  f += (float)(tl::floordiv(l, (int64_t)5) + tl::floormod(l, (int64_t)5));
  f += tl::infinity<float>() + tl::lowest<float>() + (float)tl::infinity<double>();
  f += tl::cast<float>(tl::infinity<half_t>()) + tl::cast<float>(tl::lowest<bfloat16_t>());
  f += tl::cast<float>(tl::infinity<fp8_e4_t>()) + tl::cast<float>(tl::lowest<fp8_e5_t>());
  f += (float)(tl::infinity<int>() + tl::lowest<int64_t>() + tl::infinity<int8_t>());

  // copy.h
  tl::copy_vec<16>(&sh[tid * 8], &gh[tid * 8]);
  tl::copy_16B(&sh[tid * 8 + 1024], &gh[tid * 8]);
  tl::copy_vec<8>(&sh[tid * 4 + 2048], &gh[tid * 4]);
  tl::copy_vec<4>(&sh[tid * 2 + 3072], &gh[tid * 2]);
  tl::copy_vec<2>(&sh[tid + 3584], &gh[tid]);
  tl::copy_vec_pred<16>(&sh2[tid * 8], &gh[tid * 8], tid < 100);
  tl::cp_async<16>(&sh2[tid * 8 + 1024], &gh[tid * 8]);
  tl::cp_async<8>(&sh2[tid * 4 + 2048], &gh[tid * 4]);
  tl::cp_async<4>(&sh2[tid * 2 + 3072], &gh[tid * 2]);
  tl::cp_async_ca<16>(&sh2[tid * 8 + 1024], &gh[tid * 8]);
  tl::cp_async_cg(&sh2[tid * 8 + 1024], &gh[tid * 8]);
  tl::cp_async_zfill<16>(&sh2[tid * 8], &gh[tid * 8], tid < 64);
  tl::cp_async_zfill<8>(&sh2[tid * 4], &gh[tid * 4], tid < 64);
  tl::cp_async_zfill<4>(&sh2[tid * 2], &gh[tid * 2], tid < 64);
  tl::cp_async_commit();
  tl::cp_async_wait<1>();
  tl::cp_async_wait<0>();
  __syncthreads();

  // ldmatrix.h + mma.h
  unsigned a[4], bfrag[2], bfrag2[4], x1;
  tl::ldmatrix_x4(a, &sh[(tid % 16) * 64 + (tid / 16) * 8]);
  tl::ldmatrix_x2_trans(bfrag, &sh2[(tid % 16) * 64]);
  tl::ldmatrix_x1(&x1, &sh[(tid % 8) * 64]);
  tl::ldmatrix_x2(bfrag2, &sh[(tid % 16) * 64]);
  tl::ldmatrix_x4_trans(bfrag2, &sh2[(tid % 16) * 64]);
  tl::ldmatrix_x1_trans(&x1, &sh2[(tid % 8) * 64]);
  tl::ldmatrix<4, true>(a, &sh2[(tid % 16) * 64]);
  float acc[4] = {0.f, 0.f, 0.f, 0.f};
  int iacc[4] = {0, 0, 0, 0};
  unsigned hacc[2] = {0u, 0u};
  tl::mma_m16n8k16_f16_f32(acc, a, bfrag);
  tl::mma_m16n8k16_bf16_f32(acc, a, bfrag2);
  tl::mma_m16n8k16_f16_f16(hacc, a, bfrag);
  tl::mma_m16n8k32_s8_s32(iacc, a, bfrag);
  tl::mma_m16n8k32_u8_s32(iacc, a, bfrag2);
  unsigned ta[4] = {tl::to_tf32(acc[0]), tl::to_tf32(acc[1]), a[2], a[3]};
  tl::mma_m16n8k8_tf32_f32(acc, ta, bfrag);
  tl::mma_sync<half_t, half_t, float>(acc, a, bfrag);
  tl::mma_sync<bfloat16_t, bfloat16_t, float>(acc, a, bfrag);
  tl::mma_sync<int8_t, int8_t, int>(iacc, a, bfrag);
  tl::mma_sync<float, float, float>(acc, ta, bfrag);
#if TL_SM89
  tl::mma_m16n8k32_e4m3_f32(acc, a, bfrag);
  tl::mma_m16n8k32_e5m2_f32(acc, a, bfrag);
  tl::mma_sync<fp8_e4_t, fp8_e5_t, float>(acc, a, bfrag);
#endif
  f += acc[0] + acc[1] + acc[2] + acc[3] + (float)(iacc[0] + iacc[3]) + (float)(hacc[0] ^ x1);

  // reduce.h
  f += tl::warp_reduce<tl::SumOp, 32>(f) + tl::warp_reduce<tl::MaxOp, 4>(f)
       + tl::warp_reduce<tl::MinOp, 8, 4>(f) + tl::warp_reduce<tl::AbsSumOp, 16, 2>(f)
       + tl::warp_reduce<tl::AbsMaxOp, 2>(f) + tl::warp_sum(f) + tl::warp_max(f) + tl::warp_min(f);
  f += tl::cast<float>(tl::warp_reduce<tl::SumOp, 32>(h)) +
       tl::cast<float>(tl::warp_reduce<tl::MaxOp, 32>(b));
  f += (float)tl::warp_reduce<tl::BitXorOp, 32>(i) + (float)tl::warp_reduce<tl::SumOp, 32>(d)
       + (float)tl::warp_reduce<tl::BitOrOp, 8>(u8) + (float)tl::warp_reduce<tl::MaxOp, 32>(l);
  f += tl::all_reduce<tl::SumOp, 128>(f, red) + tl::all_reduce<tl::MaxOp, 8, 16>(f, red)
       + tl::all_reduce<tl::SumOp, 4, 8>(f) + tl::block_reduce<tl::SumOp, 128>(f, red);
  tl::atomic_add(fatom, f);
  tl::atomic_add(datom, d);
  tl::atomic_add(hatom, h);
  tl::atomic_add(batom, b);
  tl::atomic_add(iatom, i);
  tl::atomic_add(reinterpret_cast<unsigned*>(iatom), 1u);
  tl::atomic_add(latom, l);
  tl::atomic_add(reinterpret_cast<half2*>(hatom), hv);
  tl::atomic_add(reinterpret_cast<__nv_bfloat162*>(batom), bv);
  tl::atomic_add_x2(hatom, fv);
  tl::atomic_add_x2(batom, fv);
  tl::atomic_max(fatom, f);
  tl::atomic_min(fatom + 1, f);
  tl::atomic_max(datom, d);
  tl::atomic_min(datom, d);
  tl::atomic_max(hatom, h);
  tl::atomic_min(batom, b);
  tl::atomic_max(iatom, i);
  tl::atomic_min(latom, l);
  tl::named_barrier_sync(1, 128);
  tl::named_barrier_arrive(2, 64);

#if TL_SM90
  tl::atomic_add_x2(fatom, fv);
  tl::atomic_add_x4(fatom, dq);
  // ldmatrix.h (stmatrix)
  tl::stmatrix_x1(&sh[(tid % 8) * 64], a);
  tl::stmatrix_x2(&sh[(tid % 16) * 64], a);
  tl::stmatrix_x4(&sh[(tid % 32) * 64], a);
  tl::stmatrix_x1_trans(&sh[(tid % 8) * 64], a);
  tl::stmatrix_x2_trans(&sh[(tid % 16) * 64], a);
  tl::stmatrix_x4_trans(&sh[(tid % 32) * 64], a);
  tl::stmatrix<4, false>(&sh[(tid % 32) * 64], a);
  // barrier.h + tma.h
  __shared__ uint64_t bar[2];
  if (tid == 0) {
    tl::mbarrier_init(&bar[0], 1);
    tl::mbarrier_init(&bar[1], 128);
    tl::fence_barrier_init();
  }
  __syncthreads();
  if (tid == 0) {
    tl::prefetch_tma_descriptor(tmap_in);
    tl::mbarrier_arrive_expect_tx(&bar[0], 5 * 8192);
    tl::tma_load_1d(sh, tmap_in, &bar[0], 0);
    tl::tma_load_2d(sh, tmap_in, &bar[0], 0, 64);
    tl::tma_load_3d(sh, tmap_in, &bar[0], 0, 64, 1);
    tl::tma_load_4d(sh, tmap_in, &bar[0], 0, 64, 1, 2);
    tl::tma_load_5d(sh, tmap_in, &bar[0], 0, 64, 1, 2, 3);
#if TL_SM90A
    tl::tma_load_2d_multicast(sh, tmap_in, &bar[0], 0x3, 0, 64);
#endif
    tl::mbarrier_expect_tx(&bar[0], 16);
    tl::bulk_load(sh2, gh, 1024, &bar[0]);
  }
  tl::mbarrier_wait(&bar[0], 0);
  while (!tl::mbarrier_try_wait(&bar[0], 1)) {
  }
  tl::mbarrier_arrive(&bar[1]);
  tl::fence_proxy_async();
  if (tid == 0) {
    tl::tma_store_1d(tmap_in, sh, 0);
    tl::tma_store_2d(tmap_in, sh, 0, 64);
    tl::tma_store_3d(tmap_in, sh, 0, 64, 1);
    tl::tma_store_4d(tmap_in, sh, 0, 64, 1, 2);
    tl::tma_store_5d(tmap_in, sh, 0, 64, 1, 2, 3);
    tl::tma_store_commit();
    tl::tma_store_wait<0>();
    tl::mbarrier_arrive_cluster(&bar[1], 0);
  }
  f += (float)tl::cluster_cta_rank();
  tl::cluster_arrive();
  tl::cluster_wait();
  tl::cluster_sync();
#endif

#if TL_SM90A
  // wgmma.h
  float wacc[128];
#pragma unroll
  for (int j = 0; j < 128; ++j) wacc[j] = 0.f;
  uint64_t da = tl::make_smem_desc(sh, 16, 1024, tl::Swizzle::k128B);
  uint64_t db = tl::make_smem_desc(sh2, 16, 512, tl::Swizzle::k64B);
  uint64_t dc = tl::desc_add_offset(tl::make_smem_desc(sh2, 128, 256, tl::Swizzle::k32B), 32);
  uint64_t dn = tl::make_smem_desc(sh2, 128, 256, tl::Swizzle::kNone);
  tl::wgmma_fence_operands<128>(wacc);
  tl::wgmma_fence();
  tl::wgmma_ss<64, half_t>(wacc, da, db, 0);
  tl::wgmma_ss<128, bfloat16_t, false, true>(wacc, da, db);
  tl::wgmma_ss<256, half_t, true, false>(wacc, da, dc);
  tl::wgmma_ss<8, half_t>(wacc, da, dn);
  tl::wgmma_rs<64, half_t>(wacc, a, db);
  tl::wgmma_rs<256, bfloat16_t, true>(wacc, a, db);
  tl::wgmma_ss_fp8<128, fp8_e4_t, fp8_e4_t>(wacc, da, db);
  tl::wgmma_ss_fp8<64, fp8_e5_t, fp8_e4_t>(wacc, da, db);
  tl::wgmma_commit_group();
  tl::wgmma_wait_group<0>();
  tl::wgmma_fence_operands<128>(wacc);
  for (int j = 0; j < 128; ++j) f += wacc[j];
  tl::warpgroup_reg_alloc<240>();
  tl::warpgroup_reg_dealloc<40>();
#endif

  // print.h
  if (tid == 0 && f == 12345.f) {
    tl::print_value("f", f);
    tl::print_value("h", h);
    tl::print_value("b", b);
    tl::print_value("e4", e4);
    tl::print_value("e5", e5);
    tl::print_value("d", d);
    tl::print_value("i", i);
    tl::print_value("l", l);
    tl::print_value("u8", u8);
    tl::print_value("flag", flag);
    tl::print_value("ptr", (const void*)out);
    tl::print_msg("hello");
    tl::print_buffer("sh", sh, 4);
  }
  out[blockIdx.x * blockDim.x + tid] = f;
}
"""


def _compile(source: str, arch: str, backend: str) -> compiler.CompileResult:
    with config.override(cuda_backend=backend):
        return compiler.compile_cuda(source, arch)


@needs_compiler
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("arch", ARCHS)
def test_every_helper_compiles(arch: str, backend: str) -> None:
    result = _compile(USE_ALL, arch, backend)
    assert result.cubin[:4] == b"\x7fELF"
    assert result.backend == backend and result.arch == arch
    assert "error" not in result.log.lower()


@needs_compiler
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("arch", ("sm_80", "sm_90a"))
@pytest.mark.parametrize("header", HEADERS)
def test_each_header_compiles_alone(header: str, arch: str, backend: str) -> None:
    source = (f'#include "tegula/{header}"\n'
              'extern "C" __global__ void k(float* x) { x[threadIdx.x] = tl::exp2(x[threadIdx.x]); }\n')
    assert _compile(source, arch, backend).cubin


def test_headers_include_only_nvrtc_safe_files() -> None:
    root = compiler.INCLUDE_DIR / "tegula"
    for path in sorted(root.glob("*.h")):
        for name in re.findall(r'^#include [<"]([^>"]+)[>"]', path.read_text(), re.M):
            local = (root / name).is_file()
            assert local or name in ALLOWED_SYSTEM_INCLUDES, f"{path.name} includes {name}"


def test_cstdio_only_outside_nvrtc() -> None:
    text = (compiler.INCLUDE_DIR / "tegula" / "print.h").read_text()
    assert "#if !defined(__CUDACC_RTC__)\n#include <cstdio>" in text


def test_generated_wgmma_ops_are_current() -> None:
    import subprocess
    import sys

    root = compiler.INCLUDE_DIR / "tegula"
    out = subprocess.run([sys.executable, str(root / "gen_wgmma.py")], capture_output=True,
                         text=True, check=True).stdout
    assert out == (root / "wgmma_ops.h").read_text(), "rerun gen_wgmma.py > wgmma_ops.h"


@needs_compiler
@pytest.mark.parametrize("backend", BACKENDS)
def test_arch_guards_hide_sm90_helpers_on_sm80(backend: str) -> None:
    source = ('#include "tegula/tegula.h"\n'
              'extern "C" __global__ void k(uint64_t* b) { tl::mbarrier_expect_tx(b, 16); }\n')
    with pytest.raises(Exception, match="mbarrier_expect_tx"):
        _compile(source, "sm_80", backend)
    assert _compile(source, "sm_90", backend).cubin
    # sm_80 has the mbarriers themselves (no transaction counts)
    plain = ('#include "tegula/tegula.h"\n'
             'extern "C" __global__ void k(uint64_t* b) { tl::mbarrier_init(b, 1); '
             'tl::mbarrier_arrive(b); tl::mbarrier_wait(b, 0); }\n')
    assert _compile(plain, "sm_80", backend).cubin


# Runs the documented fragment layouts, reductions, integer helpers, atomics and (on Hopper) a
# 128B-swizzled wgmma against CPU results. Host code is needed, so this one builds with nvcc.
GPU_CHECK = r"""
#include "tegula/tegula.h"
#include <cstdio>
#include <cstdlib>
#include <cmath>
#include <cuda_runtime.h>

// 16x16 A (row-major, half), 16x8 B stored [k][n] row-major -> C 16x8 via ldmatrix + mma.
__global__ void k_mma(const half_t* A, const half_t* B, float* C, const float* Af, const float* Bf, float* Ct,
                      const int8_t* Ai, const int8_t* Bi, int* Ci) {
  __shared__ alignas(16) half_t As[16 * 16];
  __shared__ alignas(16) half_t Bs[16 * 8];
  int lane = threadIdx.x;
  for (int i = lane; i < 256; i += 32) As[i] = A[i];
  for (int i = lane; i < 128; i += 32) Bs[i] = B[i];
  __syncthreads();
  unsigned a[4], b[2];
  tl::ldmatrix_x4(a, &As[(lane % 16) * 16 + (lane / 16) * 8]);
  tl::ldmatrix_x2_trans(b, &Bs[(lane % 16) * 8]);
  float c[4] = {0, 0, 0, 0};
  tl::mma_sync<half_t, half_t, float>(c, a, b);
  int g = lane / 4, t = lane % 4;
  for (int i = 0; i < 4; ++i) C[(g + 8 * (i / 2)) * 8 + 2 * t + (i % 2)] = c[i];
  // tf32 m16n8k8: A 16x8, B 8x8, documented layout
  unsigned ta[4], tb[2];
  ta[0] = tl::to_tf32(Af[g * 8 + t]); ta[1] = tl::to_tf32(Af[(g + 8) * 8 + t]);
  ta[2] = tl::to_tf32(Af[g * 8 + t + 4]); ta[3] = tl::to_tf32(Af[(g + 8) * 8 + t + 4]);
  tb[0] = tl::to_tf32(Bf[t * 8 + g]); tb[1] = tl::to_tf32(Bf[(t + 4) * 8 + g]);
  float ct[4] = {0, 0, 0, 0};
  tl::mma_m16n8k8_tf32_f32(ct, ta, tb);
  for (int i = 0; i < 4; ++i) Ct[(g + 8 * (i / 2)) * 8 + 2 * t + (i % 2)] = ct[i];
  // s8 m16n8k32: A 16x32, B 32x8
  unsigned ia[4], ib[2];
  int8_t* pa = reinterpret_cast<int8_t*>(ia);
  int8_t* pb = reinterpret_cast<int8_t*>(ib);
  for (int i = 0; i < 16; ++i) {
    int row = g + ((i % 8) >= 4 ? 8 : 0), col = 4 * t + (i & 3) + (i >= 8 ? 16 : 0);
    pa[i] = Ai[row * 32 + col];
  }
  for (int i = 0; i < 8; ++i) pb[i] = Bi[(4 * t + (i & 3) + (i >= 4 ? 16 : 0)) * 8 + g];
  int ci[4] = {0, 0, 0, 0};
  tl::mma_sync<int8_t, int8_t, int>(ci, ia, ib);
  for (int i = 0; i < 4; ++i) Ci[(g + 8 * (i / 2)) * 8 + 2 * t + (i % 2)] = ci[i];
}

__global__ void k_misc(float* out, float* amax, float* amin) {
  int tid = threadIdx.x;
  __shared__ float red[256];
  float x = (float)(tid % 37) - 11.f;
  out[0 * 256 + tid] = tl::warp_reduce<tl::SumOp, 32>(x);
  out[1 * 256 + tid] = tl::warp_reduce<tl::MaxOp, 8, 4>(x);
  out[2 * 256 + tid] = tl::all_reduce<tl::SumOp, 64, 4>(x, red);
  out[3 * 256 + tid] = tl::block_reduce<tl::MinOp, 256>(x, red);
  out[4 * 256 + tid] = (float)tl::floordiv(tid - 100, 7) + 1000.f * (float)tl::floormod(tid - 100, -7);
  out[5 * 256 + tid] = tl::cast<float>(tl::cast<fp8_e4_t>(x * 3.3f)) + tl::cast<float>(tl::cast<bfloat16_t>(x / 3.f));
  tl::atomic_max(amax, x * 0.5f);
  tl::atomic_min(amin, x * 0.5f);
}

#if TL_SM90A
// wgmma m64n64k16 x4 (K = 64), A 64x64 and B^T 64x64 (both K-major), 128B swizzle.
__global__ void k_wgmma(const half_t* A, const half_t* Bt, float* C) {
  __shared__ alignas(1024) half_t As[64 * 64];
  __shared__ alignas(1024) half_t Bs[64 * 64];
  int tid = threadIdx.x;
  for (int i = tid; i < 64 * 64; i += 128) {
    int r = i / 64, k = i % 64;
    int chunk = (k / 8) ^ (r % 8);
    As[r * 64 + chunk * 8 + k % 8] = A[i];
    Bs[r * 64 + chunk * 8 + k % 8] = Bt[i];
  }
  __syncthreads();
  tl::fence_proxy_async();
  float d[32];
  for (int i = 0; i < 32; ++i) d[i] = 0.f;
  tl::wgmma_fence_operands<32>(d);
  tl::wgmma_fence();
  for (int ks = 0; ks < 4; ++ks) {
    uint64_t da = tl::make_smem_desc(&As[ks * 16], 16, 1024, tl::Swizzle::k128B);
    uint64_t db = tl::make_smem_desc(&Bs[ks * 16], 16, 1024, tl::Swizzle::k128B);
    tl::wgmma_ss<64, half_t>(d, da, db, 1);
  }
  tl::wgmma_commit_group();
  tl::wgmma_wait_group<0>();
  tl::wgmma_fence_operands<32>(d);
  int w = tid / 32, g = (tid % 32) / 4, t = tid % 4;
  for (int j = 0; j < 8; ++j)
    for (int i = 0; i < 4; ++i) C[(16 * w + g + 8 * (i / 2)) * 64 + 8 * j + 2 * t + (i % 2)] = d[4 * j + i];
}
#endif

#define CK(x) do { cudaError_t e = (x); if (e) { printf("CUDA error %s at %d\n", cudaGetErrorString(e), __LINE__); exit(1); } } while (0)
template <class T> T* dev(const T* h, int n) { T* d; CK(cudaMalloc(&d, n * sizeof(T))); CK(cudaMemcpy(d, h, n * sizeof(T), cudaMemcpyHostToDevice)); return d; }
template <class T> void host(T* h, const T* d, int n) { CK(cudaMemcpy(h, d, n * sizeof(T), cudaMemcpyDeviceToHost)); }

int main() {
  int fails = 0;
  srand(1);
  // --- mma
  half_t hA[256], hB[128]; float fA[256], fB[128], Af[128], Bf[64]; int8_t Ai[512], Bi[256];
  for (int i = 0; i < 256; ++i) { fA[i] = (rand() % 17 - 8) / 4.f; hA[i] = __float2half(fA[i]); }
  for (int i = 0; i < 128; ++i) { fB[i] = (rand() % 17 - 8) / 4.f; hB[i] = __float2half(fB[i]); }
  for (int i = 0; i < 128; ++i) Af[i] = (rand() % 17 - 8) / 4.f;
  for (int i = 0; i < 64; ++i) Bf[i] = (rand() % 17 - 8) / 4.f;
  for (int i = 0; i < 512; ++i) Ai[i] = rand() % 255 - 127;
  for (int i = 0; i < 256; ++i) Bi[i] = rand() % 255 - 127;
  float *dC, *dCt; int* dCi;
  CK(cudaMalloc(&dC, 128 * 4)); CK(cudaMalloc(&dCt, 128 * 4)); CK(cudaMalloc(&dCi, 128 * 4));
  k_mma<<<1, 32>>>(dev(hA, 256), dev(hB, 128), dC, dev(Af, 128), dev(Bf, 64), dCt, dev(Ai, 512), dev(Bi, 256), dCi);
  CK(cudaDeviceSynchronize());
  float C[128], Ct[128]; int Ci[128];
  host(C, dC, 128); host(Ct, dCt, 128); host(Ci, dCi, 128);
  int bad = 0, badt = 0, badi = 0;
  for (int m = 0; m < 16; ++m) for (int n = 0; n < 8; ++n) {
    float r = 0, rt = 0; int ri = 0;
    for (int k = 0; k < 16; ++k) r += fA[m * 16 + k] * fB[k * 8 + n];
    for (int k = 0; k < 8; ++k) rt += Af[m * 8 + k] * Bf[k * 8 + n];
    for (int k = 0; k < 32; ++k) ri += Ai[m * 32 + k] * Bi[k * 8 + n];
    bad += fabsf(r - C[m * 8 + n]) > 1e-3f; badt += fabsf(rt - Ct[m * 8 + n]) > 1e-3f; badi += ri != Ci[m * 8 + n];
  }
  printf("mma f16 ldmatrix: %s (%d bad)\nmma tf32: %s (%d bad)\nmma s8: %s (%d bad)\n", bad ? "FAIL" : "ok", bad,
         badt ? "FAIL" : "ok", badt, badi ? "FAIL" : "ok", badi);
  fails += bad + badt + badi;
  // --- misc
  float* dout; float *damax, *damin; float init[2] = {-1e30f, 1e30f};
  CK(cudaMalloc(&dout, 6 * 256 * 4)); damax = dev(&init[0], 1); damin = dev(&init[1], 1);
  k_misc<<<1, 256>>>(dout, damax, damin);
  CK(cudaDeviceSynchronize());
  float out[6 * 256], amax, amin; host(out, dout, 6 * 256); host(&amax, damax, 1); host(&amin, damin, 1);
  int badm = 0;
  auto X = [](int t) { return (float)(t % 37) - 11.f; };
  for (int t = 0; t < 256; ++t) {
    float s = 0; for (int u = t / 32 * 32; u < t / 32 * 32 + 32; ++u) s += X(u);
    float mx = -1e30f; for (int j = 0; j < 8; ++j) { int u = (t / 32) * 32 + (t % 4) + 4 * j; mx = fmaxf(mx, X(u)); }
    float s2 = 0; for (int j = 0; j < 64; ++j) s2 += X((t / 256) * 256 + (t % 4) + 4 * j);
    float mn = 1e30f; for (int u = 0; u < 256; ++u) mn = fminf(mn, X(u));
    int a = t - 100; int fd = (int)floor(a / 7.0); int fm = a - (-7) * (int)floor(a / -7.0);
    if (out[t] != s) { badm++; if (badm < 5) printf("warp sum t=%d %f %f\n", t, out[t], s); }
    if (out[256 + t] != mx) { badm++; if (badm < 5) printf("warp max t=%d %f %f\n", t, out[256 + t], mx); }
    if (out[512 + t] != s2) { badm++; if (badm < 5) printf("all_reduce t=%d %f %f\n", t, out[512 + t], s2); }
    if (out[768 + t] != mn) { badm++; if (badm < 5) printf("block min t=%d %f %f\n", t, out[768 + t], mn); }
    if (out[1024 + t] != fd + 1000.f * fm) { badm++; if (badm < 5) printf("floordiv t=%d %f %d %d\n", t, out[1024 + t], fd, fm); }
  }
  float emax = -1e30f, emin = 1e30f; for (int t = 0; t < 256; ++t) { emax = fmaxf(emax, X(t) * 0.5f); emin = fminf(emin, X(t) * 0.5f); }
  if (amax != emax || amin != emin) { badm++; printf("atomic max/min %f %f vs %f %f\n", amax, amin, emax, emin); }
  printf("reductions/ints/atomics: %s (%d bad); cast sample %f\n", badm ? "FAIL" : "ok", badm, out[5 * 256 + 20]);
  fails += badm;
#if 1
  // --- wgmma (sm_90a build only)
  int major; CK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  if (major == 9) {
    static half_t wA[4096], wB[4096]; static float fa[4096], fb[4096], wC[4096];
    for (int i = 0; i < 4096; ++i) { fa[i] = (rand() % 9 - 4) / 4.f; wA[i] = __float2half(fa[i]); fb[i] = (rand() % 9 - 4) / 4.f; wB[i] = __float2half(fb[i]); }
    float* dW; CK(cudaMalloc(&dW, 4096 * 4));
    extern void launch_wgmma(const half_t*, const half_t*, float*);
    launch_wgmma(dev(wA, 4096), dev(wB, 4096), dW);
    CK(cudaDeviceSynchronize()); host(wC, dW, 4096);
    int badw = 0;
    for (int m = 0; m < 64; ++m) for (int n = 0; n < 64; ++n) {
      float r = 0; for (int k = 0; k < 64; ++k) r += fa[m * 64 + k] * fb[n * 64 + k];
      if (fabsf(r - wC[m * 64 + n]) > 1e-3f) { if (badw < 4) printf("wgmma (%d,%d) %f vs %f\n", m, n, wC[m * 64 + n], r); badw++; }
    }
    printf("wgmma m64n64k16 SS swizzle128: %s (%d bad)\n", badw ? "FAIL" : "ok", badw);
    fails += badw;
  }
#endif
  printf(fails ? "FAILED\n" : "ALL OK\n");
  return fails != 0;
}
void launch_wgmma(const half_t* A, const half_t* B, float* C) {
#if defined(TL_SM90A) && TL_SM90A
  k_wgmma<<<1, 128>>>(A, B, C);
#endif
}
"""


@pytest.mark.gpu
def test_layouts_and_helpers_on_gpu(tmp_path) -> None:
    import subprocess

    nvcc = compiler.find_nvcc()
    arch = compiler.detect_arch()
    if nvcc is None or arch is None:
        pytest.skip("needs nvcc and an NVIDIA GPU")
    (tmp_path / "check.cu").write_text(GPU_CHECK)
    subprocess.run([nvcc, "-std=c++17", f"-arch={arch}", f"-I{compiler.INCLUDE_DIR}", "-o",
                    str(tmp_path / "check"), str(tmp_path / "check.cu")], check=True)
    proc = subprocess.run([str(tmp_path / "check")], capture_output=True, text=True)
    assert proc.returncode == 0 and "ALL OK" in proc.stdout, proc.stdout + proc.stderr
