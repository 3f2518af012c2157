// loads.cuh - the loads of the single-token BF16 decode kernel (decode_bf16_d512): the block's Q
// rows (bf16 as they are) and each warp's K/V chunks by cp.async into its private ring.
//
// Shared-memory layouts: a chunk is [16 keys][256 dims] bf16 (512-byte rows), a Q row [512] bf16;
// in both the 16-byte vector v of row r sits at position v ^ (r % 8) (decode_e4m3_d512's
// swizzled()), so the 8 rows an ldmatrix matrix reads fall in distinct banks.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "fp8/decode_e4m3_d512/loads.cuh"
#include "kernels/common/page_bounds.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/decode_bf16_d512/traits.h"
#include "wideattn.h"

namespace wideattn::decode_bf16 {

using decode_e4m3::kFullMask;
using decode_e4m3::swizzled;

// Reads the 8 Q rows of `token` (the heads of `kv_head`) into q_shared. Every thread of the block
// calls it; it ends with a block barrier after which Q is readable.
template <class Traits>
__device__ __forceinline__ void load_q(const wideattn_prefill_params& p, uint32_t q_shared, int64_t token,
                                       int32_t kv_head) {
    constexpr int32_t kVecs = Traits::kRows * Traits::kQVecsPerRow;
    constexpr int32_t kPerThread = kVecs / Traits::kThreads;
    constexpr int32_t kElemsPerVec = Traits::kVecBytes / Traits::kElemBytes;
    static_assert(kVecs % Traits::kThreads == 0, "every thread copies whole vectors");
    const int32_t thread = static_cast<int32_t>(threadIdx.x);
#pragma unroll
    for (int32_t i = 0; i < kPerThread; ++i) {
        const int32_t v = thread + i * Traits::kThreads;
        const int32_t row = v / Traits::kQVecsPerRow;
        const int32_t vec = v % Traits::kQVecsPerRow;
        const __nv_bfloat16* src = static_cast<const __nv_bfloat16*>(p.q) + token * p.q_token_stride +
                                   (int64_t{kv_head} * Traits::kGroup + row) * p.q_head_stride + vec * kElemsPerVec;
        const uint4 raw = __ldg(reinterpret_cast<const uint4*>(src));
        const uint32_t address = q_shared + swizzled<Traits::kQRowBytes, Traits>(row, vec);
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(raw.x), "r"(raw.y), "r"(raw.z),
                     "r"(raw.w)
                     : "memory");
    }
    __syncthreads();
}

// One warp's key stream: sub-tiles warp, warp + kWarps, ... of the block's keys [0, kv_end),
// each 16 keys of one page, copied as 4 chunks (K or V, dims 0-255 or 256-511) by cp.async (lane
// l copies the 16-byte vector l of every key row of a chunk). Keys past kv_end and pages whose
// block-table entry lies outside the cache are zero-filled without a read.
template <class Traits>
struct WarpStream {
    const unsigned char* k_base;  // k_cache at this KV head
    const unsigned char* v_base;
    const int32_t* table_row;
    int32_t kv_end;
    int32_t lane;

    __device__ __forceinline__ void init(const wideattn_prefill_params& p, int32_t kv_head, const int32_t* row,
                                         int32_t end, int32_t lane_index) {
        k_base = static_cast<const unsigned char*>(p.k_cache) + kv_head * p.k_head_stride * Traits::kElemBytes;
        v_base = static_cast<const unsigned char*>(p.v_cache) + kv_head * p.v_head_stride * Traits::kElemBytes;
        table_row = row;
        kv_end = end;
        lane = lane_index;
    }

    // init() for a K-from-V call: k_cache is absent (NULL) there and never read.
    __device__ __forceinline__ void init_v_only(const wideattn_prefill_params& p, int32_t kv_head, const int32_t* row,
                                                int32_t end, int32_t lane_index) {
        k_base = nullptr;
        v_base = static_cast<const unsigned char*>(p.v_cache) +
                 static_cast<int64_t>(kv_head) * p.v_head_stride * Traits::kElemBytes;
        table_row = row;
        kv_end = end;
        lane = lane_index;
    }

