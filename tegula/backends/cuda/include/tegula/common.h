// tegula device helpers: types, conversions, math, integer arithmetic.
//
// Every tegula header includes this one. It compiles under NVRTC (no host headers) and nvcc.
// Feature macros:
//   TL_SM90   true on sm_90+ device passes (and on a host pass, so declarations stay visible)
//   TL_SM90A  true when the arch-specific sm_90a features (wgmma, setmaxnreg) are available
//   TL_SM89   true on sm_89+ (fp8 mma.sync)
#pragma once

#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#define TL_DEVICE __device__ __forceinline__
#define TL_DEVICE_NOINLINE __device__ __noinline__
#define TL_HOST_DEVICE __host__ __device__ __forceinline__

#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 900
#define TL_SM90 1
#else
#define TL_SM90 0
#endif
#if !defined(__CUDA_ARCH__) || __CUDA_ARCH__ >= 890
#define TL_SM89 1
#else
#define TL_SM89 0
#endif
#if !defined(__CUDA_ARCH__) || defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define TL_SM90A 1
#else
#define TL_SM90A 0
#endif

// NVRTC has no <cstdint>; give generated code the usual fixed-width names.
#if !defined(__CUDACC_RTC__)
#include <stdint.h>
#else
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
#if defined(_WIN32)
typedef long long int64_t;
typedef unsigned long long uint64_t;
#else
typedef long int64_t;
typedef unsigned long uint64_t;
#endif
// what <sys/types.h> gives nvcc's device code, for T.import_source text that uses it
typedef unsigned int uint;
typedef unsigned short ushort;
#endif

typedef __half half_t;
typedef __nv_bfloat16 bfloat16_t;
typedef __nv_bfloat162 bfloat162_t;
typedef __nv_fp8_e4m3 fp8_e4_t;
typedef __nv_fp8_e5m2 fp8_e5_t;
typedef __nv_fp8x2_e4m3 fp8_e4x2_t;
typedef __nv_fp8x2_e5m2 fp8_e5x2_t;
typedef __nv_fp8x4_e4m3 fp8_e4x4_t;
typedef __nv_fp8x4_e5m2 fp8_e5x4_t;

namespace tl {

// ---------------------------------------------------------------- type traits (no <type_traits>)
template <class A, class B> struct is_same { static constexpr bool value = false; };
template <class A> struct is_same<A, A> { static constexpr bool value = true; };

// Low-precision floats: converted through float.
template <class T> struct is_lowp { static constexpr bool value = false; };
template <> struct is_lowp<half_t> { static constexpr bool value = true; };
template <> struct is_lowp<bfloat16_t> { static constexpr bool value = true; };
template <> struct is_lowp<fp8_e4_t> { static constexpr bool value = true; };
template <> struct is_lowp<fp8_e5_t> { static constexpr bool value = true; };

/// The bits of x read as a To of the same size (T.reinterpret).
template <class To, class From>
TL_DEVICE To bit_cast(From x) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast between types of one size");
  return *reinterpret_cast<const To*>(&x);
}

// Integer types a float converts to with saturation (bool is not one of them).
template <class T> struct is_int { static constexpr bool value = false; };
template <> struct is_int<signed char> { static constexpr bool value = true; };
template <> struct is_int<unsigned char> { static constexpr bool value = true; };
template <> struct is_int<short> { static constexpr bool value = true; };
template <> struct is_int<unsigned short> { static constexpr bool value = true; };
template <> struct is_int<int> { static constexpr bool value = true; };
template <> struct is_int<unsigned> { static constexpr bool value = true; };
template <> struct is_int<long> { static constexpr bool value = true; };
template <> struct is_int<unsigned long> { static constexpr bool value = true; };
template <> struct is_int<long long> { static constexpr bool value = true; };
template <> struct is_int<unsigned long long> { static constexpr bool value = true; };

// ---------------------------------------------------------------- shared-memory addresses
/// 32-bit shared-state-space address of a generic pointer into shared memory.
TL_DEVICE unsigned smem_addr(const void* ptr) {
  return static_cast<unsigned>(__cvta_generic_to_shared(ptr));
}

