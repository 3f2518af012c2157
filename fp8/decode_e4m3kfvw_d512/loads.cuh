// loads.cuh - the loads of decode_e4m3kfvw_d512: each warpgroup's 64-key V tiles by cp.async into
// its ring (warp w of the group copying the tile's 16 keys 16w .., one page's, lane l the 16-byte
// vector l of each key row, into the swizzled stage layout of layout.h; keys past kv_end and pages
// whose block-table entry lies outside the cache zero-filled without a read, and no block-table
// entry read for a sub-tile past kv_end), and Q' = q w v_scale 2^a as two e4m3 terms, staged once
// per block as the score product's B operand.
#pragma once

#include <cfloat>
#include <cstdint>

#include "fp8/decode_e4m3_d512/loads.cuh"
#include "fp8/decode_e4m3kfvw_d512/layout.h"
#include "fp8/decode_e4m3kfvw_d512/traits.h"
#include "fp8/mma_e4m3_d512/fragments.cuh"
#include "kernels/common/k_from_v.h"
#include "kernels/common/page_bounds.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_wgmma.cuh"
#include "wideattn.h"

namespace wideattn::kfvw {

using decode_e4m3::kFullMask;

// One warpgroup's key stream: its tiles group, group + kWarpGroups, ... of the block's keys [0,
// kv_end), in its ring.
struct GroupStream {
    const unsigned char* v_base;  // v_cache at this KV head
    const int32_t* table_row;
    uint32_t ring;
    int32_t kv_end;
    int32_t group;
    int32_t warp;  // in the group
    int32_t lane;
    int32_t count;  // the group's tiles
    int32_t page_shift;

    // The first key of the group's tile i.
    __device__ __forceinline__ int32_t tile_key0(int32_t i) const {
        return (group + i * Traits::kWarpGroups) * Traits::kGroupTileKeys;
    }

    __device__ __forceinline__ uint32_t stage(int32_t i) const {
        return ring + static_cast<uint32_t>((i % Traits::kStages) * Traits::kStageBytes);
    }

    // Issues the warp's 16 keys of tile i when the tile exists and commits a group either way (one
    // group per tile keeps the waits' counts fixed).
    __device__ __forceinline__ void issue(const wideattn_prefill_params& p, int32_t i) const {
        if (i < count) {
            const int32_t key0 = tile_key0(i) + warp * Traits::kSubTileKeys;
            const int32_t page =
                key0 < kv_end ? __ldg(table_row + page_index_of(key0, p.block_size, page_shift)) : kNoPage;
            copy_keys(p, key0, page, stage(i), warp * Traits::kSubTileKeys);
        }
        ptx::cp_async_commit();
    }

