// prefill.cuh - the body of the 8-bit mma prefill kernels, shared by the two entry points:
// mma_e4m3_d512 (kernel.cu: Q bf16, quantised in the kernel per row and dim half) and
// mma_e4m3q_d512 (kernel_q.cu: Q already e4m3 with a per-tensor scale *q_scale). Everything after
// the Q fragments is the same.
//
// Launch contract = the BF16 kernel's: grid.x = token_tile_count(total_q, num_seqs,
// kTileTokens), grid.y = num_q_heads / 8, block = kThreads, dynamic shared memory
// kSmemBytes. k_cache / v_cache e4m3 (strides in bytes) with dequantisation scales *k_scale,
// *v_scale, o bf16, optional fp32 LSE.
#pragma once

#include <cstdint>

#include "fp8/mma_e4m3_d512/epilogue.cuh"
#include "fp8/mma_e4m3_d512/loads.cuh"
#include "fp8/mma_e4m3_d512/mainloop.cuh"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/tile_order.cuh"
#include "wideattn.h"

namespace wideattn::mma_e4m3 {

// `smem`: the kernel's dynamic shared memory (kSmemBytes).
template <class Traits, bool kQIsE4m3, bool kSplit>
__device__ __forceinline__ void e4m3_prefill(const wideattn_prefill_params& p, unsigned char* smem) {
    const BlockWork work = find_block_work(p, Traits::kTileTokens);
    if (!work.tile.found) return;
    const ThreadPlace at = thread_place<Traits>(work);
    E4m3BlockGeometry geometry;
    block_geometry<Traits>(p, work, at.row_tile, &geometry);
    if constexpr (kSplit) restrict_to_split<Traits>(p, &geometry);

    uint32_t q[Traits::kQkSteps][4];
    float q_scale[2];
    if constexpr (kQIsE4m3) {
        load_q_fragments_e4m3<Traits>(p, q, at.first_token, work.tile.tile_len, at.row_tile, at.head, at.half,
                                      at.lane);
        q_scale[0] = q_scale[1] = __ldg(p.q_scale);
    } else {
        load_q_fragments<Traits>(p, q, q_scale, at.first_token, work.tile.tile_len, at.row_tile, at.head, at.half,
                                 at.lane);
    }
    const float key_factor = __ldg(p.k_scale) * p.softmax_scale * kLog2e;
    geometry.score_factor[0] = q_scale[0] * key_factor;
    geometry.score_factor[1] = q_scale[1] * key_factor;

    float o[Traits::kDimNTiles][4];
    zero_output(o);
    RowState state{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};

    attention_mainloop<Traits>(p, geometry, q, o, state, smem);

    // The tile's placement is recomputed rather than kept live across the loop (registers).
    const BlockWork finished = find_block_work(p, Traits::kTileTokens);
    const ThreadPlace out = thread_place<Traits>(finished);
    if constexpr (kSplit)
        write_partials<Traits>(p, o, state, __ldg(p.v_scale), out.first_token, finished.tile.tile_len, out.row_tile,
                               out.head, out.half, out.lane);
    else
        write_output<Traits>(p, o, state, __ldg(p.v_scale), out.first_token, finished.tile.tile_len, out.row_tile,
                             out.head, out.half, out.lane);
}

}  // namespace wideattn::mma_e4m3
