// wgmma_tile_order.cuh - block order of the Hopper-tier prefill kernels: KV head slowest,
// token tiles heaviest first inside each head.
//
// Same grid as the mma tier (grid.x = token_tile_count upper bound, grid.y = KV heads), so the
// hardware dispatches blockIdx.x fastest. Here blockIdx.y is the KV head and blockIdx.x the
// token tile rank, taken in reverse (last tile of the last sequence first, the most keys under
// bottom-right causal masking), so
//   - the blocks running at one time work on one KV head and stream the same K/V prefix, whose
//     lines they share in L2 (the mma tier's order runs every KV head at once: at Hkv 4 and 16k
//     keys that is 4 x 32 MB of K/V against a 60 MB L2), and
//   - inside each head the long blocks start first and the short ones fill the tail.
// Measured on the H200 against the mma tier's order (BENCHMARKS.md, session 6): +1.1-1.7% for
// wgmma_bf16_d512 and +0.5-3.0% for wgmma_e4m3q_d512 where Hkv = 4, unchanged at Hkv = 1.
// Every (tile, head) is covered once; ranks past the real tile count exit.
#pragma once

#include <cstdint>

#include "kernels/mma/mma_tile_order.cuh"

namespace wideattn::hopper {

__device__ inline mma::BlockWork find_block_work_by_head(const wideattn_prefill_params& p, int32_t tile_tokens) {
    mma::BlockWork work;
    work.kv_head = static_cast<int32_t>(blockIdx.y);
    const int32_t total = mma::count_token_tiles(p, tile_tokens);
    const int32_t rank = static_cast<int32_t>(blockIdx.x);
    if (rank >= total) {
        work.tile = TokenTile{false, 0, 0, 0, 0, 0};
        return work;
    }
    work.tile = find_token_tile(p, tile_tokens, total - 1 - rank);
    return work;
}

}  // namespace wideattn::hopper
