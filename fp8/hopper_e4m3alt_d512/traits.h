// traits.h - every compile-time constant of the Hopper-tier 8-bit prefill kernel whose warpgroups
// take alternate key tiles (kernel wideattn_wgmma_e4m3alt_d512, sm_90a only): Q, K and V e4m3 with
// per-tensor scales, V in the transposed cache layout (WIDEATTN_FLAG_V_TRANSPOSED), both products
// by FP8 wgmma as in wgmma_e4m3pv_d512 (fp8/hopper_e4m3pv_d512/traits.h, whose constants this
// derives from). Warpgroup g computes the full-width scores (all 512 dims) of key tiles g, g + 2,
// g + 4, ...; the two warpgroups of a round (tiles 2r and 2r + 1) trade their 64 row maxima and
// their e4m3 P tiles (2 KB) instead of 8 KB of partial scores per 32-key tile, and each keeps O
// for its half of the dims (fp8/hopper_e4m3alt_d512/NOTES.md).
#pragma once

#include "fp8/hopper_e4m3pv_d512/traits.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct WgmmaE4m3AltD512Traits : WgmmaE4m3PvD512Traits {
    // Full-width score products: every warpgroup reads all kFullSlabs 128-byte slabs of Q and of
    // its K tiles.
    static constexpr int32_t kFullSlabs = kHeadDim / kSlabDims;

    // Rings, per warpgroup for K (its own tiles, whole width: kChunkBytes each, kKeySlots deep,
    // the tile of round r in slot r % kKeySlots) and shared for V (every tile, each warpgroup
    // copying and reading its half of the dims: the wgmma_e4m3pv_d512 chunk; tile t in slot
    // t % kValueSlots, two rounds).
    static constexpr int32_t kKeySlots = 3;
    static constexpr int32_t kValueSlots = 4;
    static constexpr int32_t kTilesPerRound = kWarpGroups;

    // A P tile handed to the partner warpgroup: 64 rows x 32 keys of e4m3, the A operand of an
    // SS wgmma m64n256k32, K-major without swizzle: core matrices of 8 rows x 16 bytes, the two
    // 16-key halves kProbCoreBytes apart (leading), 8-row groups 2 kProbCoreBytes apart (stride).
    static constexpr int32_t kProbCoreBytes = kAtomRows * kVecBytes;
    static constexpr int32_t kProbRowGroupBytes = 2 * kProbCoreBytes;
    static constexpr int32_t kProbTileBytes = kRowsPerBlock * kTileKeys * kElemBytes;
    static constexpr int32_t kProbParities = 2;
    static constexpr int32_t kMaximaBytes = kRowsPerBlock * 4;  // fp32 row maxima of one warpgroup's tile
    static constexpr int32_t kLanesPerAccumRow = 4;           // lanes sharing a row of the accumulator

    // Byte offset in a P tile of register `reg` (0 .. 3) of lane `lane` in warp `row_tile` of the
    // warpgroup's e4m3 A fragment (reg 0: row g = lane / 4, columns 4t .. 4t + 3, t = lane % 4;
    // 1: row g + 8; 2, 3: the same 16 columns later), so that the SS wgmma reads the A the RS one
    // had: core matrix (8-row group, 16-column half) at (2 group + half) x kProbCoreBytes.
    WIDEATTN_HOST_DEVICE static constexpr uint32_t prob_fragment_offset(int32_t row_tile, int32_t lane, int32_t reg) {
        return static_cast<uint32_t>(row_tile * 2 * kProbRowGroupBytes + (lane / kLanesPerAccumRow) * kVecBytes +
                                     (lane % kLanesPerAccumRow) * 4 + (reg % 2) * kProbRowGroupBytes +
                                     (reg / 2) * kProbCoreBytes);
    }
    static constexpr int32_t kSumsBytes = kWarpGroupThreads * 2 * 4;  // a warpgroup's partial row sums

    struct SmemPlan {
        static constexpr int32_t kQ = 0;
        static constexpr int32_t kKeyRing = kQ + kQBytes;
        static constexpr int32_t kValueRing = kKeyRing + kKeySlots * kWarpGroups * kChunkBytes;
        static constexpr int32_t kProbs = kValueRing + kValueSlots * kChunkBytes;
        static constexpr int32_t kMaxima = kProbs + kProbParities * kWarpGroups * kProbTileBytes;
        static constexpr int32_t kSums = kMaxima + kProbParities * kWarpGroups * kMaximaBytes;
        static constexpr int32_t kBarriers = kSums + kWarpGroups * kSumsBytes;
        static constexpr int32_t kKeyBarriersBytes = kKeySlots * kWarpGroups * kBarrierBytes;
        static constexpr int32_t kEnd = kBarriers + kKeyBarriersBytes + kValueSlots * kWarpGroups * kBarrierBytes;
        static constexpr int32_t kBytes = kEnd + kSmemAlign;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static_assert(kFullSlabs * kSlabDims == kHeadDim, "whole slabs over the head dims");
    static_assert(kProbTileBytes == (kRowsPerBlock / kAtomRows) * kProbRowGroupBytes,
                  "a P tile is 8-row groups of two core matrices");
    static_assert(kTileKeys == 2 * kVecBytes / kElemBytes, "a P row is two 16-byte core-matrix rows");
    static_assert(SmemPlan::kProbs % kVecBytes == 0 && SmemPlan::kBarriers % kBarrierBytes == 0,
                  "aligned P tiles and mbarriers");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "wgmma_e4m3alt_d512", "wideattn_wgmma_e4m3alt_d512",
        kE4M3, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,fp8_q,tma_kv,v_transposed,split_kv", kKindPrefill,
        "wideattn_wgmma_e4m3alt_d512_split"};
};

// The view of a kernel's traits the full-width K stream (the bf16 kernel's KvTmaStream) copies
// with: a warpgroup's "half" is the whole row of kFullSlabs slabs, its chunk a whole K tile (also
// wgmma_e4m3alt64_d512's, over its 64-key tiles).
template <class Traits>
struct FullWidthKeyView : Traits {
    static constexpr int32_t kSlabsPerGroup = Traits::kFullSlabs;
    static constexpr int32_t kGroupChunkBytes = Traits::kChunkBytes;
};
using WgmmaE4m3AltKeyStreamTraits = FullWidthKeyView<WgmmaE4m3AltD512Traits>;

}  // namespace wideattn
