// traits.h - every compile-time constant of the two-CTA Hopper-tier BF16 prefill kernel for head
// dim 512 and GQA group 8 (kernel wideattn_wgmma_bf16c2_d512, sm_90a only). Read by the kernel
// sources and by the manifest generator.
//
// A cluster of two CTAs serves 16 tokens x the 8 query heads of one KV head (128 rows). CTA c of
// the cluster keeps dims [256 c, 256 c + 256) of Q, K, V and O, so the layout of one CTA is that
// of one warpgroup of wgmma_bf16_d512 (WgmmaD512BlockTraits' "warpgroup" is this kernel's CTA:
// kDimsPerGroup dims, the operand slabs and the wgmma shapes carry over). In each CTA two consumer
// warpgroups own rows of tokens 0-7 and 8-15 (one wgmma m64 each, O 64 x 256 fp32 = 128 registers
// a thread) and share the CTA's K and V tiles; a producer warpgroup issues the TMA copies. The
// partial scores of a row group travel to the other CTA's warpgroup of the same rows through
// distributed shared memory (st.async, completing on that CTA's mbarrier).
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/common/wgmma_block_traits.h"

namespace wideattn {

struct WgmmaBf16C2D512Traits : WgmmaD512BlockTraits {
    // Softmax rescale at every growth of a row maximum (threshold 0), as wgmma_bf16_d512.
    static constexpr float kRescaleThresholdLog2 = 0.0f;

    // The row groups run their steps freely (false), or issue their products in turns (true: the
    // ordered form, wgmma_bf16c2pp_d512; mainloop.cuh, schedule.h).
    static constexpr bool kOrderedTurns = false;

    // The cluster: CTA rank c owns dims [c kDimsPerGroup, (c + 1) kDimsPerGroup).
    static constexpr int32_t kClusterCtas = kCtaPairSize;
    static_assert(kClusterCtas * kDimsPerGroup == kHeadDim, "the cluster's CTAs split the head dims");

    // Rows: kRowGroups consumer warpgroups a CTA, each kTileTokens tokens (kRowsPerBlock rows = one
    // wgmma m64); the cluster's token tile is kClusterTileTokens.
    static constexpr int32_t kRowGroups = 2;
    static constexpr int32_t kClusterTileTokens = kRowGroups * kTileTokens;
    static constexpr int32_t kRowTilesPerGroup = kWgmmaM / kRowsPerWarp;  // warps of a consumer warpgroup

    // Threads: the consumer warpgroups, then one producer warpgroup (the first thread of its first
    // warp issues the K copies, that of its second warp the V copies: block.cuh, loads.cuh,
    // produce_ring; one thread for both was busy 90% of the CTA's life in the profile of
    // 2026-12-05). Registers are moved from the producer to the consumers (setmaxnreg): the launch
    // gives 65536 / 384 = 168 a thread; the consumers run with kConsumerRegisters.
    static constexpr int32_t kConsumerThreads = kRowGroups * kWarpGroupThreads;
    static constexpr int32_t kConsumerWarps = kConsumerThreads / kWarpSize;
    static constexpr int32_t kProducerThreads = kWarpGroupThreads;
    static constexpr int32_t kThreads = kConsumerThreads + kProducerThreads;
    static constexpr uint32_t kConsumerRegisters = 240;
    static constexpr uint32_t kProducerRegisters = 24;
    static_assert(reallocation_fits(kThreads, kConsumerThreads, kConsumerRegisters, kProducerThreads,
                                    kProducerRegisters),
                  "the reallocated registers fit the CTA's launch allocation");

    // Score wgmma m64n32k16 on bf16, over the CTA's dims.
    static constexpr int32_t kWgmmaK = 16;
    static constexpr int32_t kQkSteps = kDimsPerGroup / kWgmmaK;

