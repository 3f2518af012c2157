// kernel.cu - entry point of the BF16 mma.sync prefill kernel for head dim 512, GQA group 8
// (traits: traits.h; loads: loads.cuh; loop: mainloop.cuh; output: kernels/common/epilogue.cuh).
//
// Launch: grid.x = token_tile_count(total_q, num_seqs, kTileTokens), grid.y = num_q_heads / 8,
// block = kThreads, dynamic shared memory kSmemBytes. Each block computes 64 rows (8 tokens
// x the 8 query heads of one KV head) over every key they can see.
#include <cstdint>

#include "kernels/common/block_geometry.cuh"
#include "kernels/common/epilogue.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/tile_order.cuh"
#include "kernels/mma/bf16_d512/loads.cuh"
#include "kernels/mma/bf16_d512/mainloop.cuh"
#include "kernels/mma/bf16_d512/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::MmaBf16D512Traits::kThreads, 1)
wideattn_mma_bf16_d512(const __grid_constant__ wideattn_prefill_params p) {
    using namespace wideattn;
    using namespace wideattn::mma_bf16;
    using Traits = MmaBf16D512Traits;
    extern __shared__ __align__(16) unsigned char smem[];

    const BlockWork work = find_block_work(p, Traits::kTileTokens);
    if (!work.tile.found) return;
    const ThreadPlace at = thread_place<Traits>(work);
    BlockGeometry geometry;
    block_geometry<Traits>(p, work, at.row_tile, &geometry);

    uint32_t q[Traits::kQkSteps][4];
    load_q_fragments<Traits>(p, q, at.first_token, work.tile.tile_len, at.row_tile, at.head, at.half, at.lane);

    float o[Traits::kDimNTiles][4];
    zero_output(o);
    RowState state{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};

    attention_mainloop<Traits>(p, geometry, q, o, state, smem);
    write_output<Traits>(p, o, state, at.first_token, work.tile.tile_len, at.row_tile, at.head, at.half, at.lane);
}
