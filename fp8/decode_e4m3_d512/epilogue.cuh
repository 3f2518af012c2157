// epilogue.cuh - the end of a block of the single-token e4m3 decode kernel: the 8 warps' row
// maxima, row sums and O^T meet in shared memory (over the rings, after a block barrier), each
// warp's O scaled by 2^(its max - the block max); then every thread adds the 8 warps' parts of
// 16 outputs, normalises them (O / l x v_scale) and writes bf16 rows and the natural-log LSE, or,
// in the split-KV entry, fp32 partial rows and the split's LSE (kernels/common/split_partials.cuh).
// An empty row (no visible key) gets zeros and LSE -inf, a NaN row sum NaN in O and LSE.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "fp8/decode_e4m3_d512/mainloop.cuh"
#include "fp8/decode_e4m3_d512/traits.h"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_griddep.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/split_partials.cuh"
#include "wideattn.h"

namespace wideattn::decode_e4m3 {

// 2^(m - top) for a warp whose row maximum is m under the block's maximum top; 0 for a warp that
// saw no key of the row.
__device__ __forceinline__ float warp_weight(float m, float top) {
    return m == -INFINITY ? 0.0f : fast_exp2(m - top);
}

template <class Traits>
__device__ __forceinline__ uint32_t stats_address(uint32_t stats, int32_t warp, int32_t row) {
    return stats + static_cast<uint32_t>((warp * Traits::kRows + row) * 2 * 4);
}

// The block's row maximum and sum of row `row` from the warps' statistics.
template <class Traits>
__device__ __forceinline__ void block_row(uint32_t stats, int32_t row, float& top, float& sum) {
    float m[Traits::kWarps], l[Traits::kWarps];
    top = -INFINITY;
#pragma unroll
    for (int32_t w = 0; w < Traits::kWarps; ++w) {
        asm volatile("ld.shared.v2.f32 {%0, %1}, [%2];\n"
                     : "=f"(m[w]), "=f"(l[w])
                     : "r"(stats_address<Traits>(stats, w, row))
                     : "memory");
        top = fmaxf(top, m[w]);
    }
    sum = 0.0f;
#pragma unroll
    for (int32_t w = 0; w < Traits::kWarps; ++w) sum += l[w] * warp_weight(m[w], top);
}

// The sum, in part order, of the Traits::kWarps parts' float4 at dims dim .. dim + 3 of row `row`
// in the merge area (fp32 [part][row][dim], kMergeRowBytes a row).
template <class Traits>
__device__ __forceinline__ float4 merged_quad(uint32_t merge, int32_t row, int32_t dim) {
    float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
    for (int32_t w = 0; w < Traits::kWarps; ++w) {
        const float4 v = ptx::load_shared_f32x4(
            merge + static_cast<uint32_t>((w * Traits::kRows + row) * Traits::kMergeRowBytes + dim * 4));
        acc.x += v.x;
        acc.y += v.y;
        acc.z += v.z;
        acc.w += v.w;
    }
    return acc;
}

// Writes acc x inv at dims dim .. dim + 3 of head `head` of `token`: bf16 into o, or, kSplit, the
// split's fp32 partial row `part` (split_row).
template <bool kSplit>
__device__ __forceinline__ void store_output_quad(const wideattn_prefill_params& p, int64_t token, int32_t head,
                                                  int64_t part, int32_t dim, float4 acc, float inv) {
    if constexpr (kSplit) {
        *reinterpret_cast<float4*>(split_o_row(p, part) + dim) =
            make_float4(acc.x * inv, acc.y * inv, acc.z * inv, acc.w * inv);
    } else {
        __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.o) + token * p.o_token_stride + head * p.o_head_stride;
        uint2 packed;
        packed.x = ptx::pack_bf16x2(acc.x * inv, acc.y * inv);
        packed.y = ptx::pack_bf16x2(acc.z * inv, acc.w * inv);
        *reinterpret_cast<uint2*>(out + dim) = packed;
    }
}

