// Tensor-core building blocks through inline PTX (sm_80 and newer): the bf16 mma.sync
// m16n8k16 with f32 accumulators, ldmatrix to fill its fragments from shared memory, and
// cp.async for 16-byte global-to-shared copies that bypass the registers.
//
// [Note: mma fragments] For one warp, lane = 4*g + t (g = lane/4 the "group", t = lane%4):
//   A (16x16, row-major), 4 registers of 2 bf16: a0 = A[g][2t..2t+1], a1 = A[g+8][2t..2t+1],
//     a2 = A[g][2t+8..2t+9], a3 = A[g+8][2t+8..2t+9];
//   B (16x8, k x n), 2 registers: b0 = B[2t..2t+1][g], b1 = B[2t+8..2t+9][g];
//   C (16x8 f32), 4 floats: c0,c1 = C[g][2t..2t+1], c2,c3 = C[g+8][2t..2t+1].
// So the C tiles of two neighbouring n8 blocks are, once packed to bf16, exactly the A fragment
// of the 16x16 block they cover: a probability tile never leaves the registers.
// ldmatrix.x4 loads four 8x8 b16 matrices, lanes 8i..8i+7 giving the row addresses of matrix i;
// lane 4g+t receives row g, columns 2t..2t+1 of each (with .trans: column g, rows 2t..2t+1),
// which is the layout of a0..a3 above, and of b0/b1 for B = M^T (plain) or B = M (.trans)
// where M is stored row-major.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

namespace zt::cuda::mma {

__device__ __forceinline__ uint32_t smem_addr(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// Four 8x8 matrices; `row` is this lane's row address (see the note).
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const __nv_bfloat16* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const __nv_bfloat16* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_addr(row)));
}

// c += A B for one 16x8 tile (fragments as in the note).
__device__ __forceinline__ void mma_bf16(float (&c)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Two floats as one register of bf16 pairs, `lo` in the low half (the lower column index).
__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&v);
}

// 16 bytes global -> shared, asynchronously; where !valid nothing is read and zeros are written
// (src must still be a valid address).
__device__ __forceinline__ void cp_async16(void* dst, const void* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N> __device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

}  // namespace zt::cuda::mma
