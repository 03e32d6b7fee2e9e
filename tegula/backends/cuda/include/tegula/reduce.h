// Reductions across threads (warp shuffles, shared memory) and atomics.
#pragma once
#include "common.h"

namespace tl {

// ---------------------------------------------------------------- combine operators
// Each is a functor combining two partial results. AbsSum / AbsMax assume their inputs are either
// raw values or partials they produced (which are non-negative), so |a| op |b| is always right.
struct SumOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return a + b; }
};
struct MaxOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return tl::max(a, b); }
};
struct MinOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return tl::min(a, b); }
};
struct AbsSumOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return tl::abs(a) + tl::abs(b); }
};
struct AbsMaxOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return tl::max(tl::abs(a), tl::abs(b)); }
};
struct BitAndOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return a & b; }
};
struct BitOrOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return a | b; }
};
struct BitXorOp {
  template <class T> TL_DEVICE T operator()(T a, T b) const { return a ^ b; }
};

// __shfl_xor_sync covers 32/64-bit ints and floats, half_t and bfloat16_t; route the rest.
template <class T>
TL_DEVICE T shfl_xor(T x, int mask, unsigned active = 0xffffffffu) {
  if constexpr (sizeof(T) == 1) {
    return static_cast<T>(__shfl_xor_sync(active, static_cast<int>(x), mask));
  } else if constexpr (is_same<T, short>::value || is_same<T, unsigned short>::value) {
    return static_cast<T>(__shfl_xor_sync(active, static_cast<int>(x), mask));
  } else {
    return __shfl_xor_sync(active, x, mask);
  }
}

/// shfl_xor within segments of width lanes (a power of two <= 32), as __shfl_xor_sync's width.
template <class T>
TL_DEVICE T shfl_xor_width(T x, int mask, int width, unsigned active = 0xffffffffu) {
  if constexpr (sizeof(T) == 1 || is_same<T, short>::value || is_same<T, unsigned short>::value) {
    return static_cast<T>(__shfl_xor_sync(active, static_cast<int>(x), mask, width));
  } else {
    return __shfl_xor_sync(active, x, mask, width);
  }
}

/// T.shfl_sync / T.shfl_down / T.shfl_up: __shfl_sync, __shfl_down_sync, __shfl_up_sync over the
/// whole warp, narrow types routed through int as in shfl_xor.
#define TL_SHFL(NAME, CUDA)                                                                  \
  template <class T> TL_DEVICE T NAME(T x, int arg, int width = 32) {                        \
    if constexpr (sizeof(T) == 1 || is_same<T, short>::value || is_same<T, unsigned short>::value) { \
      return static_cast<T>(CUDA(0xffffffffu, static_cast<int>(x), arg, width));             \
    } else {                                                                                 \
      return CUDA(0xffffffffu, x, arg, width);                                               \
    }                                                                                        \
  }
TL_SHFL(shfl_idx, __shfl_sync)
TL_SHFL(shfl_down, __shfl_down_sync)
TL_SHFL(shfl_up, __shfl_up_sync)
#undef TL_SHFL

/// Reduce x over Lanes lanes spaced Stride apart (lanes l, l ^ Stride, l ^ 2*Stride, ...), with
/// Lanes a power of two and Lanes * Stride <= 32. Every participating lane gets the result.
/// Example: Lanes = 4, Stride = 1 reduces within each quad; Lanes = 8, Stride = 4 reduces over the
/// 8 groups of an mma C fragment column.
template <class Op, int Lanes, int Stride = 1, class T>
TL_DEVICE T warp_reduce(T x) {
  static_assert((Lanes & (Lanes - 1)) == 0 && Lanes * Stride <= 32, "bad warp_reduce shape");
  Op op;
#pragma unroll
  for (int offset = Lanes / 2; offset > 0; offset /= 2) {
    x = op(x, shfl_xor(x, offset * Stride));
  }
  return x;
}

