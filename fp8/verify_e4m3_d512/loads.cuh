// loads.cuh - the K/V stream of the few-token e4m3 decode kernel (verify_e4m3_d512): the codes of
// each 64-key tile copied by cp.async into the block's shared ring, every thread a part (warp w:
// keys 8 w .. 8 w + 7 of the tile, lane l: 16-byte vector l of each key row). The layout of a
// chunk is decode_e4m3_d512's half-stage repeated per 16-key sub-tile ([64 keys][512 codes], vector
// v of key row r at v ^ (r % 8)), so that kernel's fragment addressing reads it. Keys past kv_end
// and pages whose block-table entry lies outside the cache are zero-filled without a read. Q is
// loaded by decode_e4m3_d512's load_q / load_q_codes (fp8/decode_e4m3_d512/loads.cuh).
#pragma once

#include <cstdint>

#include "fp8/decode_e4m3_d512/loads.cuh"
#include "fp8/verify_e4m3_d512/traits.h"
#include "kernels/common/page_bounds.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "wideattn.h"

namespace wideattn::verify_e4m3 {

// The block's stream: decode_e4m3_d512's row copies, the thread's keys of each tile.
template <class Traits>
struct BlockStream {
    const int32_t* table_row;
    int32_t kv_end;
    int32_t kv_head;
    int32_t lane;
    int32_t first_key;  // the thread's first key within a tile

    __device__ __forceinline__ void init(int32_t head, const int32_t* row, int32_t end, int32_t warp,
                                         int32_t lane_index) {
        table_row = row;
        kv_end = end;
        kv_head = head;
        lane = lane_index;
        first_key = warp * Traits::kKeysPerCopyWarp;
    }

    // Issues the thread's copies of the K (kValue false) or V codes of tile `tile` into `chunk`
    // (a thread whose keys lie past kv_end reads no block-table entry). The K and V cache
    // pointers are formed here, not held: four registers fewer across the key loop, where
    // ptxas has none to spare at 255.
    template <bool kValue>
    __device__ __forceinline__ void issue(const wideattn_prefill_params& p, int32_t tile, uint32_t chunk) const {
        const int32_t key0 = tile * Traits::kTileKeys + first_key;
        const int32_t page = key0 < kv_end ? __ldg(table_row + key0 / p.block_size) : -1;
        decode_e4m3::WarpStream<Traits> copies;
        copies.init(p, kv_head, table_row, kv_end, lane);
        copies.template copy_rows<kValue, Traits::kKeysPerCopyWarp>(p, key0, page, chunk, first_key);
    }
};

// Issues chunk c of the block (K of tile c / 2 for even c, V for odd) when that tile exists, and
// commits a group either way (one group per chunk keeps the waits' counts fixed).
template <class Traits>
__device__ __forceinline__ void issue_chunk(const wideattn_prefill_params& p, const BlockStream<Traits>& stream,
                                            uint32_t ring, int32_t num_tiles, int32_t c) {
    const int32_t tile = c / 2;
    if (tile < num_tiles) {
        const uint32_t chunk = ring + (c % Traits::kRingChunks) * Traits::kChunkBytes;
        if (c % 2 == 0)
            stream.template issue<false>(p, tile, chunk);
        else
            stream.template issue<true>(p, tile, chunk);
    }
    ptx::cp_async_commit();
}

// Waits for the oldest chunk in flight (kChunksInFlight - 1 younger ones may stay), then a block
// barrier: every thread's part has landed and every warp is past the step before.
template <class Traits>
__device__ __forceinline__ void wait_oldest_chunk() {
    ptx::cp_async_wait<Traits::kChunksInFlight - 1>();
    __syncthreads();
}

}  // namespace wideattn::verify_e4m3
