// traits.h - every compile-time constant of the single-token decode kernel for bf16 Q over an
// e4m3 K/V cache, head dim 512, GQA group 8 (kernel wideattn_decode_e4m3_d512, sm_90a): one
// block per (query token, KV head[, key split]), its 8 query rows being the 8 heads of the KV
// head; 8 warps, each streaming its own 16-key sub-tiles (every 8th) through a private cp.async
// ring and keeping its own online softmax and O, merged across the warps at the end. Both
// products run as mma.sync m16n8k16 f16 with the keys in the m dimension (S^T = K Q^T, O^T =
// V^T P^T), so 8 query rows fill the n = 8 of every mma and no row is padding; e4m3 codes
// become f16 exactly (cvt e4m3x2), Q bf16 becomes f16 exactly after a power-of-two scale.
#pragma once

#include <cfloat>
#include <cstdint>
#include <cstring>

#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct DecodeE4m3D512Traits {
    static constexpr int32_t kHeadDim = 512;
    static constexpr int32_t kGroup = 8;             // query heads per KV head = the block's rows
    static constexpr int32_t kRows = kGroup;
    static constexpr int32_t kWarpSize = 32;
    static constexpr int32_t kWarps = 8;  // 2 per scheduler: 1 left the issue slots 68% idle on latency
    static constexpr int32_t kThreads = kWarps * kWarpSize;
    static constexpr int32_t kTileTokens = 1;        // one query token per block
    static constexpr int32_t kTokensPerRowTile = 1;  // block_geometry: every row is the block's token

    // A warp's step: one sub-tile of 16 keys (never straddles a page: block_size is a multiple
    // of 16), the m of the mma. Split boundaries are multiples of lcm(kTileKeys, block_size).
    static constexpr int32_t kSubTileKeys = kPageSizeMultiple;
    static constexpr int32_t kTileKeys = kSubTileKeys;

    // mma.sync m16n8k16 f16: k extent 16, n = the 8 rows.
    static constexpr int32_t kMmaM = 16;
    static constexpr int32_t kMmaK = 16;
    static constexpr int32_t kVecBytes = 16;  // one cp.async, one ldmatrix row
    static constexpr int32_t kCodeBytes = 1;  // e4m3
    static constexpr int32_t kRowBytes = kHeadDim * kCodeBytes;           // one key's codes (512)
    static constexpr int32_t kVecsPerRow = kRowBytes / kVecBytes;         // 32 = one per lane
    static constexpr int32_t kDimBlock = 32;                              // dims per ldmatrix.x4 of K or V
    static constexpr int32_t kDimBlocks = kHeadDim / kDimBlock;           // 16
    static constexpr int32_t kONTiles = 2 * kDimBlocks;                   // O^T m-tiles: even / odd dims
    static constexpr int32_t kSwizzleRows = 8;                            // rows of one ldmatrix matrix

    // V in the engine layout ([block][slot][kv_head][d]); decode_e4m3vt_d512 reads the transposed
    // layout (kernels/common/v_transposed.h) with the same block.
    static constexpr bool kVTransposed = false;

    // Per-warp ring of chunks, a chunk = the K or the V codes of one sub-tile; chunk c of a warp is
    // K (c even) or V (c odd) of its sub-tile c / 2, in slot c % kRingChunks. Three slots: while
    // one is read, the next two are in flight.
    static constexpr int32_t kRingChunks = 3;
    static constexpr int32_t kChunkBytes = kSubTileKeys * kRowBytes;
    static constexpr int32_t kChunksInFlight = kRingChunks - 1;
    static constexpr int32_t kWarpRingBytes = kRingChunks * kChunkBytes;

    // Q: the 8 rows as f16 after the block's power-of-two scale, 1 KB rows, 16-byte vectors
    // swizzled by row; Q^T fragments come from it by ldmatrix.
    static constexpr int32_t kQRowBytes = kHeadDim * 2;
    static constexpr int32_t kQBytes = kRows * kQRowBytes;
    static constexpr int32_t kQVecsPerRow = kQRowBytes / kVecBytes;  // 64
    // The scale makes the largest |Q| of the block 2^kQTopLog2..2^(kQTopLog2+1), inside f16's
    // range (65504) with every bf16 value above 2^-29 of it a normal f16 (exact).
    static constexpr int32_t kQTopLog2 = 14;
    static constexpr int32_t kQShiftLimit = 100;  // |log2 scale| bound: 2^+-100 stays a normal float

    // The block scale of K (decode_e4m3kfv_d512, k_shift there): the shift that brings `bound`
    // into [2^top_log2, 2^(top_log2 + 1)) when multiplied by 2^-shift, clamped to +-kQShiftLimit;
    // 0 when the bound is 0, negative or not finite. Host and device
    // (tests/test_decode_kfv_scale.cpp). load_q's Q scale (loads.cuh) is the same rule written
    // out, as load_q also serves the verify kernels' traits, which do not derive from these.
    WIDEATTN_HOST_DEVICE static int32_t power_shift(float bound, int32_t top_log2) {
        if (!(bound > 0.0f && bound <= FLT_MAX)) return 0;
        uint32_t bits;
        std::memcpy(&bits, &bound, sizeof bits);
        const int32_t exponent = static_cast<int32_t>((bits >> kFloatMantissaBits) & kFloatExponentMask) - kFloatBias;
        const int32_t shift = exponent - top_log2;
        return shift < -kQShiftLimit ? -kQShiftLimit : shift > kQShiftLimit ? kQShiftLimit : shift;
    }
    // 2^shift as a float, |shift| <= kQShiftLimit (a normal float).
    WIDEATTN_HOST_DEVICE static float power_of_two(int32_t shift) {
        const uint32_t bits = static_cast<uint32_t>(kFloatBias + shift) << kFloatMantissaBits;
        float value;
        std::memcpy(&value, &bits, sizeof value);
        return value;
    }
    static constexpr int32_t kFloatBias = 127;
    static constexpr int32_t kFloatMantissaBits = 23;
    static constexpr uint32_t kFloatExponentMask = 0xffu;

    // Softmax: log2 units; P = 2^(s - max + kProbScaleLog2) in f16 (largest 256, normal down to
    // 2^-22 of the row maximum), a rescale at every growth of a row maximum.
    static constexpr float kProbScaleLog2 = 8.0f;
    static constexpr bool kBf16Probs = false;  // P^T packed as f16 (the P V mma's type)

    // The O^T accumulator o[n] (e0, e1 at dim o_dim(n, g); e2, e3 kOHalfDims further): the even /
    // odd dims of the 32-dim blocks, as the V^T fragments of a code block come out.
    static constexpr int32_t kOHalfDims = 16;
    WIDEATTN_HOST_DEVICE static constexpr int32_t o_dim(int32_t n, int32_t g) { return 32 * (n / 2) + 2 * g + n % 2; }
    // The output is O / l x v_scale (V in codes).
    static constexpr bool kScaledV = true;

    // The end of the block: each warp's row maxima and sums, and O^T (fp32 [warp][row][dim]),
    // written over the rings once every warp is done.
    static constexpr int32_t kMergeRowBytes = kHeadDim * 4;
    static constexpr int32_t kMergeBytes = kWarps * kRows * kMergeRowBytes;
    static constexpr int32_t kStatsBytes = kWarps * kRows * 2 * 4;  // max and sum per warp and row
    static constexpr int32_t kAmaxBytes = kWarps * 4;

    struct SmemPlan {
        static constexpr int32_t kQ = 0;
        static constexpr int32_t kRings = kQ + kQBytes;
        static constexpr int32_t kMerge = kRings;  // reused after the key loop
        static constexpr int32_t kStats = kRings + kWarps * kWarpRingBytes;
        static constexpr int32_t kAmax = kStats + kStatsBytes;
        static constexpr int32_t kEnd = kAmax + kAmaxBytes;
        static constexpr int32_t kBytes = kEnd;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;
    static constexpr int32_t kSmemAlign = 128;

    static constexpr int32_t kMinSm = 90;  // cvt e4m3x2 (sm_89+); the 192 KB of rings need sm_90's shared memory

    static_assert(kVecsPerRow == kWarpSize, "a lane copies one 16-byte vector of every key row");
    static_assert(kSubTileKeys == kMmaM, "a sub-tile is the m of one mma");
    static_assert(kDimBlock == 2 * kVecBytes, "a K/V ldmatrix.x4 covers two 16-byte vectors of 16 keys");
    static_assert(kMergeBytes <= kWarps * kWarpRingBytes, "the merge area fits in the rings");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");
    static_assert(kRingChunks == 3, "the schedule of mainloop.cuh: K_i+1 takes V_i-1's slot, V_i+1 K_i's");

    static constexpr KernelDesc desc = {
        "decode_e4m3_d512", "wideattn_decode_e4m3_d512",
        kBF16, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,split_kv,single_token", kKindPrefill, "wideattn_decode_e4m3_d512_split"};
};

// The same kernel for Q already in e4m3 with a per-tensor *q_scale (kernel_q.cu): the codes become
// f16 exactly, the only difference.
struct DecodeE4m3QD512Traits : DecodeE4m3D512Traits {
    static constexpr KernelDesc desc = {
        "decode_e4m3q_d512", "wideattn_decode_e4m3q_d512",
        kE4M3, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,fp8_q,split_kv,single_token", kKindPrefill,
        "wideattn_decode_e4m3q_d512_split"};
};

}  // namespace wideattn
