// epilogue.cuh - finishes a block of a BF16-output prefill kernel whose O accumulator is in the
// m16n8 layout (mma_bf16_d512; the Hopper kernels, whose warps hold the same layout of the wgmma
// m64n256 accumulator): reduces the row sums over the quad of lanes holding a row, normalises O,
// writes bf16 rows of valid tokens only, and the optional natural-log LSE. Rows without a visible
// key get zeros and LSE -inf; a row whose softmax sum is NaN (a NaN or +inf score) gets NaN in O
// and LSE. write_partials is the split-KV form (grid.z > 1): the same rows as fp32 partials and
// their LSE into the workspace (kernels/common/split_partials.cuh), after letting the merge
// kernel's blocks be scheduled (ptx::allow_dependent_launch). `Traits` supplies kDimNTiles
// (8-column quads of O per thread), kAccumN (columns per quad), kDimsPerWarp (the dims of a row
// one warp holds) and kTokensPerRowTile (tokens in a warp's 16 rows).
#pragma once

#include <cstdint>
#include <cuda_bf16.h>

#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_griddep.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/split_partials.cuh"
#include "wideattn.h"

namespace wideattn {

template <class Traits>
__device__ __forceinline__ void write_output(const wideattn_prefill_params& p,
                                             const float (&o)[Traits::kDimNTiles][4], RowState& state,
                                             int64_t first_token, int32_t tile_len, int32_t row_tile, int32_t head,
                                             int32_t half, int32_t lane) {
    float inv_sum[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        const float total = reduce_row_sum(state, r);
        inv_sum[r] = inverse_row_sum(total);
    }
    __nv_bfloat16* o_base = static_cast<__nv_bfloat16*>(p.o);
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        const int32_t token = row_tile * Traits::kTokensPerRowTile + r;
        if (token >= tile_len) continue;
        __nv_bfloat16* row = o_base + (first_token + token) * p.o_token_stride + head * p.o_head_stride +
                             half * Traits::kDimsPerWarp + 2 * (lane % 4);
#pragma unroll
        for (int32_t n = 0; n < Traits::kDimNTiles; ++n)
            *reinterpret_cast<uint32_t*>(row + n * Traits::kAccumN) =
                ptx::pack_bf16x2(o[n][2 * r] * inv_sum[r], o[n][2 * r + 1] * inv_sum[r]);
        if (p.lse != nullptr && half == 0 && lane % 4 == 0)
            static_cast<float*>(p.lse)[head * p.lse_head_stride + first_token + token] =
                row_lse(state.max_log2[r], state.sum[r]);
    }
}

// Split-KV (grid.z > 1): the same rows as write_output, as fp32 partials (O normalised by this
// split's row sum) and the split's LSE into the workspace (kernels/common/split_partials.cuh).
// The key loop is done: the merge kernel, a programmatic dependent launch on sm_90 and later, may
// be scheduled once every block is here (it still waits for this grid to finish before it reads
// the partials, ptx_griddep.cuh), so its launch overlaps the grid's tail rather than following it.
template <class Traits>
__device__ __forceinline__ void write_partials(const wideattn_prefill_params& p,
                                               const float (&o)[Traits::kDimNTiles][4], RowState& state,
                                               int64_t first_token, int32_t tile_len, int32_t row_tile, int32_t head,
                                               int32_t half, int32_t lane) {
    ptx::allow_dependent_launch();
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        const float total = reduce_row_sum(state, r);
        const float inv_sum = inverse_row_sum(total);
        const int32_t token = row_tile * Traits::kTokensPerRowTile + r;
        if (token >= tile_len) continue;
        const int64_t part = split_row(p, first_token + token, head);
        float* row = split_o_row(p, part) + half * Traits::kDimsPerWarp + 2 * (lane % 4);
#pragma unroll
        for (int32_t n = 0; n < Traits::kDimNTiles; ++n)
            *reinterpret_cast<float2*>(row + n * Traits::kAccumN) =
                make_float2(o[n][2 * r] * inv_sum, o[n][2 * r + 1] * inv_sum);
        if (half == 0 && lane % 4 == 0) *split_lse(p, part) = row_lse(state.max_log2[r], total);
    }
}

}  // namespace wideattn
