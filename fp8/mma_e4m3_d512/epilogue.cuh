// epilogue.cuh - finishes a block of the 8-bit mma prefill kernels: reduces the row sums
// over the quad of lanes holding a row, normalises O (O / l * v_scale; the 2^8 P factor
// cancels), writes bf16 rows of valid tokens only (a lane's 4 consecutive dims per 16-dim
// block as one 8-byte store) and the optional natural-log LSE. Rows without a visible key
// get zeros and LSE -inf; a NaN softmax sum gives NaN in O and LSE. write_partials is the
// split-KV form (grid.z > 1): fp32 partial rows and LSE into the workspace, after letting the
// merge kernel's blocks be scheduled (kernels/common/ptx_griddep.cuh).
#pragma once

#include <cstdint>
#include <cuda_bf16.h>

#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_griddep.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/split_partials.cuh"
#include "wideattn.h"

namespace wideattn::mma_e4m3 {

template <class Traits>
__device__ __forceinline__ void write_output(const wideattn_prefill_params& p,
                                             const float (&o)[Traits::kDimNTiles][4], RowState& state, float v_scale,
                                             int64_t first_token, int32_t tile_len, int32_t row_tile, int32_t head,
                                             int32_t half, int32_t lane) {
    constexpr int32_t kLaneDims = 4;  // consecutive output dims a lane owns per 16-dim block
    float inv_sum[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        const float total = reduce_row_sum(state, r);
        inv_sum[r] = inverse_row_sum(total, v_scale);
    }
    __nv_bfloat16* o_base = static_cast<__nv_bfloat16*>(p.o);
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        const int32_t token = row_tile * Traits::kTokensPerRowTile + r;
        if (token >= tile_len) continue;
        __nv_bfloat16* row = o_base + (first_token + token) * p.o_token_stride + head * p.o_head_stride +
                             half * Traits::kDimsPerWarp + kLaneDims * (lane % 4);
#pragma unroll
        for (int32_t v = 0; v < Traits::kPvDimBlocks; ++v) {
            uint2 packed;
            packed.x = ptx::pack_bf16x2(o[2 * v][2 * r] * inv_sum[r], o[2 * v + 1][2 * r] * inv_sum[r]);
            packed.y = ptx::pack_bf16x2(o[2 * v][2 * r + 1] * inv_sum[r], o[2 * v + 1][2 * r + 1] * inv_sum[r]);
            *reinterpret_cast<uint2*>(row + v * Traits::kVecBytes) = packed;
        }
        if (p.lse != nullptr && half == 0 && lane % 4 == 0) {
            const float base = state.max_log2[r] - Traits::kProbScaleLog2;  // sum is of 2^(s - base)
            static_cast<float*>(p.lse)[head * p.lse_head_stride + first_token + token] =
                row_lse(base, state.sum[r]);
        }
    }
}

// Split-KV (grid.z > 1): the same rows as write_output, as fp32 partials (O / l * v_scale) and
// the split's LSE into the workspace (kernels/common/split_partials.cuh), after letting the merge
// kernel be scheduled (ptx::allow_dependent_launch, as kernels/common/epilogue.cuh's write_partials).
template <class Traits>
__device__ __forceinline__ void write_partials(const wideattn_prefill_params& p,
                                               const float (&o)[Traits::kDimNTiles][4], RowState& state, float v_scale,
                                               int64_t first_token, int32_t tile_len, int32_t row_tile, int32_t head,
                                               int32_t half, int32_t lane) {
    ptx::allow_dependent_launch();
    constexpr int32_t kLaneDims = 4;  // consecutive output dims a lane owns per 16-dim block
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        const float total = reduce_row_sum(state, r);
        const float inv_sum = inverse_row_sum(total, v_scale);
        const int32_t token = row_tile * Traits::kTokensPerRowTile + r;
        if (token >= tile_len) continue;
        const int64_t part = split_row(p, first_token + token, head);
        float* row = split_o_row(p, part) + half * Traits::kDimsPerWarp + kLaneDims * (lane % 4);
#pragma unroll
        for (int32_t v = 0; v < Traits::kPvDimBlocks; ++v)
            *reinterpret_cast<float4*>(row + v * Traits::kVecBytes) =
                make_float4(o[2 * v][2 * r] * inv_sum, o[2 * v + 1][2 * r] * inv_sum, o[2 * v][2 * r + 1] * inv_sum,
                            o[2 * v + 1][2 * r + 1] * inv_sum);
        if (half == 0 && lane % 4 == 0)
            *split_lse(p, part) = row_lse(state.max_log2[r] - Traits::kProbScaleLog2, total);
    }
}

}  // namespace wideattn::mma_e4m3