template <class T> TL_DEVICE T warp_sum(T x) { return warp_reduce<SumOp, 32>(x); }
template <class T> TL_DEVICE T warp_max(T x) { return warp_reduce<MaxOp, 32>(x); }
template <class T> TL_DEVICE T warp_min(T x) { return warp_reduce<MinOp, 32>(x); }

/// All-reduce over Threads threads spaced Scale apart (threads t with the same t % Scale and the
/// same t / (Threads * Scale)). Strides below 32 use shuffles; larger strides go through red_buf,
/// a shared-memory array with one slot per thread of the block (indexed by tid), and cost two
/// __syncthreads() each. All threads of the block must call it when Threads * Scale > 32.
template <class Op, int Threads, int Scale = 1, class T>
TL_DEVICE T all_reduce(T x, T* red_buf = nullptr, int tid = threadIdx.x) {
  static_assert((Threads & (Threads - 1)) == 0, "all_reduce needs a power-of-two thread count");
  Op op;
#pragma unroll
  for (int offset = Threads / 2; offset > 0; offset /= 2) {
    const int stride = offset * Scale;
    if (stride >= 32) {
      __syncthreads();
      red_buf[tid] = x;
      __syncthreads();
      x = op(x, red_buf[tid ^ stride]);
    } else {
      x = op(x, shfl_xor(x, stride));
    }
  }
  return x;
}

/// Reduce over the whole block of NumThreads (a multiple of 32) threads; every thread gets the
/// result. smem must hold NumThreads / 32 values. NumThreads / 32 must be a power of two.
template <class Op, int NumThreads, class T>
TL_DEVICE T block_reduce(T x, T* smem) {
  constexpr int kWarps = NumThreads / 32;
  static_assert(NumThreads % 32 == 0 && (kWarps & (kWarps - 1)) == 0,
                "block_reduce needs a power-of-two number of whole warps");
  x = warp_reduce<Op, 32>(x);
  if constexpr (kWarps == 1) {
    return x;
  } else {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    __syncthreads();  // smem may still be read by a previous call
    if (lane == 0) smem[warp] = x;
    __syncthreads();
    return warp_reduce<Op, kWarps>(smem[lane % kWarps]);
  }
}

// ---------------------------------------------------------------- atomics (return the old value)
TL_DEVICE float atomic_add(float* addr, float v) { return atomicAdd(addr, v); }
TL_DEVICE double atomic_add(double* addr, double v) { return atomicAdd(addr, v); }
TL_DEVICE int atomic_add(int* addr, int v) { return atomicAdd(addr, v); }
TL_DEVICE unsigned atomic_add(unsigned* addr, unsigned v) { return atomicAdd(addr, v); }
TL_DEVICE unsigned long long atomic_add(unsigned long long* addr, unsigned long long v) {
  return atomicAdd(addr, v);
}
TL_DEVICE int64_t atomic_add(int64_t* addr, int64_t v) {  // two's complement: same bits as unsigned
  return static_cast<int64_t>(atomicAdd(reinterpret_cast<unsigned long long*>(addr),
                                        static_cast<unsigned long long>(v)));
}
TL_DEVICE half_t atomic_add(half_t* addr, half_t v) { return atomicAdd(addr, v); }
TL_DEVICE bfloat16_t atomic_add(bfloat16_t* addr, bfloat16_t v) { return atomicAdd(addr, v); }
TL_DEVICE half2 atomic_add(half2* addr, half2 v) { return atomicAdd(addr, v); }
TL_DEVICE __nv_bfloat162 atomic_add(__nv_bfloat162* addr, __nv_bfloat162 v) { return atomicAdd(addr, v); }

/// Add two adjacent halves at addr (4-byte aligned) in one atomic.
TL_DEVICE void atomic_add_x2(half_t* addr, float2 v) {
  atomicAdd(reinterpret_cast<half2*>(addr), __float22half2_rn(v));
}
TL_DEVICE void atomic_add_x2(bfloat16_t* addr, float2 v) {
  atomicAdd(reinterpret_cast<__nv_bfloat162*>(addr), __float22bfloat162_rn(v));
}
#if TL_SM90
/// Vector float atomics on global memory (sm_90+): addr aligned to 8 / 16 bytes.
TL_DEVICE void atomic_add_x2(float* addr, float2 v) { atomicAdd(reinterpret_cast<float2*>(addr), v); }
TL_DEVICE void atomic_add_x4(float* addr, float4 v) { atomicAdd(reinterpret_cast<float4*>(addr), v); }
#endif

