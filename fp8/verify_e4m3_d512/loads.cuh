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

using decode_e4m3::swizzled;

template <class Traits>
struct BlockStream {
    const unsigned char* k_base;  // k_cache at this KV head
    const unsigned char* v_base;
    const int32_t* table_row;
    int32_t kv_end;
    int32_t first_key;  // the thread's first key within a tile
    int32_t lane;

    __device__ __forceinline__ void init(const wideattn_prefill_params& p, int32_t kv_head, const int32_t* row,
                                         int32_t end, int32_t warp, int32_t lane_index) {
        k_base = static_cast<const unsigned char*>(p.k_cache) + kv_head * p.k_head_stride;
        v_base = static_cast<const unsigned char*>(p.v_cache) + kv_head * p.v_head_stride;
        table_row = row;
        kv_end = end;
        first_key = warp * Traits::kKeysPerCopyWarp;
        lane = lane_index;
    }

    // Issues the thread's copies of the K (kValue false) or V codes of tile `tile` into `chunk`.
    template <bool kValue>
    __device__ __forceinline__ void issue(const wideattn_prefill_params& p, int32_t tile, uint32_t chunk) const {
        const int32_t key0 = tile * Traits::kTileKeys + first_key;
        const int32_t page_index = key0 / p.block_size;
        const int32_t slot0 = key0 - page_index * p.block_size;
        const int32_t page = key0 < kv_end ? __ldg(table_row + page_index) : -1;
        const bool in_cache = page_in_cache(page, p.num_blocks);
        const int32_t keys = in_cache ? min(Traits::kKeysPerCopyWarp, kv_end - key0) : 0;
        const int64_t page_safe = in_cache ? page : 0;
        const unsigned char* base = kValue ? v_base : k_base;
        const int64_t slot_stride = kValue ? p.v_slot_stride : p.k_slot_stride;
        const unsigned char* src = base + page_safe * (kValue ? p.v_block_stride : p.k_block_stride) +
                                   int64_t{slot0} * slot_stride + lane * Traits::kVecBytes;
#pragma unroll
        for (int32_t key = 0; key < Traits::kKeysPerCopyWarp; ++key) {
            const bool valid = key < keys;
            ptx::cp_async_16(chunk + swizzled<Traits::kRowBytes, Traits>(first_key + key, lane), valid ? src : base,
                             valid ? Traits::kVecBytes : 0);
            src += slot_stride;
        }
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
