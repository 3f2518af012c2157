// traits.h - every compile-time constant of the Hopper-tier 8-bit prefill kernel whose warpgroups
// take alternate 64-key tiles (kernel wideattn_wgmma_e4m3alt64_d512, sm_90a only, candidate):
// wgmma_e4m3alt_d512 (fp8/hopper_e4m3alt_d512/traits.h, whose constants this shadows) with own
// tiles of 64 keys instead of 32: full-width scores by wgmma m64n64k32 e4m3, the e4m3 P of a tile
// as two k32 A fragments (own P V: two wgmma m64n256k32 RS; the partner's: two SS), rings of
// 64-key chunks (fp8/hopper_e4m3alt64_d512/NOTES.md). Every constant of the base chain that
// depends on the tile's keys is redefined here.
#pragma once

#include "fp8/hopper_e4m3alt_d512/traits.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct WgmmaE4m3Alt64D512Traits : WgmmaE4m3AltD512Traits {
    // A key tile: 64 keys = 4 sub-tiles of 16 (each inside one page), 8 accumulator quads of
    // scores, two k32 steps of P V.
    static constexpr int32_t kTileKeys = 64;
    static constexpr int32_t kKeyNTiles = kTileKeys / kAccumN;
    static constexpr int32_t kSubTiles = kTileKeys / kPageKeys;
    static constexpr int32_t kChunkSlabBytes = kTileKeys * kSwizzleBytes;
    static constexpr int32_t kExchangeTileBytes = kRowsPerBlock * kTileKeys * 4;
    static constexpr int32_t kExchangeBytes = kExchangeParities * kWarpGroups * kExchangeTileBytes;
    static constexpr int32_t kPvSteps = kTileKeys / kPvK;
    static constexpr int32_t kChunkBytes = kTileKeys * kHeadDim * kElemBytes;
    static constexpr int32_t kGroupChunkBytes = kChunkBytes / kWarpGroups;
    // The V of one P V step (32 keys): two transposed-V sub-tiles of the warpgroup's half.
    static constexpr int32_t kVtStepBytes = (kPvK / kPageKeys) * kVtSubTileBytes;

    // Rings (227 KB allow five 32 KB chunks besides Q and the hand-off buffers): K one slot per
    // warpgroup (its tile of round r + 1 copied once the rendezvous of round r shows scores(r)
    // retired), V three tile slots shared (tile t in slot t % 3, each warpgroup its half).
    static constexpr int32_t kKeySlots = 1;
    static constexpr int32_t kValueSlots = 3;

    // A P tile handed to the partner: 64 rows x 64 keys of e4m3 as two 32-key halves, each the A
    // operand of one SS wgmma m64n256k32 in wgmma_e4m3alt_d512's layout.
    static constexpr int32_t kProbStepBytes = kRowsPerBlock * kPvK * kElemBytes;
    static constexpr int32_t kProbTileBytes = kRowsPerBlock * kTileKeys * kElemBytes;

    // Byte offset in a P tile of register `reg` (0 .. 3) of P V step `step` (keys 32 step ..
    // 32 step + 31) of lane `lane` in warp `row_tile`: the 32-key kernel's place inside the step's half.
    WIDEATTN_HOST_DEVICE static constexpr uint32_t prob_fragment_offset(int32_t row_tile, int32_t lane, int32_t step,
                                                                        int32_t reg) {
        return static_cast<uint32_t>(step * kProbStepBytes) +
               WgmmaE4m3AltD512Traits::prob_fragment_offset(row_tile, lane, reg);
    }

    // The score element packed into byte `byte` (0 .. 3) of register `reg` (0 .. 3) of P V step
    // `step`'s A fragment: accumulator quad prob_score_quad, element prob_score_element (the
    // 32-key kernel's pack_prob_fragment on quads 4 step .. 4 step + 3). Quad n, element e of lane
    // t holds row g + 8 (e / 2), key 8 n + 2 t + e % 2 of the tile (the m64nNk32 accumulator).
    WIDEATTN_HOST_DEVICE static constexpr int32_t prob_score_quad(int32_t step, int32_t reg, int32_t byte) {
        return kProbRegs * step + 2 * (reg / 2) + byte / 2;
    }
    WIDEATTN_HOST_DEVICE static constexpr int32_t prob_score_element(int32_t reg, int32_t byte) {
        return 2 * (reg % 2) + byte % 2;
    }

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

    static_assert(kTileKeys % kPageKeys == 0 && kSubTiles * kPageKeys == kTileKeys, "whole 16-key sub-tiles");
    static_assert(kKeyNTiles == kPvSteps * kProbRegs, "four score quads per k32 P fragment");
    static_assert(kPvSteps * kPvK == kTileKeys, "whole k32 P V steps");
    static_assert(kSubTiles * kVtSubTileBytes == kGroupChunkBytes && kPvSteps * kVtStepBytes == kGroupChunkBytes,
                  "four V sub-tiles, two P V steps per warpgroup half");
    static_assert(kSubTiles * kVtBoxesPerSubTile * kVtBoxBytes == kGroupChunkBytes,
                  "the V boxes of a tile fill the warpgroup's half of a chunk");
    static_assert(kProbTileBytes == kPvSteps * kProbStepBytes &&
                      kProbStepBytes == (kRowsPerBlock / kAtomRows) * kProbRowGroupBytes,
                  "a P tile is two 32-key halves of 8-row groups of two core matrices");
    static_assert(kValueSlots >= kTilesPerRound && kKeySlots >= 1, "a round's V tiles and one K tile in the rings");
    static_assert(SmemPlan::kKeyRing % kSmemAlign == 0 && kChunkBytes % kSmemAlign == 0,
                  "K chunks on 1024-byte swizzle atoms");
    static_assert(SmemPlan::kProbs % kVecBytes == 0 && SmemPlan::kBarriers % kBarrierBytes == 0,
                  "aligned P tiles and mbarriers");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "wgmma_e4m3alt64_d512", "wideattn_wgmma_e4m3alt64_d512",
        kE4M3, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,fp8_q,tma_kv,v_transposed,split_kv", kKindPrefill,
        "wideattn_wgmma_e4m3alt64_d512_split"};
};

}  // namespace wideattn
