// mma_bf16_d512.cu - entry point of the BF16 mma.sync prefill kernel for head dim 512,
// GQA group 8 (traits: mma_traits.h; loop: mma_mainloop.cuh; output: mma_epilogue.cuh).
//
// Launch: grid.x = token_tile_count(total_q, num_seqs, kTileTokens), grid.y = num_q_heads / 8,
// block = kThreads, dynamic shared memory kSmemBytes. Each block computes 64 rows (8 tokens
// x the 8 query heads of one KV head) over every key they can see.
#include <cstdint>
#include <cuda_bf16.h>

#include "kernels/mma/mma_block_geometry.cuh"
#include "kernels/mma/mma_epilogue.cuh"
#include "kernels/mma/mma_mainloop.cuh"
#include "kernels/mma/mma_tile_order.cuh"
#include "kernels/mma/mma_traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::MmaBf16D512Traits::kThreads, 1)
wideattn_mma_bf16_d512(const __grid_constant__ wideattn_prefill_params p) {
    using namespace wideattn;
    using namespace wideattn::mma;
    extern __shared__ __align__(16) unsigned char smem[];

    const BlockWork work = find_block_work(p, Tr::kTileTokens);
    if (!work.tile.found) return;
    const ThreadPlace at = thread_place<Tr>(work);
    BlockGeometry geometry;
    block_geometry<Tr>(p, work, at.row_tile, &geometry);

    uint32_t q[Tr::kQkSteps][4];
    load_q_fragments(p, q, at.first_token, work.tile.tile_len, at.row_tile, at.head, at.half, at.lane);

    float o[Tr::kDimNTiles][4];
    zero_output(o);
    RowState state{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};

    attention_mainloop(p, geometry, q, o, state, smem);
    write_output(p, o, state, at.first_token, work.tile.tile_len, at.row_tile, at.head, at.half, at.lane);
}
