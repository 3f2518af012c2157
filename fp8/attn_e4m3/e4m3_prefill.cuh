// e4m3_prefill.cuh - the body of the 8-bit prefill kernels, shared by the two entry points:
// mma_e4m3_d512 (Q bf16, quantised in the kernel per row and dim half) and mma_e4m3q_d512 (Q
// already e4m3 with a per-tensor scale *q_scale). Everything after the Q fragments is the same.
//
// Launch contract = the BF16 kernel's: grid.x = token_tile_count(total_q, num_seqs,
// kTileTokens), grid.y = num_q_heads / 8, block = kThreads, dynamic shared memory
// kSmemBytes. k_cache / v_cache e4m3 (strides in bytes) with dequantisation scales *k_scale,
// *v_scale, o bf16, optional fp32 LSE.
#pragma once

#include <cstdint>
#include <cuda_bf16.h>

#include "fp8/attn_e4m3/e4m3_attn_traits.h"
#include "fp8/attn_e4m3/e4m3_epilogue.cuh"
#include "fp8/attn_e4m3/e4m3_mainloop.cuh"
#include "kernels/mma/mma_block_geometry.cuh"

namespace wideattn::mma_e4m3 {

// `smem`: the kernel's dynamic shared memory (kSmemBytes).
template <bool kQIsE4m3>
__device__ __forceinline__ void e4m3_prefill(const wideattn_prefill_params& p, unsigned char* smem) {
    const mma::BlockWork work = mma::find_block_work(p, Tr::kTileTokens);
    if (!work.tile.found) return;
    const mma::ThreadPlace at = mma::thread_place<Tr>(work);
    BlockGeometry geometry;
    mma::block_geometry<Tr>(p, work, at.row_tile, &geometry);

    uint32_t q[Tr::kQkSteps][4];
    float q_scale[2];
    if constexpr (kQIsE4m3) {
        load_q_fragments_e4m3(p, q, at.first_token, work.tile.tile_len, at.row_tile, at.head, at.half, at.lane);
        q_scale[0] = q_scale[1] = __ldg(p.q_scale);
    } else {
        load_q_fragments(p, q, q_scale, at.first_token, work.tile.tile_len, at.row_tile, at.head, at.half, at.lane);
    }
    const float key_factor = __ldg(p.k_scale) * p.softmax_scale * kLog2e;
    geometry.score_factor[0] = q_scale[0] * key_factor;
    geometry.score_factor[1] = q_scale[1] * key_factor;

    float o[Tr::kDimNTiles][4];
    mma::zero_output(o);
    RowState state{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};

    attention_mainloop(p, geometry, q, o, state, smem);

    // The tile's placement is recomputed rather than kept live across the loop (registers).
    const mma::BlockWork finished = mma::find_block_work(p, Tr::kTileTokens);
    const mma::ThreadPlace out = mma::thread_place<Tr>(finished);
    write_output(p, o, state, __ldg(p.v_scale), out.first_token, finished.tile.tile_len, out.row_tile, out.head,
                 out.half, out.lane);
}

}  // namespace wideattn::mma_e4m3
