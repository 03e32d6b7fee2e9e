// ldmatrix (sm_75+) and stmatrix (sm_90+): warp-wide 8x8 b16 matrix moves shared <-> registers.
//
// Each 8x8 matrix has 8 rows of 16 bytes. For .x1/.x2/.x4, threads 0-7 / 0-15 / 0-31 give the
// shared-memory address of one row each: lanes 8*j .. 8*j+7 address rows 0..7 of matrix j.
// After the load, each lane holds one 32-bit register per matrix:
//   lane l gets row l / 4, columns 2 * (l % 4) and 2 * (l % 4) + 1 (low half = lower column).
// With .trans the matrix is transposed on the way: lane l gets column l / 4, rows 2 * (l % 4)
// and 2 * (l % 4) + 1. stmatrix is the exact inverse of ldmatrix with the same layouts.
#pragma once
#include "common.h"

namespace tl {

/// Load one 8x8 b16 matrix; dst points to 1 register (4 bytes) per lane.
TL_DEVICE void ldmatrix_x1(void* dst, const void* smem_row) {
  unsigned* r = reinterpret_cast<unsigned*>(dst);
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0]) : "r"(smem_addr(smem_row)));
}
/// Load two 8x8 b16 matrices; dst points to 2 registers per lane.
TL_DEVICE void ldmatrix_x2(void* dst, const void* smem_row) {
  unsigned* r = reinterpret_cast<unsigned*>(dst);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(smem_row)));
}
/// Load four 8x8 b16 matrices; dst points to 4 registers per lane.
TL_DEVICE void ldmatrix_x4(void* dst, const void* smem_row) {
  unsigned* r = reinterpret_cast<unsigned*>(dst);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(smem_row)));
}
TL_DEVICE void ldmatrix_x1_trans(void* dst, const void* smem_row) {
  unsigned* r = reinterpret_cast<unsigned*>(dst);
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0]) : "r"(smem_addr(smem_row)));
}
TL_DEVICE void ldmatrix_x2_trans(void* dst, const void* smem_row) {
  unsigned* r = reinterpret_cast<unsigned*>(dst);
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1]) : "r"(smem_addr(smem_row)));
}
TL_DEVICE void ldmatrix_x4_trans(void* dst, const void* smem_row) {
  unsigned* r = reinterpret_cast<unsigned*>(dst);
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(smem_addr(smem_row)));
}

/// ldmatrix by count and transpose flag: Num in {1, 2, 4}.
template <int Num, bool Trans = false>
TL_DEVICE void ldmatrix(void* dst, const void* smem_row) {
  static_assert(Num == 1 || Num == 2 || Num == 4, "ldmatrix loads 1, 2 or 4 matrices");
  if constexpr (Num == 1) {
    if constexpr (Trans) ldmatrix_x1_trans(dst, smem_row); else ldmatrix_x1(dst, smem_row);
  } else if constexpr (Num == 2) {
    if constexpr (Trans) ldmatrix_x2_trans(dst, smem_row); else ldmatrix_x2(dst, smem_row);
  } else {
    if constexpr (Trans) ldmatrix_x4_trans(dst, smem_row); else ldmatrix_x4(dst, smem_row);
  }
}

#if TL_SM90
/// Store one 8x8 b16 matrix from 1 register per lane (sm_90+).
TL_DEVICE void stmatrix_x1(void* smem_row, const void* src) {
  const unsigned* r = reinterpret_cast<const unsigned*>(src);
  asm volatile("stmatrix.sync.aligned.m8n8.x1.shared.b16 [%0], {%1};\n"
               ::"r"(smem_addr(smem_row)), "r"(r[0]) : "memory");
}
TL_DEVICE void stmatrix_x2(void* smem_row, const void* src) {
  const unsigned* r = reinterpret_cast<const unsigned*>(src);
  asm volatile("stmatrix.sync.aligned.m8n8.x2.shared.b16 [%0], {%1, %2};\n"
               ::"r"(smem_addr(smem_row)), "r"(r[0]), "r"(r[1]) : "memory");
}
TL_DEVICE void stmatrix_x4(void* smem_row, const void* src) {
  const unsigned* r = reinterpret_cast<const unsigned*>(src);
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
               ::"r"(smem_addr(smem_row)), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
}
TL_DEVICE void stmatrix_x1_trans(void* smem_row, const void* src) {
  const unsigned* r = reinterpret_cast<const unsigned*>(src);
  asm volatile("stmatrix.sync.aligned.m8n8.x1.trans.shared.b16 [%0], {%1};\n"
               ::"r"(smem_addr(smem_row)), "r"(r[0]) : "memory");
}
TL_DEVICE void stmatrix_x2_trans(void* smem_row, const void* src) {
  const unsigned* r = reinterpret_cast<const unsigned*>(src);
  asm volatile("stmatrix.sync.aligned.m8n8.x2.trans.shared.b16 [%0], {%1, %2};\n"
               ::"r"(smem_addr(smem_row)), "r"(r[0]), "r"(r[1]) : "memory");
}
TL_DEVICE void stmatrix_x4_trans(void* smem_row, const void* src) {
  const unsigned* r = reinterpret_cast<const unsigned*>(src);
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n"
               ::"r"(smem_addr(smem_row)), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3]) : "memory");
}

/// stmatrix by count and transpose flag: Num in {1, 2, 4}.
template <int Num, bool Trans = false>
TL_DEVICE void stmatrix(void* smem_row, const void* src) {
  static_assert(Num == 1 || Num == 2 || Num == 4, "stmatrix stores 1, 2 or 4 matrices");
  if constexpr (Num == 1) {
    if constexpr (Trans) stmatrix_x1_trans(smem_row, src); else stmatrix_x1(smem_row, src);
  } else if constexpr (Num == 2) {
    if constexpr (Trans) stmatrix_x2_trans(smem_row, src); else stmatrix_x2(smem_row, src);
  } else {
    if constexpr (Trans) stmatrix_x4_trans(smem_row, src); else stmatrix_x4(smem_row, src);
  }
}
#endif  // TL_SM90

}  // namespace tl
