// block.cuh - the body of the BF16 mma.sync prefill kernel for head dim 512, GQA group 8, as a
// template on its traits: find the block's work, load Q, run the key loop (mainloop.cuh) and
// write O and the LSE (kernels/common/epilogue.cuh). Both entry points instantiate it:
// kernel.cu (MmaBf16D512Traits, no ping-pong) and ../bf16_d512_pp/kernel.cu (ping-pong).
//
// Launch: grid.x = token_tile_count(total_q, num_seqs, kTileTokens), grid.y = num_q_heads / 8,
// block = kThreads, dynamic shared memory kSmemBytes. Each block computes 64 rows (8 tokens
// x the 8 query heads of one KV head) over every key they can see.
#pragma once

#include <cstdint>

#include "kernels/common/block_geometry.cuh"
#include "kernels/common/epilogue.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/tile_order.cuh"
#include "kernels/mma/bf16_d512/loads.cuh"
#include "kernels/mma/bf16_d512/mainloop.cuh"
#include "wideattn.h"

namespace wideattn::mma_bf16 {

template <class Traits, bool kSplit>
__device__ __forceinline__ void prefill_block(const wideattn_prefill_params& p, unsigned char* smem) {
    const BlockWork work = find_block_work(p, Traits::kTileTokens);
    if (!work.tile.found) return;
    const ThreadPlace at = thread_place<Traits>(work);
    BlockGeometry geometry;
    block_geometry<Traits>(p, work, at.row_tile, &geometry);
    if constexpr (kSplit) restrict_to_split<Traits>(p, &geometry);

    uint32_t q[Traits::kQkSteps][4];
    load_q_fragments<Traits>(p, q, at.first_token, work.tile.tile_len, at.row_tile, at.head, at.half, at.lane);

    float o[Traits::kDimNTiles][4];
    zero_output(o);
    RowState state{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};

    attention_mainloop<Traits>(p, geometry, q, o, state, smem);
    if constexpr (kSplit)
        write_partials<Traits>(p, o, state, at.first_token, work.tile.tile_len, at.row_tile, at.head, at.half, at.lane);
    else
        write_output<Traits>(p, o, state, at.first_token, work.tile.tile_len, at.row_tile, at.head, at.half, at.lane);
}

}  // namespace wideattn::mma_bf16