// ---------------------------------------------------------------- scalar conversions
namespace detail {
TL_DEVICE float to_float(half_t x) { return __half2float(x); }
TL_DEVICE float to_float(bfloat16_t x) { return __bfloat162float(x); }
TL_DEVICE float to_float(fp8_e4_t x) { return static_cast<float>(x); }
TL_DEVICE float to_float(fp8_e5_t x) { return static_cast<float>(x); }

template <class T> struct FromFloat;
template <> struct FromFloat<half_t> {
  static TL_DEVICE half_t f(float x) { return __float2half_rn(x); }
  static TL_DEVICE half_t d(double x) { return __double2half(x); }
};
template <> struct FromFloat<bfloat16_t> {
  static TL_DEVICE bfloat16_t f(float x) { return __float2bfloat16_rn(x); }
  static TL_DEVICE bfloat16_t d(double x) { return __double2bfloat16(x); }
};
// fp8 conversions saturate to the largest finite value (the usual choice for quantization).
template <> struct FromFloat<fp8_e4_t> {
  static TL_DEVICE fp8_e4_t f(float x) { return fp8_e4_t(x); }
  static TL_DEVICE fp8_e4_t d(double x) { return fp8_e4_t(x); }
};
template <> struct FromFloat<fp8_e5_t> {
  static TL_DEVICE fp8_e5_t f(float x) { return fp8_e5_t(x); }
  static TL_DEVICE fp8_e5_t d(double x) { return fp8_e5_t(x); }
};

// cvt.rzi: truncate toward zero, saturate to the destination's range, NaN -> 0.
TL_DEVICE int rzi_s32(float x) { return __float2int_rz(x); }
TL_DEVICE int rzi_s32(double x) { return __double2int_rz(x); }
TL_DEVICE unsigned rzi_u32(float x) { return __float2uint_rz(x); }
TL_DEVICE unsigned rzi_u32(double x) { return __double2uint_rz(x); }
TL_DEVICE long long rzi_s64(float x) { return __float2ll_rz(x); }
TL_DEVICE long long rzi_s64(double x) { return __double2ll_rz(x); }
TL_DEVICE unsigned long long rzi_u64(float x) { return __float2ull_rz(x); }
TL_DEVICE unsigned long long rzi_u64(double x) { return __double2ull_rz(x); }
}  // namespace detail

/// float or double -> integer type ``To`` as PTX ``cvt.rzi`` defines it for every width: the
/// value truncated toward zero and saturated to ``To``'s range, NaN giving 0 (for 8- and 16-bit
/// types C's own conversion would wrap the 32-bit result instead).
template <class To, class F>
TL_DEVICE To float_to_int(F x) {
  if (x != x) return To(0);  // NaN -> 0 (the 64-bit cvt.rzi gives the most negative value)
  constexpr bool is_unsigned = static_cast<To>(-1) > static_cast<To>(0);
  if constexpr (sizeof(To) == 8) {
    if constexpr (is_unsigned) return static_cast<To>(detail::rzi_u64(x));
    else return static_cast<To>(detail::rzi_s64(x));
  } else if constexpr (sizeof(To) == 4) {
    if constexpr (is_unsigned) return static_cast<To>(detail::rzi_u32(x));
    else return static_cast<To>(detail::rzi_s32(x));
  } else if constexpr (is_unsigned) {
    constexpr unsigned hi = (1u << (8 * sizeof(To))) - 1u;
    unsigned v = detail::rzi_u32(x);
    return static_cast<To>(v > hi ? hi : v);
  } else {
    constexpr int hi = (1 << (8 * sizeof(To) - 1)) - 1;
    int v = detail::rzi_s32(x);
    return static_cast<To>(v > hi ? hi : v < -hi - 1 ? -hi - 1 : v);
  }
}

