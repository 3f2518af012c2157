// traits.h - the compile-time constants of the single-token decode kernel that rebuilds K from V
// (WIDEATTN_FLAG_K_FROM_V) over an e4m3 V-only cache, bf16 Q, head dim 512, GQA group 8 (kernel
// wideattn_decode_e4m3kfv_d512, sm_90a): decode_e4m3_d512's block, warps, sub-tiles, Q and merge
// (fp8/decode_e4m3_d512/traits.h), each warp's ring holding V chunks only, and the K operand of
// each sub-tile built in registers from its V codes with the arithmetic of
// kernels/common/k_from_v.h; the block stages k_norm's weight and the RoPE frequencies in shared
// memory.
#pragma once

#include <cstdint>

#include "fp8/codec/e4m3.h"
#include "fp8/decode_e4m3_d512/traits.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct DecodeE4m3KfvD512Traits : DecodeE4m3D512Traits {
    using Base = DecodeE4m3D512Traits;

    // The pairs of RoPE: dim d and d + kHeadDim / 2 turn together; in the A fragments of dim blocks
    // c and c + kPairBlockOffset a lane holds the two dims of its pairs.
    static constexpr int32_t kHalfDim = kHeadDim / 2;                      // 256 = the frequencies
    static constexpr int32_t kPairBlockOffset = kHalfDim / kDimBlock;      // 8
    // Rotated pair blocks whose cos / sin table words are loaded before the sub-tile's unrotated
    // ones (keys.cuh): Gemma 4's 128 rotated dims (64 frequencies, 32 a block), 16 registers a
    // block; the ones past them load theirs where used.
    static constexpr int32_t kCosSinBlocksAhead = 2;
    // At the top of step i a warp may ask the L2 for the cos / sin table rows of its sub-tile
    // i + kCosSinRowsAhead (CosSinTable::prefetch_rows, 4 KB with Gemma 4's 128 rotated dims); 0:
    // no prefetch (compiled out). 1 in decode_e4m3kfvb_d512, where it was measured; this f16-key
    // kernel keeps the code it was measured with.
    static constexpr int32_t kCosSinRowsAhead = 0;
    static constexpr int32_t kSubTileKeysPerLane = 2;                      // keys g and g + 8 of the A rows
    // K as f16 scaled by the block's power of two against f16 Q (this kernel), or as the
    // reference's bf16 values against bf16 Q in a bf16 mma (decode_e4m3kfvb_d512).
    static constexpr bool kBf16Keys = false;

    // The largest finite e4m3 magnitude (code 0x7e, fp8/codec/e4m3.h): bounds |V| / v_scale.
    static constexpr float kE4m3Max = fp8::kE4m3Max;
    // |K| <= (|c| + |s|) |x| (1 + 2^-8)^2 < 1.5 |x| <= 1.5 (kE4m3Max v_scale max|w|) (1 + 2^-8)^2; the
    // bound taken is 2 kE4m3Max v_scale max|w|, scaled by one power of two per block into
    // [2^kKTopLog2, 2^(kKTopLog2+1)), so every K value is an f16 below 65504, exact down to 2^-31 of
    // the bound (the bf16 rounding steps commute with a power of two).
    static constexpr float kKBoundFactor = 2.0f * kE4m3Max;
    static constexpr int32_t kKTopLog2 = 14;

    // The block's K exponent: K enters the mma as 2^-shift times the reference's K, for the block's
    // v_scale and largest finite |w| (w_amax >= 0); 0 when the bound is 0 or not finite, clamped to
    // +-kQShiftLimit (2^+-100 stays a normal float). Host and device (tests/test_decode_kfv_scale.cpp).
    WIDEATTN_HOST_DEVICE static int32_t k_shift(float v_scale, float w_amax) {
        return power_shift(kKBoundFactor * (v_scale < 0.0f ? -v_scale : v_scale) * w_amax, kKTopLog2);
    }

    // The ring: one chunk per sub-tile (its V codes, also the source of its K); three slots, two in
    // flight while one is read.
    static constexpr int32_t kRingChunks = 3;
    static constexpr int32_t kChunksInFlight = kRingChunks - 1;
    static constexpr int32_t kWarpRingBytes = kRingChunks * kChunkBytes;

    // k_norm's weight (fp32 [512]) and the inv_freq of the 256 frequencies (fp32, 0 from
    // rotary_dims / 2 on), staged once per block; each warp's largest finite |w|.
    static constexpr int32_t kWeightBytes = kHeadDim * 4;
    static constexpr int32_t kFreqBytes = kHalfDim * 4;
    static constexpr int32_t kWAmaxBytes = kWarps * 4;

    struct SmemPlan {
        static constexpr int32_t kQ = 0;
        static constexpr int32_t kRings = kQ + kQBytes;
        static constexpr int32_t kMerge = kRings;  // reused after the key loop
        static constexpr int32_t kStats = kRings + kWarps * kWarpRingBytes;
        static constexpr int32_t kAmax = kStats + kStatsBytes;
        static constexpr int32_t kWeight = kAmax + kAmaxBytes;
        static constexpr int32_t kFreq = kWeight + kWeightBytes;
        static constexpr int32_t kWAmax = kFreq + kFreqBytes;
        static constexpr int32_t kEnd = kWAmax + kWAmaxBytes;
        static constexpr int32_t kBytes = kEnd;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static_assert(kHeadDim % (2 * kDimBlock) == 0, "the pair blocks c, c + kPairBlockOffset cover the dims");
    static_assert(SmemPlan::kWeight % kVecBytes == 0 && SmemPlan::kFreq % kVecBytes == 0,
                  "the tables are read by 16-byte shared loads");
    static_assert(kMergeBytes <= kWarps * kWarpRingBytes, "the merge area fits in the rings");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "decode_e4m3kfv_d512", "wideattn_decode_e4m3kfv_d512",
        kBF16, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_e4m3kfv_d512_split"};
};

}  // namespace wideattn
