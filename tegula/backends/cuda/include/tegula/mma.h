// Warp-level tensor-core MMA (mma.sync, sm_80+; fp8 on sm_89+). D = A * B + C, accumulated in place.
//
// Fragment layouts (PTX ISA, "Matrix Fragments for mma.m16n8k*"). For lane l of the warp:
//   g = l / 4   (groupID)        t = l % 4   (threadID_in_group)
// Registers are 32-bit; a register of 16-bit (8-bit) inputs packs 2 (4) elements, the element with
// the lower index in the low bits. Element i of a thread's fragment is the i-th packed value.
//
// m16n8k16, A/B = f16 or bf16 (A is 16x16 row-major, B is 16x8 "col", i.e. indexed [k][n]):
//   A: 4 regs, 8 elements a0..a7
//      row = g       for a0,a1,a4,a5      row = g + 8 for a2,a3,a6,a7
//      col = 2t + (i & 1)  for a0..a3     col = 2t + (i & 1) + 8  for a4..a7
//   B: 2 regs, 4 elements b0..b3
//      k = 2t + (i & 1) for b0,b1         k = 2t + (i & 1) + 8 for b2,b3
//      n = g
//   C/D (f32: 4 floats c0..c3; f16: 2 regs holding c0..c3):
//      row = g for c0,c1                  row = g + 8 for c2,c3
//      col = 2t + (i & 1)
//
// m16n8k32, A/B = s8/u8 or fp8 e4m3/e5m2 (A 16x32, B 32x8):
//   A: 4 regs, 16 elements a0..a15
//      row = g     for a0..a3, a8..a11    row = g + 8 for a4..a7, a12..a15
//      col = 4t + (i & 3) for a0..a7      col = 4t + (i & 3) + 16 for a8..a15
//   B: 2 regs, 8 elements b0..b7
//      k = 4t + (i & 3) for b0..b3        k = 4t + (i & 3) + 16 for b4..b7
//      n = g
//   C/D: 4 s32 (or f32) values, same layout as above.
//
// m16n8k8, A/B = tf32 (A 16x8, B 8x8), each element a whole 32-bit register holding a float:
//   A: 4 regs a0..a3   row = g for a0,a2; g + 8 for a1,a3   col = t for a0,a1; t + 4 for a2,a3
//   B: 2 regs b0,b1    k = t for b0; t + 4 for b1           n = g
//   C/D: 4 floats, same layout as above.
//
// ldmatrix.x4 on a 16x16 b16 tile (lanes 0-15 address rows 0-15 at column 0, lanes 16-31 rows
// 0-15 at column 8) yields exactly the A fragment; ldmatrix.x2 (.trans for a [k][n] tile) yields B.
#pragma once
#include "common.h"