    // The block-table entry of sub-tile `sub` (the page its 16 keys lie in; a sub-tile never
    // straddles a page: block_size is a multiple of 16); the page's index by a shift where
    // `page_shift` >= 0 (page_shift_of), else by the division.
    __device__ __forceinline__ int32_t page_of(const wideattn_prefill_params& p, int32_t sub,
                                               int32_t page_shift = -1) const {
        const int32_t key0 = sub * Traits::kSubTileKeys;
        return __ldg(table_row + page_index_of(key0, p.block_size, page_shift));
    }

    // Issues the copies of part `part` (dims part x kChunkDims ..) of the K (value false) or V of
    // sub-tile `sub` into `chunk`.
    __device__ __forceinline__ void issue(const wideattn_prefill_params& p, int32_t sub, bool value, int32_t part,
                                          uint32_t chunk) const {
        issue_from_page(p, sub, value, part, chunk, page_of(p, sub));
    }

    // issue() with the sub-tile's block-table entry `page` read earlier (page_of), so the copies
    // do not wait for that load.
    __device__ __forceinline__ void issue_from_page(const wideattn_prefill_params& p, int32_t sub, bool value,
                                                    int32_t part, uint32_t chunk, int32_t page) const {
        const int32_t key0 = sub * Traits::kSubTileKeys;
        const int32_t page_index = key0 / p.block_size;
        const int32_t slot0 = key0 - page_index * p.block_size;
        const bool in_cache = page_in_cache(page, p.num_blocks);
        const int32_t keys = in_cache ? min(Traits::kSubTileKeys, kv_end - key0) : 0;
        const int64_t page_safe = in_cache ? page : 0;
        const unsigned char* base = value ? v_base : k_base;
        const int64_t slot_stride = (value ? p.v_slot_stride : p.k_slot_stride) * Traits::kElemBytes;
        const int64_t block_stride = (value ? p.v_block_stride : p.k_block_stride) * Traits::kElemBytes;
        const unsigned char* src = base + page_safe * block_stride + int64_t{slot0} * slot_stride +
                                   part * Traits::kChunkRowBytes + lane * Traits::kVecBytes;
        copy_keys(chunk, src, base, keys, slot_stride);
    }

    // The 16 key rows from `src` on (`slot_stride` bytes apart) into `chunk`, the first `keys` of
    // them read, the others zero-filled without a read (from `base`, an address of the cache).
    __device__ __forceinline__ void copy_keys(uint32_t chunk, const unsigned char* src, const unsigned char* base,
                                              int32_t keys, int64_t slot_stride) const {
#pragma unroll
        for (int32_t key = 0; key < Traits::kSubTileKeys; ++key) {
            const bool valid = key < keys;
            ptx::cp_async_16(chunk + swizzled<Traits::kChunkRowBytes, Traits>(key, lane), valid ? src : base,
                             valid ? Traits::kVecBytes : 0);
            src += slot_stride;
        }
    }

    // issue_from_page for V with fewer instructions: the slot of the sub-tile's first key by a mask
    // when the page holds a power of two of keys (`page_shift` >= 0, page_shift_of), else by the
    // division; a sub-tile whose 16 keys are all valid and in the cache copied without the
    // per-key zero-fill selects. The same copies.
    __device__ __forceinline__ void issue_value_lean(const wideattn_prefill_params& p, int32_t sub, int32_t part,
                                                     uint32_t chunk, int32_t page, int32_t page_shift) const {
        const int32_t key0 = sub * Traits::kSubTileKeys;
        const int32_t slot0 = page_slot_of(key0, p.block_size, page_shift);
        const bool in_cache = page_in_cache(page, p.num_blocks);
        const int32_t keys = in_cache ? min(Traits::kSubTileKeys, kv_end - key0) : 0;
        const int64_t page_safe = in_cache ? page : 0;
        const int64_t slot_stride = p.v_slot_stride * Traits::kElemBytes;
        const unsigned char* src = v_base + page_safe * (p.v_block_stride * Traits::kElemBytes) +
                                   int64_t{slot0} * slot_stride + part * Traits::kChunkRowBytes + lane * Traits::kVecBytes;
        if (keys == Traits::kSubTileKeys) {
#pragma unroll
            for (int32_t key = 0; key < Traits::kSubTileKeys; ++key) {
                ptx::cp_async_16_full(chunk + swizzled<Traits::kChunkRowBytes, Traits>(key, lane), src);
                src += slot_stride;
            }
        } else {
            copy_keys(chunk, src, v_base, keys, slot_stride);
        }
    }

};

}  // namespace wideattn::decode_bf16