/// Convert a scalar between any two of: half_t, bfloat16_t, fp8_e4_t, fp8_e5_t, float, double,
/// bool and the integer types. Low-precision floats go through float (exact for widening);
/// double narrows to half/bf16/fp8 in one rounding. float -> int is ``float_to_int``.
template <class To, class From>
TL_DEVICE To cast(From x) {
  if constexpr (is_same<To, From>::value) {
    return x;
  } else if constexpr (is_lowp<From>::value && is_lowp<To>::value) {
    return detail::FromFloat<To>::f(detail::to_float(x));
  } else if constexpr (is_int<To>::value && is_lowp<From>::value) {
    return float_to_int<To>(detail::to_float(x));
  } else if constexpr (is_int<To>::value && (is_same<From, float>::value || is_same<From, double>::value)) {
    return float_to_int<To>(x);
  } else if constexpr (is_lowp<From>::value) {
    return static_cast<To>(detail::to_float(x));
  } else if constexpr (is_lowp<To>::value && is_same<From, double>::value) {
    return detail::FromFloat<To>::d(x);
  } else if constexpr (is_lowp<To>::value) {
    return detail::FromFloat<To>::f(static_cast<float>(x));
  } else {
    return static_cast<To>(x);
  }
}

// ---------------------------------------------------------------- packed conversions
TL_DEVICE half2 float2_to_half2(float2 v) { return __float22half2_rn(v); }
TL_DEVICE __nv_bfloat162 float2_to_bfloat162(float2 v) { return __float22bfloat162_rn(v); }
TL_DEVICE float2 half2_to_float2(half2 v) { return __half22float2(v); }
TL_DEVICE float2 bfloat162_to_float2(__nv_bfloat162 v) { return __bfloat1622float2(v); }
/// Two floats packed into one 32-bit register of two halves (lo = a, hi = b).
TL_DEVICE unsigned pack_half2(float a, float b) {
  half2 h = __floats2half2_rn(a, b);
  return *reinterpret_cast<unsigned*>(&h);
}
TL_DEVICE unsigned pack_bfloat162(float a, float b) {
  __nv_bfloat162 h = __floats2bfloat162_rn(a, b);
  return *reinterpret_cast<unsigned*>(&h);
}
TL_DEVICE fp8_e4x2_t float2_to_fp8_e4x2(float2 v) { return fp8_e4x2_t(v); }
TL_DEVICE fp8_e5x2_t float2_to_fp8_e5x2(float2 v) { return fp8_e5x2_t(v); }
TL_DEVICE fp8_e4x4_t float4_to_fp8_e4x4(float4 v) { return fp8_e4x4_t(v); }
TL_DEVICE fp8_e5x4_t float4_to_fp8_e5x4(float4 v) { return fp8_e5x4_t(v); }
TL_DEVICE float2 fp8_e4x2_to_float2(fp8_e4x2_t v) { return static_cast<float2>(v); }
TL_DEVICE float2 fp8_e5x2_to_float2(fp8_e5x2_t v) { return static_cast<float2>(v); }
TL_DEVICE float4 fp8_e4x4_to_float4(fp8_e4x4_t v) { return static_cast<float4>(v); }
TL_DEVICE float4 fp8_e5x4_to_float4(fp8_e5x4_t v) { return static_cast<float4>(v); }
TL_DEVICE half2 half2_from_fp8_e4x2(fp8_e4x2_t v) { return static_cast<half2>(__half2_raw(
    __nv_cvt_fp8x2_to_halfraw2(v.__x, __NV_E4M3))); }
TL_DEVICE half2 half2_from_fp8_e5x2(fp8_e5x2_t v) { return static_cast<half2>(__half2_raw(
    __nv_cvt_fp8x2_to_halfraw2(v.__x, __NV_E5M2))); }

// ---------------------------------------------------------------- limits
/// +inf for float types; the largest finite value for fp8 e4m3 (it has no inf) and for ints.
template <class T> TL_DEVICE T infinity();
template <> TL_DEVICE float infinity<float>() { return __int_as_float(0x7f800000); }
template <> TL_DEVICE double infinity<double>() { return __longlong_as_double(0x7ff0000000000000ll); }
template <> TL_DEVICE half_t infinity<half_t>() { return __ushort_as_half(0x7c00); }
template <> TL_DEVICE bfloat16_t infinity<bfloat16_t>() { return __ushort_as_bfloat16(0x7f80); }
template <> TL_DEVICE fp8_e4_t infinity<fp8_e4_t>() { fp8_e4_t r; r.__x = 0x7e; return r; }
template <> TL_DEVICE fp8_e5_t infinity<fp8_e5_t>() { fp8_e5_t r; r.__x = 0x7c; return r; }
template <> TL_DEVICE int8_t infinity<int8_t>() { return 127; }
template <> TL_DEVICE uint8_t infinity<uint8_t>() { return 255; }
template <> TL_DEVICE int16_t infinity<int16_t>() { return 32767; }
template <> TL_DEVICE uint16_t infinity<uint16_t>() { return 65535; }
template <> TL_DEVICE int infinity<int>() { return 0x7fffffff; }
template <> TL_DEVICE unsigned infinity<unsigned>() { return 0xffffffffu; }
template <> TL_DEVICE int64_t infinity<int64_t>() { return 0x7fffffffffffffffll; }
template <> TL_DEVICE uint64_t infinity<uint64_t>() { return 0xffffffffffffffffull; }