namespace tl {

/// m16n8k16 f16 x f16 -> f32: c[4] += a[4 regs] * b[2 regs].
TL_DEVICE void mma_m16n8k16_f16_f32(float* c, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// m16n8k16 bf16 x bf16 -> f32: c[4] += a[4 regs] * b[2 regs].
TL_DEVICE void mma_m16n8k16_bf16_f32(float* c, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// m16n8k16 f16 x f16 -> f16: c[2 regs of half2] += a[4 regs] * b[2 regs].
TL_DEVICE void mma_m16n8k16_f16_f16(unsigned* c, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 "
      "{%0, %1}, {%2, %3, %4, %5}, {%6, %7}, {%0, %1};\n"
      : "+r"(c[0]), "+r"(c[1])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// m16n8k32 s8 x s8 -> s32: c[4] += a[4 regs] * b[2 regs].
TL_DEVICE void mma_m16n8k32_s8_s32(int* c, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// m16n8k32 u8 x u8 -> s32.
TL_DEVICE void mma_m16n8k32_u8_s32(int* c, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k32.row.col.s32.u8.u8.s32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+r"(c[0]), "+r"(c[1]), "+r"(c[2]), "+r"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// m16n8k8 tf32 x tf32 -> f32: c[4] += a[4 regs] * b[2 regs]. Registers hold float bit patterns
/// (the low 13 mantissa bits are ignored; use to_tf32 to round first).
TL_DEVICE void mma_m16n8k8_tf32_f32(float* c, const unsigned* a, const unsigned* b) {
  asm volatile(
      "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

/// Round a float to tf32 (round to nearest, ties away), returned as its bit pattern.
TL_DEVICE unsigned to_tf32(float x) {
  unsigned r;
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(x));
  return r;
}

#if TL_SM89
/// m16n8k32 fp8 x fp8 -> f32 (sm_89+). AType/BType are "e4m3" or "e5m2" via the template flags.
template <bool AIsE5M2, bool BIsE5M2>
TL_DEVICE void mma_m16n8k32_fp8_f32(float* c, const unsigned* a, const unsigned* b) {
#define TL_MMA_FP8(TA, TB)                                                          \
  asm volatile("mma.sync.aligned.m16n8k32.row.col.f32." TA "." TB ".f32 "          \
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n" \
               : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])                    \
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]))
  if constexpr (!AIsE5M2 && !BIsE5M2) {
    TL_MMA_FP8("e4m3", "e4m3");
  } else if constexpr (!AIsE5M2 && BIsE5M2) {
    TL_MMA_FP8("e4m3", "e5m2");
  } else if constexpr (AIsE5M2 && !BIsE5M2) {
    TL_MMA_FP8("e5m2", "e4m3");
  } else {
    TL_MMA_FP8("e5m2", "e5m2");
  }
#undef TL_MMA_FP8
}
TL_DEVICE void mma_m16n8k32_e4m3_f32(float* c, const unsigned* a, const unsigned* b) {
  mma_m16n8k32_fp8_f32<false, false>(c, a, b);
}
TL_DEVICE void mma_m16n8k32_e5m2_f32(float* c, const unsigned* a, const unsigned* b) {
  mma_m16n8k32_fp8_f32<true, true>(c, a, b);
}
#endif  // TL_SM89

/// Dispatch by element types, for generated code: mma_sync<A, B, C>(c, a, b) where the shape is
/// implied (m16n8k16 for 16-bit, m16n8k32 for 8-bit, m16n8k8 for float = tf32). a and b point to
/// the packed 32-bit registers; c to the accumulator (4 values; for half_t C, 2 packed registers).
template <class AT, class BT, class CT>
TL_DEVICE void mma_sync(CT* c, const void* a, const void* b) {
  const unsigned* ra = reinterpret_cast<const unsigned*>(a);
  const unsigned* rb = reinterpret_cast<const unsigned*>(b);
  if constexpr (is_same<AT, half_t>::value && is_same<CT, float>::value) {
    mma_m16n8k16_f16_f32(c, ra, rb);
  } else if constexpr (is_same<AT, bfloat16_t>::value && is_same<CT, float>::value) {
    mma_m16n8k16_bf16_f32(c, ra, rb);
  } else if constexpr (is_same<AT, half_t>::value && is_same<CT, half_t>::value) {
    mma_m16n8k16_f16_f16(reinterpret_cast<unsigned*>(c), ra, rb);
  } else if constexpr (is_same<AT, int8_t>::value && is_same<CT, int>::value) {
    mma_m16n8k32_s8_s32(c, ra, rb);
  } else if constexpr (is_same<AT, uint8_t>::value && is_same<CT, int>::value) {
    mma_m16n8k32_u8_s32(c, ra, rb);
  } else if constexpr (is_same<AT, float>::value && is_same<CT, float>::value) {
    mma_m16n8k8_tf32_f32(c, ra, rb);
#if TL_SM89
  } else if constexpr ((is_same<AT, fp8_e4_t>::value || is_same<AT, fp8_e5_t>::value) &&
                       is_same<CT, float>::value) {
    mma_m16n8k32_fp8_f32<is_same<AT, fp8_e5_t>::value, is_same<BT, fp8_e5_t>::value>(c, ra, rb);
#endif
  } else {
    static_assert(sizeof(AT) == 0, "tl::mma_sync: unsupported element types");
  }
}

}  // namespace tl