// The warp's row sums over its lanes: lanes with the same t (lane % 4) hold the same two rows.
template <class Traits>
__device__ __forceinline__ void sum_warp_rows(WarpRows& rows) {
#pragma unroll
    for (int32_t r = 0; r < 2; ++r)
#pragma unroll
        for (int32_t offset = 4; offset < Traits::kWarpSize; offset *= 2)
            rows.sum[r] += __shfl_xor_sync(kFullMask, rows.sum[r], offset);
}

// Writes a row's LSE: the split's (kSplit, partial row `part`), else into lse when the call has one.
template <bool kSplit>
__device__ __forceinline__ void store_row_lse(const wideattn_prefill_params& p, int64_t token, int32_t head,
                                              int64_t part, float lse) {
    if constexpr (kSplit)
        *split_lse(p, part) = lse;
    else if (p.lse != nullptr)
        static_cast<float*>(p.lse)[head * p.lse_head_stride + token] = lse;
}

template <class Traits, bool kSplit>
__device__ __forceinline__ void write_block(const wideattn_prefill_params& p, uint32_t merge, uint32_t stats,
                                            const float (&o)[Traits::kONTiles][4], WarpRows& rows, int32_t warp,
                                            int32_t lane, int64_t token, int32_t kv_head) {
    const int32_t g = lane / 4, t = lane % 4;
    if constexpr (kSplit) ptx::allow_dependent_launch();  // the merge may be scheduled (docs/design.md, split-KV)
    sum_warp_rows<Traits>(rows);
    __syncthreads();  // every warp is past its key loop: the rings are free
    if (g == 0)
#pragma unroll
        for (int32_t r = 0; r < 2; ++r)
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(stats_address<Traits>(stats, warp, 2 * t + r)),
                         "f"(rows.max_log2[r]), "f"(rows.sum[r])
                         : "memory");
    __syncthreads();
    float weight[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        float top, sum;
        block_row<Traits>(stats, 2 * t + r, top, sum);
        weight[r] = warp_weight(rows.max_log2[r], top);
    }
    const uint32_t warp_merge = merge + static_cast<uint32_t>(warp * Traits::kRows * Traits::kMergeRowBytes);
#pragma unroll
    for (int32_t n = 0; n < Traits::kONTiles; ++n) {
        const int32_t dim = Traits::o_dim(n, g);
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            const int32_t row = 2 * t + e % 2;
            const uint32_t address = warp_merge + static_cast<uint32_t>(row * Traits::kMergeRowBytes +
                                                                        (dim + Traits::kOHalfDims * (e / 2)) * 4);
            asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(address), "f"(o[n][e] * weight[e % 2]) : "memory");
        }
    }
    __syncthreads();

    // Thread i: row i / 32, dims 4 (i % 32) + 128 j for j < 4.
    constexpr int32_t kThreadsPerRow = Traits::kThreads / Traits::kRows;
    constexpr int32_t kDimsPerPass = 4 * kThreadsPerRow;
    constexpr int32_t kPasses = Traits::kHeadDim / kDimsPerPass;
    const int32_t thread = static_cast<int32_t>(threadIdx.x);
    const int32_t row = thread / kThreadsPerRow;
    const int32_t first_dim = 4 * (thread % kThreadsPerRow);
    float top, sum;
    block_row<Traits>(stats, row, top, sum);
    float inv;
    if constexpr (Traits::kScaledV)
        inv = inverse_row_sum(sum, __ldg(p.v_scale));
    else
        inv = inverse_row_sum(sum);
    const int32_t head = kv_head * Traits::kGroup + row;
    const float lse = row_lse(top - Traits::kProbScaleLog2, sum);
    int64_t part = 0;
    if constexpr (kSplit) part = split_row(p, token, head);
#pragma unroll
    for (int32_t j = 0; j < kPasses; ++j) {
        const int32_t dim = first_dim + j * kDimsPerPass;
        store_output_quad<kSplit>(p, token, head, part, dim, merged_quad<Traits>(merge, row, dim), inv);
    }
    if (thread % kThreadsPerRow == 0) store_row_lse<kSplit>(p, token, head, part, lse);
}

}  // namespace wideattn::decode_e4m3
