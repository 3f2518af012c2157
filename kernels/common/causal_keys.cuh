// causal_keys.cuh - the keys a token tile may see under bottom-right causal masking:
// token t of the tile (0-based) sees keys [0, context_end + t + 1), where context_end =
// seq_lens_k - q_len + tile_begin, never past what the block table can address (so a bad
// seq_lens_k cannot make a kernel read beyond the table).
#pragma once

#include <cstdint>

#include "kernels/common/token_tiles.cuh"
#include "wideattn.h"

namespace wideattn {

struct CausalKeys {
    int64_t context_end;  // keys before the tile's first token, plus that token's own position
    int64_t addressable;  // block_table_stride * block_size

    // Keys visible to the first `tokens_in` tokens of the tile together (the last one's
    // range), clamped to [0, addressable].
    __device__ int32_t visible(int64_t tokens_in) const {
        const int64_t end = context_end + tokens_in < addressable ? context_end + tokens_in : addressable;
        return static_cast<int32_t>(end > 0 ? end : 0);
    }
};

__device__ inline CausalKeys causal_keys(const wideattn_prefill_params& p, const TokenTile& tile) {
    const int32_t num_keys = __ldg(p.seq_lens_k + tile.seq);
    return CausalKeys{static_cast<int64_t>(num_keys) - tile.q_len + tile.tile_begin,
                      p.block_table_stride * p.block_size};
}

}  // namespace wideattn