    // Copies keys key0 .. key0 + 15 (one page, whose block-table entry is `page`) into rows
    // row0 .. row0 + 15 of `stage`; keys past kv_end, and all of them for a page outside the cache,
    // land as zeros without a read.
    __device__ __forceinline__ void copy_keys(const wideattn_prefill_params& p, int32_t key0, int32_t page,
                                              uint32_t stage_address, int32_t row0) const {
        const bool in_cache = page_in_cache(page, p.num_blocks);
        const int32_t keys = in_cache ? min(Traits::kSubTileKeys, kv_end - key0) : 0;
        const int64_t page_safe = in_cache ? page : 0;
        const int32_t slot0 = in_cache ? page_slot_of(key0, p.block_size, page_shift) : 0;
        const unsigned char* src =
            v_base + page_safe * p.v_block_stride + int64_t{slot0} * p.v_slot_stride + lane * Traits::kVecBytes;
#pragma unroll
        for (int32_t key = 0; key < Traits::kSubTileKeys; ++key) {
            const bool valid = key < keys;
            ptx::cp_async_16(stage_address + stage_offset(row0 + key, lane), valid ? src : v_base,
                             valid ? Traits::kVecBytes : 0);
            src += p.v_slot_stride;
        }
    }
};

// The two e4m3 terms of four values x (|x| <= 256 or not finite): hi = e4m3(x) (RNE), lo =
// e4m3((x - hi) 2^kLowTermLog2), so x = hi + lo 2^-kLowTermLog2 to about 2^-12 of the largest; a
// non-finite x gives NaN codes in both (the saturating conversion would make inf finite).
__device__ __forceinline__ void split_e4m3x4(float (&x)[4], uint32_t& hi, uint32_t& lo) {
#pragma unroll
    for (int32_t i = 0; i < 4; ++i)
        if (!isfinite(x[i])) x[i] = __int_as_float(0x7fffffff);
    hi = mma_e4m3::pack_e4m3x4(x[0], x[1], x[2], x[3]);
    float residual[4];
    mma_e4m3::e4m3x4_residuals(hi, x, residual);
    lo = mma_e4m3::pack_e4m3x4(residual[0] * Traits::kLowTermScale, residual[1] * Traits::kLowTermScale,
                               residual[2] * Traits::kLowTermScale, residual[3] * Traits::kLowTermScale);
}

// Whether dim `dim` lies in a pair block that rotates (the blocks below rotated_blocks, and their
// partners 256 on: fp8/decode_e4m3kfv_d512/block.cuh, rotated_pair_blocks).
__device__ __forceinline__ bool dim_rotates(int32_t dim, int32_t rotated_blocks) {
    return (dim % Traits::kHalfDim) / Traits::kDimBlock < rotated_blocks;
}

// Stages Q' at `fold` (fold_offset: rows 0-7 the high terms of heads 0-7, rows 8-15 the low
// terms): Q'[h][d] = q[h][d] w[d] v_scale 2^a for the dims that do not rotate (0 where they do:
// those k-steps are not issued), from the bf16 Q tile at q_shared (load_q_bf16's layout) and the
// fp32 weights at `weight` (both visible after a block barrier). a puts the block's largest finite
// |q w v_scale| of those dims into [2^kFoldTopLog2, 2^(kFoldTopLog2 + 1)) (a <= kFoldShiftMax; 0
// when there is none). Returns 2^-a, the factor the scores take back. Thread i folds the 16 dims
// 16 (i % 32) .. of head i / 32. Ends with the async-proxy fence and a block barrier, after which
// wgmma may read Q'.
__device__ __forceinline__ float stage_folded_q(uint32_t q_shared, uint32_t fold, uint32_t weight,
                                                uint32_t amax_slots, float v_scale, int32_t rotated_blocks) {
    constexpr int32_t kDims = Traits::kVecBytes;  // one e4m3 vector of Q' a thread
    constexpr int32_t kBf16PerVec = Traits::kVecBytes / 2;
    const int32_t thread = static_cast<int32_t>(threadIdx.x);
    const int32_t row = thread / Traits::kWarpSize, vec = thread % Traits::kWarpSize;
    const int32_t dim0 = vec * kDims;
    float x[kDims];
#pragma unroll
    for (int32_t half = 0; half < 2; ++half) {
        uint32_t q[4];
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(q[0]), "=r"(q[1]), "=r"(q[2]), "=r"(q[3])
                     : "r"(q_shared + decode_e4m3::swizzled<Traits::kQRowBytes, Traits>(row, 2 * vec + half))
                     : "memory");
#pragma unroll
        for (int32_t j = 0; j < 4; ++j) {
            x[half * kBf16PerVec + 2 * j] = ptx::bf16_low(q[j]);
            x[half * kBf16PerVec + 2 * j + 1] = ptx::bf16_high(q[j]);
        }
    }
    const bool rotates = dim_rotates(dim0, rotated_blocks);  // 16 dims lie in one 32-dim block
    float amax = 0.0f;
#pragma unroll
    for (int32_t j = 0; j < kDims / 4; ++j) {
        const float4 w = ptx::load_shared_f32x4(weight + kKFromVTableEntryBytes * (dim0 + 4 * j));
        const float wj[4] = {w.x, w.y, w.z, w.w};
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            float& value = x[4 * j + e];
            value = rotates ? 0.0f : value * wj[e] * v_scale;
            if (fabsf(value) <= FLT_MAX) amax = fmaxf(amax, fabsf(value));
        }
    }
#pragma unroll
    for (int32_t offset = Traits::kWarpSize / 2; offset > 0; offset /= 2)
        amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, offset));
    if (thread % Traits::kWarpSize == 0)
        asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(amax_slots + 4 * (thread / Traits::kWarpSize)), "f"(amax)
                     : "memory");
    __syncthreads();
    const float block_amax = decode_e4m3::max_of_warp_slots<Traits>(amax_slots);
    int32_t shift = 0;
    if (block_amax > 0.0f) {
        const int32_t exponent = static_cast<int32_t>((__float_as_uint(block_amax) >> Traits::kFloatMantissaBits) &
                                                      Traits::kFloatExponentMask) -
                                 Traits::kFloatBias;
        shift = min(Traits::kFoldTopLog2 - exponent, Traits::kFoldShiftMax);
    }
    const float up = Traits::power_of_two(shift);
    uint32_t hi[4], lo[4];
#pragma unroll
    for (int32_t j = 0; j < 4; ++j) {
        float quad[4] = {x[4 * j] * up, x[4 * j + 1] * up, x[4 * j + 2] * up, x[4 * j + 3] * up};
        split_e4m3x4(quad, hi[j], lo[j]);
    }
    const uint32_t high_address = fold + fold_offset(row, vec);
    const uint32_t low_address = fold + fold_offset(Traits::kGroup + row, vec);
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(high_address), "r"(hi[0]), "r"(hi[1]), "r"(hi[2]),
                 "r"(hi[3])
                 : "memory");
    asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(low_address), "r"(lo[0]), "r"(lo[1]), "r"(lo[2]),
                 "r"(lo[3])
                 : "memory");
    ptx::fence_proxy_async_shared();
    __syncthreads();
    return Traits::power_of_two(-shift);
}

}  // namespace wideattn::kfvw