    // bf16 operands: 64 dims per 128-byte slab.
    static constexpr int32_t kElemBytes = 2;
    static constexpr int32_t kVecElems = kVecBytes / kElemBytes;
    static constexpr int32_t kSlabDims = kSwizzleBytes / kElemBytes;
    static constexpr int32_t kSlabsPerGroup = kDimsPerGroup / kSlabDims;
    static constexpr int32_t kVecsPerGroupRow = kDimsPerGroup / kVecElems;

    // Shared memory: the Q rows of both row groups (the CTA's dims), a ring of K tiles and one of
    // V tiles (the CTA's dims of one 32-key tile each, 4 slabs), the partner CTA's partial scores
    // per row group and exchange parity, and the mbarriers.
    static constexpr int32_t kQGroupBytes = kRowsPerBlock * kDimsPerGroup * kElemBytes;
    static constexpr int32_t kQBytes = kRowGroups * kQGroupBytes;
    static constexpr int32_t kChunkBytes = kTileKeys * kDimsPerGroup * kElemBytes;
    static constexpr int32_t kKSlots = 4;
    static constexpr int32_t kVSlots = 4;
    static constexpr int32_t kScoreTileBytes = kRowsPerBlock * kTileKeys * 4;  // fp32 64 x 32
    static constexpr int32_t kReceiveBytes = kRowGroups * kExchangeParities * kScoreTileBytes;
    static constexpr int32_t kBarrierBytes = 8;
    // Barriers: full and empty per K slot, per V slot; received scores per row group and parity.
    static constexpr int32_t kBarrierCount = 2 * (kKSlots + kVSlots) + kRowGroups * kExchangeParities;
    struct SmemPlan {
        static constexpr int32_t kQ = 0;
        static constexpr int32_t kKRing = kQ + kQBytes;
        static constexpr int32_t kVRing = kKRing + kKSlots * kChunkBytes;
        static constexpr int32_t kReceive = kVRing + kVSlots * kChunkBytes;
        static constexpr int32_t kBarriers = kReceive + kReceiveBytes;
        static constexpr int32_t kEnd = kBarriers + kBarrierCount * kBarrierBytes;
        static constexpr int32_t kBytes = kEnd + kSmemAlign;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static constexpr int32_t kMinSm = 90;  // wgmma, TMA, clusters (sm_90a)

    static_assert(kWgmmaK * kElemBytes == kScoreStepBytes, "a score wgmma steps 32 bytes of a row");
    static_assert(kSlabsPerGroup * kStepsPerSlab == kQkSteps, "bf16 score steps");
    static_assert(kElemBytes == kValueBytes && kSlabsPerGroup == kValueSlabsPerGroup,
                  "bf16 V is the 16-bit layout P V reads");
    static_assert(kChunkBytes == kSlabsPerGroup * kChunkSlabBytes, "a tile of the CTA's dims is whole slabs");
    static_assert(kQGroupBytes == kSlabsPerGroup * kQSlabBytes, "a row group's Q is whole slabs");
    static_assert(kConsumerThreads % kVecsPerGroupRow == 0, "whole rows per zeroing pass");
    static_assert(kWarpGroupThreads % kVecsPerGroupRow == 0, "whole rows per Q load pass");
    static_assert(SmemPlan::kKRing % kSmemAlign == 0 && SmemPlan::kVRing % kSmemAlign == 0 &&
                      kChunkBytes % kSmemAlign == 0 && kQGroupBytes % kSmemAlign == 0,
                  "operands start on 1024-byte swizzle atoms");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");
    static_assert(kTileTokens == kFewTokensPerSeq,
                  "many_tokens: a sequence of more than kFewTokensPerSeq tokens has rows in both row groups of its first tile");

    static constexpr KernelDesc desc = {
        "wgmma_bf16c2_d512", "wideattn_wgmma_bf16c2_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kClusterTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,tma_kv,cta_pair,many_tokens,split_kv", kKindPrefill, "wideattn_wgmma_bf16c2_d512_split"};
};

}  // namespace wideattn