TL_DEVICE int atomic_max(int* addr, int v) { return atomicMax(addr, v); }
TL_DEVICE int atomic_min(int* addr, int v) { return atomicMin(addr, v); }
TL_DEVICE unsigned atomic_max(unsigned* addr, unsigned v) { return atomicMax(addr, v); }
TL_DEVICE unsigned atomic_min(unsigned* addr, unsigned v) { return atomicMin(addr, v); }
TL_DEVICE int64_t atomic_max(int64_t* addr, int64_t v) {
  return atomicMax(reinterpret_cast<long long*>(addr), static_cast<long long>(v));
}
TL_DEVICE int64_t atomic_min(int64_t* addr, int64_t v) {
  return atomicMin(reinterpret_cast<long long*>(addr), static_cast<long long>(v));
}

// float max/min with integer atomics: non-negative floats order like signed ints, negative floats
// order reversed like unsigned ints. One atomic, no CAS loop. NaN inputs are not handled.
TL_DEVICE float atomic_max(float* addr, float v) {
  return __int_as_float(__float_as_int(v) >= 0
                            ? atomicMax(reinterpret_cast<int*>(addr), __float_as_int(v))
                            : static_cast<int>(atomicMin(reinterpret_cast<unsigned*>(addr),
                                                         __float_as_uint(v))));
}
TL_DEVICE float atomic_min(float* addr, float v) {
  return __int_as_float(__float_as_int(v) >= 0
                            ? atomicMin(reinterpret_cast<int*>(addr), __float_as_int(v))
                            : static_cast<int>(atomicMax(reinterpret_cast<unsigned*>(addr),
                                                         __float_as_uint(v))));
}

namespace detail {
// Compare-and-swap loop applying op to the value at addr; returns the old value.
template <class Op>
TL_DEVICE double cas_update(double* addr, double v, Op op) {
  unsigned long long* p = reinterpret_cast<unsigned long long*>(addr);
  unsigned long long old = *p, assumed;
  do {
    assumed = old;
    old = atomicCAS(p, assumed, __double_as_longlong(op(__longlong_as_double(assumed), v)));
  } while (assumed != old);
  return __longlong_as_double(old);
}
template <class T, class Op>
TL_DEVICE T cas_update16(T* addr, T v, Op op) {  // half_t / bfloat16_t
  unsigned short* p = reinterpret_cast<unsigned short*>(addr);
  unsigned short old = *p, assumed;
  do {
    assumed = old;
    T cur = *reinterpret_cast<T*>(&assumed);
    T next = op(cur, v);
    old = atomicCAS(p, assumed, *reinterpret_cast<unsigned short*>(&next));
  } while (assumed != old);
  return *reinterpret_cast<T*>(&old);
}
}  // namespace detail

TL_DEVICE double atomic_max(double* addr, double v) { return detail::cas_update(addr, v, MaxOp()); }
TL_DEVICE double atomic_min(double* addr, double v) { return detail::cas_update(addr, v, MinOp()); }
TL_DEVICE half_t atomic_max(half_t* addr, half_t v) { return detail::cas_update16(addr, v, MaxOp()); }
TL_DEVICE half_t atomic_min(half_t* addr, half_t v) { return detail::cas_update16(addr, v, MinOp()); }
TL_DEVICE bfloat16_t atomic_max(bfloat16_t* addr, bfloat16_t v) {
  return detail::cas_update16(addr, v, MaxOp());
}
TL_DEVICE bfloat16_t atomic_min(bfloat16_t* addr, bfloat16_t v) {
  return detail::cas_update16(addr, v, MinOp());
}

}  // namespace tl
