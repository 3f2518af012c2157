// loads.cuh - the loads of decode_bf16kfvw_d512: the block's 64-key V tiles by cp.async into the
// one ring (warp w copying the tile's 16-key sub-tile w / 2, one page's, lane l the 16-byte vector
// 32 (w % 2) + l of each key row, into the swizzled stage layout of layout.h; keys past kv_end and
// pages whose block-table entry lies outside the cache zero-filled without a read, and no
// block-table entry read for a sub-tile past kv_end), and the Q' tile, staged once per block as
// the score product's B operand: Q' = q w as two bf16 terms where a dim does not rotate, bf16 q
// where it does.
#pragma once

#include <cstdint>

#include "kernels/common/k_from_v.h"
#include "kernels/common/page_bounds.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_wgmma.cuh"
#include "kernels/decode_bf16_d512/loads.cuh"
#include "kernels/decode_bf16kfvw_d512/layout.h"
#include "kernels/decode_bf16kfvw_d512/traits.h"
#include "wideattn.h"

namespace wideattn::kfvw_bf16 {

// The block's key stream: tiles 0, 1, ... of its keys [0, kv_end), in the ring; this warp's share
// of each tile (sub-tile `sub`, vector `vec` of each key row).
struct TileStream {
    const unsigned char* v_base;  // v_cache at this KV head
    const int32_t* table_row;
    uint32_t ring;
    int32_t kv_end;
    int32_t count;  // the block's tiles
    int32_t page_shift;
    int32_t sub;  // warp / kCopyWarpsPerSubTile
    int32_t vec;  // kCopyVecsPerWarp (warp % kCopyWarpsPerSubTile) + lane

    __device__ __forceinline__ uint32_t stage(int32_t i) const {
        return ring + static_cast<uint32_t>((i % Traits::kStages) * Traits::kStageBytes);
    }

    // Issues this thread's 16 vectors of tile i when the tile exists and commits a group either way
    // (one group per tile keeps the waits' counts fixed).
    __device__ __forceinline__ void issue(const wideattn_prefill_params& p, int32_t i) const {
        if (i < count) {
            const int32_t key0 = i * Traits::kTileKeysW + sub * Traits::kSubTileKeys;
            const int32_t page =
                key0 < kv_end ? __ldg(table_row + page_index_of(key0, p.block_size, page_shift)) : kNoPage;
            copy_keys(p, key0, page, stage(i));
        }
        ptx::cp_async_commit();
    }

