// causal_keys.cuh - the keys a token tile may see under bottom-right causal masking:
// token t of the tile (0-based) sees keys [0, context_end + t + 1), where context_end =
// seq_lens_k - q_len + tile_begin. seq_lens_k is read clamped to [0, addressable], the keys
// the block table can address (docs/design.md, "Metadata the kernels distrust"), so a bad value
// cannot make a kernel read beyond the table and every count stays in int32.
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

// block_table_stride * block_size, in 64 bits without overflow (seq_lens_k is int32 anyway).
__device__ __forceinline__ int64_t addressable_keys(const wideattn_prefill_params& p) {
    return min(p.block_table_stride, static_cast<int64_t>(INT32_MAX)) * p.block_size;
}

__device__ inline CausalKeys causal_keys(const wideattn_prefill_params& p, const TokenTile& tile) {
    const int64_t addressable = addressable_keys(p);
    const int64_t num_keys = min(max(static_cast<int64_t>(__ldg(p.seq_lens_k + tile.seq)), int64_t{0}), addressable);
    return CausalKeys{num_keys - tile.q_len + tile.tile_begin, addressable};
}

}  // namespace wideattn
