// epilogue.cuh - the end of a block of decode_bf16kfvw_d512: the warpgroups hold the same row
// maxima and sums (the same scores) and O^T of disjoint dims, so there is no O merge: every warp
// posts its heads' maxima and, in warpgroup 0 only, its row-sum parts into decode_e4m3_d512's
// statistics ([warp][row]; warpgroup 1 posts zero sums), each warpgroup its O^T into fp32 rows over
// the ring; then every thread normalises 16 outputs (O / l) and writes them with decode_e4m3_d512's
// stores: bf16 rows and the natural-log LSE, or, in the split-KV entry, fp32 partial rows and the
// split's LSE.
#pragma once

#include <cstdint>

#include "fp8/decode_e4m3_d512/epilogue.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_griddep.cuh"
#include "kernels/common/split_partials.cuh"
#include "kernels/decode_bf16kfvw_d512/layout.h"
#include "kernels/decode_bf16kfvw_d512/mainloop.cuh"
#include "kernels/decode_bf16kfvw_d512/traits.h"
#include "wideattn.h"

namespace wideattn::kfvw_bf16 {

template <bool kSplit>
__device__ __forceinline__ void write_block(const wideattn_prefill_params& p, uint32_t rows_area, uint32_t stats,
                                            const float (&o)[Traits::kPvDimBlocks][4], WarpRows& rows, int32_t group,
                                            int32_t warp, int32_t lane, int64_t token, int32_t kv_head) {
    const int32_t g = lane / 4, t = lane % 4;
    const int32_t block_warp = group * Traits::kWarpsPerGroup + warp;
    if constexpr (kSplit) ptx::allow_dependent_launch();  // the merge may be scheduled (docs/design.md, split-KV)
    decode_e4m3::sum_warp_rows<Traits>(rows);
    __syncthreads();  // both warpgroups are past the key loop: the ring is free
    if (g == 0)
#pragma unroll
        for (int32_t r = 0; r < 2; ++r)
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(
                             decode_e4m3::stats_address<Traits>(stats, block_warp, 2 * t + r)),
                         "f"(rows.max_log2[r]), "f"(group == 0 ? rows.sum[r] : 0.0f)
                         : "memory");
#pragma unroll
    for (int32_t d = 0; d < Traits::kPvDimBlocks; ++d)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            const int32_t head = 2 * t + e % 2;
            const int32_t dim = pv_row_dim(group, d, warp * Traits::kSubTileKeys + g + 8 * (e / 2));
            asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(rows_area + static_cast<uint32_t>(
                                                                           head * Traits::kMergeRowBytes + dim * 4)),
                         "f"(o[d][e])
                         : "memory");
        }
    __syncthreads();

    decode_e4m3::write_rows<Traits, kSplit, false, 1>(p, rows_area, stats, token, kv_head);
}

}  // namespace wideattn::kfvw_bf16
