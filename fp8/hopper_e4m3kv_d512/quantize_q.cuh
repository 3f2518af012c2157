// quantize_q.cuh - the Q of a block of wgmma_e4m3kv_d512: its 64 rows (8 tokens x 8 heads) read
// as bf16 and quantised to e4m3 codes with one scale per block, written into the 128-byte-swizzled
// Q layout that the e4m3-Q kernel's cp.async produces (kernels/common/wgmma_loads.cuh
// issue_q_rows), so the key loop after it is that kernel's.
//
// scale = amax / 448 over the block's Q (rows of tokens past the tile are zero and count as 0; an
// all-zero block gets scale 1), codes = e4m3(q / scale) rounded to nearest even with saturation
// (cvt.rn.satfinite). Every thread converts the 16-dim vectors that the cp.async path would have
// copied for it (its warpgroup's half of the dims); the block-wide maximum goes through one word
// per warp in shared memory and one barrier of both warpgroups.
#pragma once

#include <cstdint>
#include <cuda_fp8.h>

#include "fp8/codec/e4m3.h"
#include "fp8/hopper_e4m3q_d512/mainloop.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/wgmma_block.cuh"
#include "kernels/common/wgmma_layout.h"
#include "wideattn.h"

namespace wideattn::hopper::e4m3kv {

constexpr float kZeroAmaxScale = 1.0f;    // scale of an all-zero block (its codes are all zero)
constexpr uint32_t kFullWarpMask = 0xffffffffu;
constexpr int32_t kWordsPerVec = 4;       // 32-bit words in a 16-byte vector
constexpr int32_t kCodesPerWord = 4;     // e4m3 codes in a 32-bit word

using ptx::bf16_high;
using ptx::bf16_low;

__device__ __forceinline__ float max_abs_bf16x8(const uint4& w) {
    const uint32_t words[kWordsPerVec] = {w.x, w.y, w.z, w.w};
    float m = 0.0f;
#pragma unroll
    for (int32_t i = 0; i < kWordsPerVec; ++i) m = fmaxf(m, fmaxf(fabsf(bf16_low(words[i])), fabsf(bf16_high(words[i]))));
    return m;
}

// Two bf16 (one word) divided by the scale -> two e4m3 codes, the first element in the low byte.
__device__ __forceinline__ uint32_t quantize_bf16x2(uint32_t word, float scale) {
    return __nv_cvt_float2_to_fp8x2(make_float2(bf16_low(word) / scale, bf16_high(word) / scale), __NV_SATFINITE,
                                    __NV_E4M3);
}

// Eight bf16 -> eight codes (two words).
__device__ __forceinline__ void quantize_bf16x8(const uint4& w, float scale, uint32_t* codes) {
    codes[0] = quantize_bf16x2(w.x, scale) | (quantize_bf16x2(w.y, scale) << 16);
    codes[1] = quantize_bf16x2(w.z, scale) | (quantize_bf16x2(w.w, scale) << 16);
}

// The block-wide maximum of every thread's `amax` (all kThreads threads call it).
template <class Traits>
__device__ __forceinline__ float block_max(float amax, uint32_t slots) {
#pragma unroll
    for (int32_t offset = Traits::kWarpSize / 2; offset > 0; offset /= 2)
        amax = fmaxf(amax, __shfl_xor_sync(kFullWarpMask, amax, offset));
    const int32_t warp = static_cast<int32_t>(threadIdx.x) / Traits::kWarpSize;
    if (threadIdx.x % Traits::kWarpSize == 0)
        asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(slots + warp * Traits::kAmaxSlotBytes), "f"(amax) : "memory");
    ptx::named_barrier_sync(kBlockLoadsBarrier, Traits::kThreads);
    float block = 0.0f;
#pragma unroll
    for (int32_t v = 0; v < Traits::kWarps * Traits::kAmaxSlotBytes / Traits::kVecBytes; ++v) {
        float m[kWordsPerVec];
        asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                     : "=f"(m[0]), "=f"(m[1]), "=f"(m[2]), "=f"(m[3])
                     : "r"(slots + v * Traits::kVecBytes)
                     : "memory");
#pragma unroll
        for (int32_t i = 0; i < kWordsPerVec; ++i) block = fmaxf(block, m[i]);
    }
    return block;
}