    // Copies vector `vec` of keys key0 .. key0 + 15 (one page, whose block-table entry is `page`)
    // into rows 16 sub .. 16 sub + 15 of the stage; keys past kv_end, and all of them for a page
    // outside the cache, land as zeros without a read.
    __device__ __forceinline__ void copy_keys(const wideattn_prefill_params& p, int32_t key0, int32_t page,
                                              uint32_t stage_address) const {
        const bool in_cache = page_in_cache(page, p.num_blocks);
        const int32_t keys = in_cache ? min(Traits::kSubTileKeys, kv_end - key0) : 0;
        const int64_t page_safe = in_cache ? page : 0;
        const int32_t slot0 = in_cache ? page_slot_of(key0, p.block_size, page_shift) : 0;
        const int64_t slot_stride = p.v_slot_stride * Traits::kElemBytes;
        const unsigned char* src = v_base + page_safe * (p.v_block_stride * Traits::kElemBytes) +
                                   int64_t{slot0} * slot_stride + vec * Traits::kVecBytes;
        const int32_t row0 = sub * Traits::kSubTileKeys;
        if (keys == Traits::kSubTileKeys) {
#pragma unroll
            for (int32_t key = 0; key < Traits::kSubTileKeys; ++key) {
                ptx::cp_async_16_full(stage_address + stage_offset(row0 + key, vec), src);
                src += slot_stride;
            }
        } else {
#pragma unroll
            for (int32_t key = 0; key < Traits::kSubTileKeys; ++key) {
                const bool valid = key < keys;
                ptx::cp_async_16(stage_address + stage_offset(row0 + key, vec), valid ? src : v_base,
                                 valid ? Traits::kVecBytes : 0);
                src += slot_stride;
            }
        }
    }
};

// The bf16 bits of a bf16-valued float (round_to_bf16's results and NaNs keep their high half).
__device__ __forceinline__ uint32_t bf16_bits(float value) { return __float_as_uint(value) >> 16; }

// Stages the Q' tile at `fold` (fold_offset) from the bf16 Q tile at q_shared (load_q's layout)
// and the fp32 weights at `weight` (both visible after a block barrier): where the 16-dim score
// block of a dim does not rotate (layout.h, block_rotates), rows h and 8 + h are the two bf16 terms
// of q[h][d] w[d] (split_bf16_terms; the product in fp32); where it rotates, row h is q[h][d] and
// row 8 + h zero. Thread i stages vectors 2 (i % 32), 2 (i % 32) + 1 of head i / 32. Ends with the
// async-proxy fence and a block barrier, after which wgmma and ldmatrix may read Q'.
__device__ __forceinline__ void stage_folded_q(uint32_t q_shared, uint32_t fold, uint32_t weight,
                                               int32_t rotated_q_loads) {
    constexpr int32_t kVecsPerThread = Traits::kRows * Traits::kVecsPerRow / Traits::kThreads;  // 2
    constexpr int32_t kDimsPerVec = Traits::kVecBytes / Traits::kElemBytes;                      // 8
    constexpr int32_t kWordsPerVec = kDimsPerVec / 2;
    static_assert(Traits::kThreads / Traits::kRows * kVecsPerThread == Traits::kVecsPerRow,
                  "the threads of a head stage its row");
    const int32_t thread = static_cast<int32_t>(threadIdx.x);
    const int32_t head = thread / (Traits::kThreads / Traits::kRows);
#pragma unroll
    for (int32_t j = 0; j < kVecsPerThread; ++j) {
        const int32_t vec = kVecsPerThread * (thread % (Traits::kThreads / Traits::kRows)) + j;
        const int32_t dim0 = vec * kDimsPerVec;
        uint32_t q[kWordsPerVec];
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(q[0]), "=r"(q[1]), "=r"(q[2]), "=r"(q[3])
                     : "r"(q_shared + decode_bf16::swizzled<Traits::kQRowBytes, Traits>(head, vec))
                     : "memory");
        uint32_t hi[kWordsPerVec], lo[kWordsPerVec];
        if (block_rotates(dim0 / Traits::kScoreStepDims, rotated_q_loads)) {
#pragma unroll
            for (int32_t k = 0; k < kWordsPerVec; ++k) {
                hi[k] = q[k];
                lo[k] = 0u;
            }
        } else {
            const float4 w0 = ptx::load_shared_f32x4(weight + kKFromVTableEntryBytes * dim0);
            const float4 w1 = ptx::load_shared_f32x4(weight + kKFromVTableEntryBytes * (dim0 + 4));
            const float w[kDimsPerVec] = {w0.x, w0.y, w0.z, w0.w, w1.x, w1.y, w1.z, w1.w};
#pragma unroll
            for (int32_t k = 0; k < kWordsPerVec; ++k) {
                const Bf16Terms low = split_bf16_terms(ptx::bf16_low(q[k]) * w[2 * k]);
                const Bf16Terms high = split_bf16_terms(ptx::bf16_high(q[k]) * w[2 * k + 1]);
                hi[k] = bf16_bits(low.hi) | (bf16_bits(high.hi) << 16);
                lo[k] = bf16_bits(low.lo) | (bf16_bits(high.lo) << 16);
            }
        }
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(fold + fold_offset(head, vec)), "r"(hi[0]),
                     "r"(hi[1]), "r"(hi[2]), "r"(hi[3])
                     : "memory");
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(fold + fold_offset(Traits::kGroup + head, vec)),
                     "r"(lo[0]), "r"(lo[1]), "r"(lo[2]), "r"(lo[3])
                     : "memory");
    }
    ptx::fence_proxy_async_shared();
    __syncthreads();
}

}  // namespace wideattn::kfvw_bf16
