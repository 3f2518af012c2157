// epilogue.cuh - the end of a block of the few-token e4m3 decode kernel (verify_e4m3_d512): the
// h = 0 warps' row sums meet in shared memory (the row maxima are there already: `row_max`, the
// slot the last tile wrote), each warp writes its 64 dims of O^T, normalised
// (O / l x v_scale), into an fp32 [row][dim] staging area over the ring, and the block writes the
// rows of its valid tokens as bf16 with the natural-log LSE, or, in the split-KV entry, fp32
// partial rows and the split's LSE (kernels/common/split_partials.cuh). An empty row (no visible
// key) gets zeros and LSE -inf, a NaN row sum NaN in O and LSE.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "fp8/verify_e4m3_d512/mainloop.cuh"
#include "fp8/verify_e4m3_d512/traits.h"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_griddep.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/split_partials.cuh"
#include "wideattn.h"

namespace wideattn::verify_e4m3 {

// The row sum of `row` over the four key groups.
template <class Traits>
__device__ __forceinline__ float block_row_sum(uint32_t row_stats, int32_t row) {
    const float4 l = ptx::load_shared_f32x4(row_stat_address<Traits>(row_stats, row, 0));
    return (l.x + l.y) + (l.z + l.w);
}

template <class Traits, int32_t kTokens, bool kSplit>
__device__ __forceinline__ void write_block(const wideattn_prefill_params& p, uint32_t out, uint32_t row_stats,
                                            uint32_t row_max, const float (&o)[Traits::kOMTiles][kTokens][4],
                                            const LaneRows<Traits, kTokens>& rows, int32_t warp, int32_t lane,
                                            int64_t first_token, int32_t kv_head) {
    const int32_t g = lane / 4, t = lane % 4;
    const int32_t group = warp % Traits::kKeyGroups;
    const int32_t half = warp / Traits::kKeyGroups;
    if constexpr (kSplit) ptx::allow_dependent_launch();  // the merge may be scheduled (docs/design.md, split-KV)
    __syncthreads();  // every warp is past its last reads of the ring and the row statistics
    if (half == 0) {
#pragma unroll
        for (int32_t j = 0; j < kTokens; ++j)
#pragma unroll
            for (int32_t r = 0; r < 2; ++r) {
                float sum = rows.sum[j][r];
#pragma unroll
                for (int32_t offset = 4; offset < Traits::kWarpSize; offset *= 2)
                    sum += __shfl_xor_sync(kFullMask, sum, offset);
                if (g == 0) {
                    const int32_t row = j * Traits::kGroup + 2 * t + r;
                    asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(row_stat_address<Traits>(row_stats, row, group)),
                                 "f"(sum)
                                 : "memory");
                }
            }
    }
    __syncthreads();
    const float v_scale = __ldg(p.v_scale);
#pragma unroll
    for (int32_t j = 0; j < kTokens; ++j) {
        float inv[2];
#pragma unroll
        for (int32_t r = 0; r < 2; ++r)
            inv[r] = inverse_row_sum(block_row_sum<Traits>(row_stats, j * Traits::kGroup + 2 * t + r), v_scale);
#pragma unroll
        for (int32_t m = 0; m < Traits::kOMTiles; ++m) {
            // m-tile 2 cc + odd: dims 64 warp + 32 cc + 2g + odd (e 0, 1) and + 16 (e 2, 3).
            const int32_t dim = warp * Traits::kDimsPerWarp + Traits::kDimBlock * (m / 2) + 2 * g + m % 2;
#pragma unroll
            for (int32_t e = 0; e < 4; ++e) {
                const int32_t row = j * Traits::kGroup + 2 * t + e % 2;
                const uint32_t address =
                    out + static_cast<uint32_t>(row * Traits::kOutRowBytes + (dim + 16 * (e / 2)) * 4);
                asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(address), "f"(o[m][j][e] * inv[e % 2]) : "memory");
            }
        }
    }
    __syncthreads();

    // Thread i: float4 i, i + kThreads, ... of the valid rows (128 per row).
    constexpr int32_t kVecsPerOutRow = Traits::kHeadDim / 4;
    const int32_t thread = static_cast<int32_t>(threadIdx.x);
    const int32_t vecs = kTokens * Traits::kGroup * kVecsPerOutRow;
    for (int32_t v = thread; v < vecs; v += Traits::kThreads) {
        const int32_t row = v / kVecsPerOutRow;
        const int32_t dim = 4 * (v % kVecsPerOutRow);
        const int64_t token = first_token + row / Traits::kGroup;
        const int32_t head = kv_head * Traits::kGroup + row % Traits::kGroup;
        const float4 value = ptx::load_shared_f32x4(out + static_cast<uint32_t>(row * Traits::kOutRowBytes + dim * 4));
        if constexpr (kSplit) {
            *reinterpret_cast<float4*>(split_o_row(p, split_row(p, token, head)) + dim) = value;
        } else {
            __nv_bfloat16* dst = static_cast<__nv_bfloat16*>(p.o) + token * p.o_token_stride + head * p.o_head_stride;
            uint2 packed;
            packed.x = ptx::pack_bf16x2(value.x, value.y);
            packed.y = ptx::pack_bf16x2(value.z, value.w);
            *reinterpret_cast<uint2*>(dst + dim) = packed;
        }
    }
    if (thread < kTokens * Traits::kGroup) {
        const int32_t row = thread;
        const int64_t token = first_token + row / Traits::kGroup;
        const int32_t head = kv_head * Traits::kGroup + row % Traits::kGroup;
        float top;
        asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(top) : "r"(row_max + 4 * row) : "memory");
        const float lse = row_lse(top - Traits::kProbScaleLog2, block_row_sum<Traits>(row_stats, row));
        if constexpr (kSplit)
            *split_lse(p, split_row(p, token, head)) = lse;
        else if (p.lse != nullptr)
            static_cast<float*>(p.lse)[head * p.lse_head_stride + token] = lse;
    }
}

}  // namespace wideattn::verify_e4m3
