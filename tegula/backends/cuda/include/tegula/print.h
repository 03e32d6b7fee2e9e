// Device-side printing for T.print: one line per call, prefixed with the block and thread index.
// printf is built into NVRTC and nvcc device code; no host header is needed.
#pragma once
#include "common.h"

#if !defined(__CUDACC_RTC__)
#include <cstdio>
#endif

namespace tl {

namespace detail {
TL_DEVICE void print_prefix(const char* msg) {
  printf("%s: block=(%d, %d, %d) thread=(%d, %d, %d) ", msg, (int)blockIdx.x, (int)blockIdx.y,
         (int)blockIdx.z, (int)threadIdx.x, (int)threadIdx.y, (int)threadIdx.z);
}
}  // namespace detail

// Each overload prints "msg: block=(..) thread=(..) dtype=<name> value=<v>".
#define TL_PRINT_AS(T, NAME, FMT, EXPR)                                                      \
  TL_DEVICE void print_value(const char* msg, T x) {                                          \
    printf("%s: block=(%d, %d, %d) thread=(%d, %d, %d) dtype=" NAME " value=" FMT "\n", msg,  \
           (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z, (int)threadIdx.x,               \
           (int)threadIdx.y, (int)threadIdx.z, EXPR);                                         \
  }
TL_PRINT_AS(bool, "bool", "%s", x ? "True" : "False")
TL_PRINT_AS(signed char, "int8", "%d", (int)x)
TL_PRINT_AS(unsigned char, "uint8", "%u", (unsigned)x)
TL_PRINT_AS(short, "int16", "%d", (int)x)
TL_PRINT_AS(unsigned short, "uint16", "%u", (unsigned)x)
TL_PRINT_AS(int, "int32", "%d", x)
TL_PRINT_AS(unsigned, "uint32", "%u", x)
TL_PRINT_AS(long, "int64", "%lld", (long long)x)
TL_PRINT_AS(long long, "int64", "%lld", x)
TL_PRINT_AS(unsigned long, "uint64", "%llu", (unsigned long long)x)
TL_PRINT_AS(unsigned long long, "uint64", "%llu", x)
TL_PRINT_AS(float, "float32", "%.6g", (double)x)
TL_PRINT_AS(double, "float64", "%.10g", x)
TL_PRINT_AS(half_t, "float16", "%.5g", (double)__half2float(x))
TL_PRINT_AS(bfloat16_t, "bfloat16", "%.4g", (double)__bfloat162float(x))
TL_PRINT_AS(fp8_e4_t, "float8_e4m3", "%.3g", (double)static_cast<float>(x))
TL_PRINT_AS(fp8_e5_t, "float8_e5m2", "%.3g", (double)static_cast<float>(x))
TL_PRINT_AS(const void*, "pointer", "%p", x)
#undef TL_PRINT_AS

/// Print msg alone (T.print of a string).
TL_DEVICE void print_msg(const char* msg) {
  detail::print_prefix(msg);
  printf("\n");
}

/// Print elements [0, size) of a buffer, one line each, with their index.
template <class T>
TL_DEVICE void print_buffer(const char* msg, const T* buf, int size) {
  for (int i = 0; i < size; ++i) {
    printf("%s[%d] ", msg, i);
    print_value("", buf[i]);
  }
}

}  // namespace tl
