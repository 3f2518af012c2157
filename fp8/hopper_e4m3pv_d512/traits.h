// traits.h - every compile-time constant of the Hopper-tier 8-bit prefill kernel whose two
// products both run as FP8 wgmma (kernel wideattn_wgmma_e4m3pv_d512, sm_90a only): Q, K and V
// e4m3 with per-tensor scales, V in the transposed cache layout (WIDEATTN_FLAG_V_TRANSPOSED,
// kernels/common/v_transposed.h), which is the K-major B operand FP8 wgmma needs for P V. Q K^T
// by wgmma m64n32k32 e4m3 (both operands from shared memory), P V by wgmma m64n256k32 e4m3 with
// e4m3 P from registers. K and V tiles by TMA, the score exchange one-way: the bf16 Hopper
// kernel's structure (kernels/hopper/NOTES.md) on the block layout they share
// (kernels/common/wgmma_block_traits.h).
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/common/v_transposed.h"
#include "kernels/common/wgmma_block_traits.h"

namespace wideattn {

struct WgmmaE4m3PvD512Traits : WgmmaD512BlockTraits {
    // P in e4m3 (max 448): P is produced as 2^(s - max + kProbScaleLog2), i.e. times 2^8, as in
    // the mma-tier 8-bit kernels; with a rescale at every growth of a row maximum (threshold 0)
    // the largest P of a row is exactly 2^8 (exact in e4m3) and weights down to 2^-14 of it stay
    // normal (2^-17 subnormal). The row sums are of the fp32 P; the epilogue removes the factor.
    static constexpr float kProbScaleLog2 = 8.0f;
    static constexpr float kRescaleThresholdLog2 = 0.0f;
    static constexpr float kE4m3MaxLog2 = 8.807f;  // log2(448)

    // e4m3 codes: one byte per element, 128 dims per 128-byte slab (Q and K, K-major, swizzled).
    static constexpr int32_t kElemBytes = 1;
    static constexpr int32_t kSlabDims = kSwizzleBytes / kElemBytes;
    static constexpr int32_t kSlabsPerGroup = kDimsPerGroup / kSlabDims;
    static constexpr int32_t kCodeBytes = kElemBytes;  // the names BlockQuantizedQTraits reads
    static constexpr int32_t kCodeVecsPerGroupRow = kHeadDim * kCodeBytes / kVecBytes / kWarpGroups;
    static constexpr int32_t kScoreK = 32;  // k of wgmma m64n32k32 e4m3
    static constexpr int32_t kQkSteps = kDimsPerGroup / kScoreK;

    // P V: one wgmma m64n256k32 e4m3 per 32-key tile (shadows the 16-bit kPvK of the base).
    static constexpr int32_t kPvK = 32;
    static constexpr int32_t kPvSteps = kTileKeys / kPvK;
    static constexpr int32_t kProbRegs = 4;  // A fragment registers: 4 e4m3 each

    // Shared memory: Q codes, a ring of K / V chunks (the K or the V codes of one key tile), the
    // score exchange and the ring's mbarriers. A K chunk is the swizzled [key][dim] operand of the
    // score wgmma, a V chunk per warpgroup [16-key sub-tile][dim][16 bytes] (the transposed
    // layout's boxes, no swizzle).
    static constexpr int32_t kQBytes = kRowsPerBlock * kHeadDim * kElemBytes;
    static constexpr int32_t kChunkBytes = kTileKeys * kHeadDim * kElemBytes;
    static constexpr int32_t kGroupChunkBytes = kChunkBytes / kWarpGroups;
    static constexpr int32_t kVtSubTileBytes = kDimsPerGroup * kVecBytes;  // P V leading byte offset
    static constexpr int32_t kVtBoxBytes = kVtBoxDims * kVtBoxSlots * kElemBytes;
    static constexpr int32_t kVtBoxesPerSubTile = kDimsPerGroup / kVtBoxDims;
    static constexpr int32_t kRingSlots = 4;  // K_j, V_j, K_j+1, V_j+1 (the bf16 kernel's schedule)
    static constexpr int32_t kBarrierBytes = 8;
    static constexpr int32_t kBarriersBytes = kRingSlots * kWarpGroups * kBarrierBytes;
    struct SmemPlan {
        static constexpr int32_t kQ = 0;
        static constexpr int32_t kRing = kQ + kQBytes;
        static constexpr int32_t kExchange = kRing + kRingSlots * kChunkBytes;
        static constexpr int32_t kBarriers = kExchange + kExchangeBytes;
        static constexpr int32_t kEnd = kBarriers + kBarriersBytes;
        static constexpr int32_t kBytes = kEnd + kSmemAlign;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static constexpr int32_t kMinSm = 90;  // wgmma e4m3, TMA (sm_90a)

    static_assert(kRescaleThresholdLog2 + kProbScaleLog2 <= kE4m3MaxLog2, "P must stay <= 448");
    static_assert(kScoreK * kElemBytes == kScoreStepBytes && kSlabsPerGroup * kStepsPerSlab == kQkSteps,
                  "e4m3 score steps are the bf16 kernel's 32-byte steps");
    static_assert(kPvSteps == 1 && kPvK == kSubTiles * kPageKeys, "one P V wgmma covers a tile's two sub-tiles");
    static_assert(kVtBoxSlots * kElemBytes == kVecBytes, "a transposed V box row is one 16-byte core-matrix row");
    static_assert(kSubTiles * kVtBoxesPerSubTile * kVtBoxBytes == kGroupChunkBytes,
                  "the V boxes of a tile fill the warpgroup's half of a chunk");
    static_assert(kSubTiles * kVtSubTileBytes == kGroupChunkBytes, "two V sub-tiles per warpgroup half");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "wgmma_e4m3pv_d512", "wideattn_wgmma_e4m3pv_d512",
        kE4M3, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,fp8_q,tma_kv,v_transposed,split_kv", kKindPrefill,
        "wideattn_wgmma_e4m3pv_d512_split"};
};

}  // namespace wideattn