/// The identity of max: -infinity for floats, the lowest value for ints.
template <class T> TL_DEVICE T lowest();
template <> TL_DEVICE float lowest<float>() { return __int_as_float(0xff800000); }
template <> TL_DEVICE double lowest<double>() { return __longlong_as_double(0xfff0000000000000ll); }
template <> TL_DEVICE half_t lowest<half_t>() { return __ushort_as_half(0xfc00); }
template <> TL_DEVICE bfloat16_t lowest<bfloat16_t>() { return __ushort_as_bfloat16(0xff80); }
template <> TL_DEVICE fp8_e4_t lowest<fp8_e4_t>() { fp8_e4_t r; r.__x = 0xfe; return r; }
template <> TL_DEVICE fp8_e5_t lowest<fp8_e5_t>() { fp8_e5_t r; r.__x = 0xfc; return r; }
template <> TL_DEVICE int8_t lowest<int8_t>() { return -128; }
template <> TL_DEVICE uint8_t lowest<uint8_t>() { return 0; }
template <> TL_DEVICE int16_t lowest<int16_t>() { return -32768; }
template <> TL_DEVICE uint16_t lowest<uint16_t>() { return 0; }
template <> TL_DEVICE int lowest<int>() { return -0x7fffffff - 1; }
template <> TL_DEVICE unsigned lowest<unsigned>() { return 0u; }
template <> TL_DEVICE int64_t lowest<int64_t>() { return -0x7fffffffffffffffll - 1; }
template <> TL_DEVICE uint64_t lowest<uint64_t>() { return 0ull; }

// ---------------------------------------------------------------- integer arithmetic
/// ceil(a / b) for non-negative a and positive b.
template <class T> TL_HOST_DEVICE constexpr T ceildiv(T a, T b) { return (a + b - 1) / b; }
/// Python's a // b: rounds toward -infinity.
template <class T> TL_HOST_DEVICE constexpr T floordiv(T a, T b) {
  T q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}