// Reads the thread's bf16 Q vectors (zero for tokens past the tile), quantises them with the
// block's scale into q_shared and returns that scale.
template <class Traits>
__device__ __forceinline__ float quantize_q_block(const wideattn_prefill_params& p, uint32_t q_shared, uint32_t slots,
                                                  int64_t first_token, int32_t tile_len, int32_t kv_head,
                                                  int32_t group, int32_t thread) {
    constexpr int32_t kVecsPerGroupRow = Traits::kCodeVecsPerGroupRow;  // 16-dim code vectors
    constexpr int32_t kRowsPerPass = Traits::kWarpGroupThreads / kVecsPerGroupRow;
    constexpr int32_t kPasses = Traits::kRowsPerBlock / kRowsPerPass;
    constexpr int32_t kHalves = Traits::kQSourceVecsPerCodeVec;
    constexpr int32_t kDimsPerCodeVec = Traits::kVecBytes / Traits::kCodeBytes;
    static_assert(Traits::kWarpGroupThreads % kVecsPerGroupRow == 0, "whole rows per pass");
    static_assert(kHalves * kWordsPerVec * 2 / kCodesPerWord == kWordsPerVec, "8 bf16 -> 2 code words per half");
    const int32_t vec = group * kVecsPerGroupRow + thread % kVecsPerGroupRow;
    const int32_t first_row = thread / kVecsPerGroupRow;
    const uint4* q_base = reinterpret_cast<const uint4*>(static_cast<const char*>(p.q) +
                                                         vec * kDimsPerCodeVec * Traits::kQElemBytes);
    uint4 raw[kPasses][kHalves];
    float amax = 0.0f;
#pragma unroll
    for (int32_t i = 0; i < kPasses; ++i) {
        const int32_t row = first_row + i * kRowsPerPass;
        const int32_t token = row / Traits::kGroup;
        const int32_t head = kv_head * Traits::kGroup + row % Traits::kGroup;
        const int64_t element = (first_token + min(token, tile_len - 1)) * p.q_token_stride + head * p.q_head_stride;
        const uint4* src = reinterpret_cast<const uint4*>(reinterpret_cast<const char*>(q_base) +
                                                          element * Traits::kQElemBytes);
#pragma unroll
        for (int32_t h = 0; h < kHalves; ++h) {
            raw[i][h] = token < tile_len ? __ldg(src + h) : make_uint4(0u, 0u, 0u, 0u);
            amax = fmaxf(amax, max_abs_bf16x8(raw[i][h]));
        }
    }
    amax = block_max<Traits>(amax, slots);
    const float scale = amax > 0.0f ? amax / fp8::kE4m3Max : kZeroAmaxScale;
#pragma unroll
    for (int32_t i = 0; i < kPasses; ++i) {
        uint32_t codes[kWordsPerVec];
#pragma unroll
        for (int32_t h = 0; h < kHalves; ++h) quantize_bf16x8(raw[i][h], scale, codes + 2 * h);
        const uint32_t address = q_shared + operand_offset<Traits, Traits::kRowsPerBlock>(first_row + i * kRowsPerPass, vec);
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(codes[0]), "r"(codes[1]),
                     "r"(codes[2]), "r"(codes[3])
                     : "memory");
    }
    return scale;
}

// The Q source of block.cuh for this kernel.
struct QuantizedQ {
    static constexpr bool kCopiesCodes = false;

    template <class Traits>
    __device__ __forceinline__ static float scale(const wideattn_prefill_params& p, uint32_t base,
                                                  const e4m3q::CodeSharedMap<Traits>& map, int64_t first_token,
                                                  int32_t tile_len, int32_t kv_head, const GroupPlace& at) {
        return quantize_q_block<Traits>(p, map.q, base + Traits::SmemPlan::kQAmax, first_token, tile_len, kv_head,
                                        at.group, at.thread);
    }
};

}  // namespace wideattn::hopper::e4m3kv
