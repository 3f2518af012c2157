// epilogue.cuh - the end of a block of decode_e4m3kfvw_d512: every warp posts its heads' maxima and
// row-sum parts (decode_e4m3_d512's statistics, [warp][row]: the warps of a warpgroup share the
// maxima), each warpgroup its O (the two terms joined, O_hi + O_lo 2^-4, scaled by 2^(its max - the
// block max)) over the rings; then every thread adds the two warpgroups' parts of 16 outputs,
// normalises them (O / l x v_scale) and writes them with decode_e4m3_d512's stores: bf16 rows and
// the natural-log LSE, or, in the split-KV entry, fp32 partial rows and the split's LSE.
#pragma once

#include <cstdint>

#include "fp8/decode_e4m3_d512/epilogue.cuh"
#include "fp8/decode_e4m3kfvw_d512/layout.h"
#include "fp8/decode_e4m3kfvw_d512/mainloop.cuh"
#include "fp8/decode_e4m3kfvw_d512/traits.h"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_griddep.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/split_partials.cuh"
#include "wideattn.h"

namespace wideattn::kfvw {

template <bool kSplit>
__device__ __forceinline__ void write_block(const wideattn_prefill_params& p, uint32_t merge, uint32_t stats,
                                            const float (&o)[Traits::kPvDimBlocks][2][4], WarpRows& rows,
                                            int32_t group, int32_t warp, int32_t lane, int64_t token,
                                            int32_t kv_head) {
    const int32_t g = lane / 4, t = lane % 4;
    const int32_t block_warp = group * Traits::kWarpsPerGroup + warp;
    if constexpr (kSplit) ptx::allow_dependent_launch();  // the merge may be scheduled (docs/design.md, split-KV)
    decode_e4m3::sum_warp_rows<Traits>(rows);
    __syncthreads();  // every warpgroup is past its key loop: the rings are free
    if (g == 0)
#pragma unroll
        for (int32_t r = 0; r < 2; ++r)
            asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(
                             decode_e4m3::stats_address<Traits>(stats, block_warp, 2 * t + r)),
                         "f"(rows.max_log2[r]), "f"(rows.sum[r])
                         : "memory");
    __syncthreads();
    float weight[2];
    decode_e4m3::row_weights<Traits>(stats, t, rows, weight);
    const uint32_t group_merge = merge + static_cast<uint32_t>(group * Traits::kRows * Traits::kMergeRowBytes);
#pragma unroll
    for (int32_t d = 0; d < Traits::kPvDimBlocks; ++d)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            const int32_t head = 2 * t + e % 2;
            const int32_t dim = pv_row_dim(d, warp * Traits::kSubTileKeys + g + 8 * (e / 2));
            const float value = (o[d][0][e] + o[d][1][e] * Traits::kLowTermWeight) * weight[e % 2];
            asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(group_merge + static_cast<uint32_t>(
                                                                              head * Traits::kMergeRowBytes + dim * 4)),
                         "f"(value)
                         : "memory");
        }
    __syncthreads();

    decode_e4m3::write_rows<Traits, kSplit, true, Traits::kWarpGroups>(p, merge, stats, token, kv_head);
}

}  // namespace wideattn::kfvw