/// Python's a % b: the result has the sign of b.
template <class T> TL_HOST_DEVICE constexpr T floormod(T a, T b) {
  T r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// ---------------------------------------------------------------- math
// Precise versions follow the C library (fast-math, when requested, affects these too).
// Low-precision overloads compute in float and round once.
#define TL_UNARY_MATH(name, fexpr, dexpr)                                                   \
  TL_DEVICE float name(float x) { return fexpr; }                                           \
  TL_DEVICE double name(double x) { return dexpr; }                                         \
  TL_DEVICE half_t name(half_t x) { return __float2half_rn(name(__half2float(x))); }        \
  TL_DEVICE bfloat16_t name(bfloat16_t x) { return __float2bfloat16_rn(name(__bfloat162float(x))); }
TL_UNARY_MATH(exp, ::expf(x), ::exp(x))
TL_UNARY_MATH(exp2, ::exp2f(x), ::exp2(x))
TL_UNARY_MATH(log, ::logf(x), ::log(x))
TL_UNARY_MATH(log2, ::log2f(x), ::log2(x))
TL_UNARY_MATH(sqrt, ::sqrtf(x), ::sqrt(x))
TL_UNARY_MATH(rsqrt, ::rsqrtf(x), ::rsqrt(x))
TL_UNARY_MATH(sin, ::sinf(x), ::sin(x))
TL_UNARY_MATH(cos, ::cosf(x), ::cos(x))
TL_UNARY_MATH(tanh, ::tanhf(x), ::tanh(x))
TL_UNARY_MATH(abs, ::fabsf(x), ::fabs(x))
TL_UNARY_MATH(floor, ::floorf(x), ::floor(x))
TL_UNARY_MATH(ceil, ::ceilf(x), ::ceil(x))
TL_UNARY_MATH(round, ::rintf(x), ::rint(x))  // half to even, like numpy.round
TL_UNARY_MATH(sigmoid, 1.0f / (1.0f + ::expf(-x)), 1.0 / (1.0 + ::exp(-x)))
#undef TL_UNARY_MATH

TL_DEVICE int abs(int x) { return x < 0 ? -x : x; }
TL_DEVICE int64_t abs(int64_t x) { return x < 0 ? -x : x; }

template <class T> TL_DEVICE T max(T a, T b) { return a > b ? a : b; }
template <class T> TL_DEVICE T min(T a, T b) { return a < b ? a : b; }
// NaN propagates through max and min, as in the interpreter (max.NaN: sm_80+, same cost as max)
template <> TL_DEVICE float max<float>(float a, float b) {
  float r; asm("max.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r;
}
template <> TL_DEVICE float min<float>(float a, float b) {
  float r; asm("min.NaN.f32 %0, %1, %2;" : "=f"(r) : "f"(a), "f"(b)); return r;
}
template <> TL_DEVICE half_t max<half_t>(half_t a, half_t b) { return __hmax_nan(a, b); }
template <> TL_DEVICE half_t min<half_t>(half_t a, half_t b) { return __hmin_nan(a, b); }
template <> TL_DEVICE bfloat16_t max<bfloat16_t>(bfloat16_t a, bfloat16_t b) { return __hmax_nan(a, b); }
template <> TL_DEVICE bfloat16_t min<bfloat16_t>(bfloat16_t a, bfloat16_t b) { return __hmin_nan(a, b); }

TL_DEVICE float pow(float a, float b) { return ::powf(a, b); }
TL_DEVICE double pow(double a, double b) { return ::pow(a, b); }
TL_DEVICE float fma(float a, float b, float c) { return ::fmaf(a, b, c); }
TL_DEVICE double fma(double a, double b, double c) { return ::fma(a, b, c); }
TL_DEVICE half_t fma(half_t a, half_t b, half_t c) { return __hfma(a, b, c); }
TL_DEVICE bfloat16_t fma(bfloat16_t a, bfloat16_t b, bfloat16_t c) { return __hfma(a, b, c); }

// Fast approximations: one MUFU instruction each (ftz: denormals flush to zero).
/// 2^x, ex2.approx.ftz.f32 (max rel. error 2^-22.5 on [-126, 128)).
TL_DEVICE float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
/// log2(x), lg2.approx.ftz.f32.
TL_DEVICE float fast_log2(float x) {
  float y;
  asm("lg2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
/// e^x as 2^(x * log2(e)).
TL_DEVICE float fast_exp(float x) { return fast_exp2(x * 1.4426950408889634f); }
/// ln(x) as log2(x) * ln(2).
TL_DEVICE float fast_log(float x) { return fast_log2(x) * 0.6931471805599453f; }
/// 1 / x, rcp.approx.ftz.f32.
TL_DEVICE float fast_rcp(float x) {
  float y;
  asm("rcp.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
/// 1 / sqrt(x), rsqrt.approx.ftz.f32.
TL_DEVICE float fast_rsqrt(float x) {
  float y;
  asm("rsqrt.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
/// tanh(x), tanh.approx.f32 (sm_75+; max abs. error about 2^-10.7).
TL_DEVICE float fast_tanh(float x) {
  float y;
  asm("tanh.approx.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
TL_DEVICE float fast_sin(float x) {
  float y;
  asm("sin.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
TL_DEVICE float fast_cos(float x) {
  float y;
  asm("cos.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}
/// 2^x on two halves at once, ex2.approx.f16x2.
TL_DEVICE half2 fast_exp2(half2 x) {
  unsigned y, xi = *reinterpret_cast<unsigned*>(&x);
  asm("ex2.approx.f16x2 %0, %1;" : "=r"(y) : "r"(xi));
  return *reinterpret_cast<half2*>(&y);
}

}  // namespace tl
