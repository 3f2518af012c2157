// traits.h - every compile-time constant of the two-CTA Hopper-tier BF16 prefill kernel that
// exchanges probabilities instead of partial scores (kernel wideattn_wgmma_bf16c2p_d512, sm_90a
// only; the BF16 prefill default on sm_90a). Read by the kernel sources and by the manifest generator.
//
// A cluster of two CTAs serves 16 tokens x the 8 query heads of one KV head (128 rows = two row
// groups of 64, tokens 0-7 and 8-15), as wgmma_bf16c2_d512. What differs is the split of the work:
// CTA c computes the scores and the softmax of row group c alone, over all 512 dims (its "home"
// warpgroup: Q of those rows and K tiles over every dim), and O over its dims [256 c, 256 c + 256)
// for both row groups: the home warpgroup's O from its own P, the "fed" warpgroup's O (row group
// 1 - c) from the P that the partner CTA's home warpgroup sends it through distributed shared
// memory (st.async) with the softmax rescale factors. So no exchange sits between a score product
// and its softmax; the probabilities travel beside the next score product instead, as bf16 (the
// P V operand itself: 4 KB a tile and row group, the fp32 partial scores were 8 KB).
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/common/wgmma_block_traits.h"

namespace wideattn {

struct WgmmaBf16C2pD512Traits : WgmmaD512BlockTraits {
    // Softmax rescale at every growth of a row maximum (threshold 0), as wgmma_bf16c2_d512.
    static constexpr float kRescaleThresholdLog2 = 0.0f;

    // The cluster: CTA rank c owns the scores of row group c and dims [c kDimsPerGroup, (c + 1)
    // kDimsPerGroup) of V and O.
    static constexpr int32_t kClusterCtas = kCtaPairSize;
    static_assert(kClusterCtas * kDimsPerGroup == kHeadDim, "the cluster's CTAs split the dims of V and O");
    static constexpr int32_t kRowGroups = 2;
    static_assert(kRowGroups == kClusterCtas, "each CTA owns the scores of one row group");
    static constexpr int32_t kClusterTileTokens = kRowGroups * kTileTokens;
    static constexpr int32_t kRowTilesPerGroup = kWgmmaM / kRowsPerWarp;  // warps of a consumer warpgroup

    // Threads: the home warpgroup (0), the fed warpgroup (1), then the producer warpgroup, whose
    // warps' first threads issue the copies: warp 0 and warp 1 the K tiles' dims 0-255 and 256-511,
    // warp 2 the V tiles (block.cuh). setmaxnreg as wgmma_bf16c2_d512.
    static constexpr int32_t kHomeGroup = 0;
    static constexpr int32_t kFedGroup = 1;
    static constexpr int32_t kConsumerGroups = 2;
    static constexpr int32_t kConsumerThreads = kConsumerGroups * kWarpGroupThreads;
    static constexpr int32_t kConsumerWarps = kConsumerThreads / kWarpSize;
    static constexpr int32_t kGroupWarps = kWarpGroupThreads / kWarpSize;
    static constexpr int32_t kProducerThreads = kWarpGroupThreads;
    static constexpr int32_t kThreads = kConsumerThreads + kProducerThreads;
    static constexpr int32_t kKProducers = 2;  // producer threads of the K ring, one per half of the dims
    static constexpr uint32_t kConsumerRegisters = 240;
    static constexpr uint32_t kProducerRegisters = 24;
    static_assert(reallocation_fits(kThreads, kConsumerThreads, kConsumerRegisters, kProducerThreads,
                                    kProducerRegisters),
                  "the reallocated registers fit the CTA's launch allocation");

    // Score wgmma m64n32k16 on bf16 over every dim.
    static constexpr int32_t kWgmmaK = 16;
    static constexpr int32_t kElemBytes = 2;
    static constexpr int32_t kVecElems = kVecBytes / kElemBytes;
    static constexpr int32_t kSlabDims = kSwizzleBytes / kElemBytes;
    static constexpr int32_t kScoreSlabs = kHeadDim / kSlabDims;           // Q and K: every dim
    static constexpr int32_t kSlabsPerGroup = kDimsPerGroup / kSlabDims;   // V, and one producer copy
    static constexpr int32_t kVecsPerQRow = kHeadDim / kVecElems;
    static constexpr int32_t kVecsPerGroupRow = kDimsPerGroup / kVecElems;  // a V row of the CTA's dims

    // Shared memory: the home row group's Q over every dim, a ring of K tiles over every dim, one of
    // V tiles over the CTA's dims, the P messages received from the partner (per exchange parity:
    // the P fragments of each of its home threads, then their rescale factors), the partner's final
    // row statistics, the tokens by which the partner's fed warps hand the P buffers back, and the
    // mbarriers. A producer copy (kChunkBytes) is 4 slabs of one tile: a V
    // tile, or half a K tile.
    static constexpr int32_t kQBytes = kRowsPerBlock * kHeadDim * kElemBytes;
    static constexpr int32_t kChunkBytes = kTileKeys * kDimsPerGroup * kElemBytes;
    static constexpr int32_t kKTileBytes = kKProducers * kChunkBytes;
    static constexpr int32_t kVTileBytes = kChunkBytes;
    static constexpr int32_t kKSlots = 3;
    // P message buffers, used in turn by tile (tile t in buffer t % kMessageParities; three measured
    // no faster: NOTES.md).
    static constexpr int32_t kMessageParities = 2;
    static constexpr int32_t kVSlots = 3;
    static constexpr int32_t kPVecs = kPvSteps * 4 * 4 / kVecBytes;  // 16-byte vectors of a thread's P fragments
    static constexpr int32_t kPMessageBytes = kWarpGroupThreads * kPVecs * kVecBytes;
    static constexpr int32_t kAlphaBytes = 8;                        // a thread's two rescale factors
    static constexpr int32_t kAlphaMessageBytes = kWarpGroupThreads * kAlphaBytes;
    static constexpr int32_t kMessageBytes = kPMessageBytes + kAlphaMessageBytes;
    static constexpr int32_t kStateVecBytes = 16;                    // a thread's row maxima and sums
    static constexpr int32_t kStateBytes = kWarpGroupThreads * kStateVecBytes;
    static constexpr int32_t kTokenBytes = 4;                        // a fed warp's "buffer read" token
    static constexpr int32_t kFreedBytes = kGroupWarps * kTokenBytes;  // one parity's tokens
    static constexpr int32_t kBarrierBytes = 8;
    // Barriers: full and empty per K slot and per V slot; per exchange parity the received P and the
    // freed buffer (the partner's fed warps' tokens, kTokens); the received final state.
    static constexpr int32_t kBarrierCount = 2 * (kKSlots + kVSlots) + 2 * kMessageParities + 1;
    struct SmemPlan {
        static constexpr int32_t kQ = 0;
        static constexpr int32_t kKRing = kQ + kQBytes;
        static constexpr int32_t kVRing = kKRing + kKSlots * kKTileBytes;
        static constexpr int32_t kReceive = kVRing + kVSlots * kVTileBytes;
        static constexpr int32_t kState = kReceive + kMessageParities * kMessageBytes;
        static constexpr int32_t kTokens = kState + kStateBytes;
        static constexpr int32_t kBarriers = kTokens + kMessageParities * kFreedBytes;
        static constexpr int32_t kEnd = kBarriers + kBarrierCount * kBarrierBytes;
        static constexpr int32_t kBytes = kEnd + kSmemAlign;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static constexpr int32_t kMinSm = 90;  // wgmma, TMA, clusters (sm_90a)

    static_assert(kWgmmaK * kElemBytes == kScoreStepBytes, "a score wgmma steps 32 bytes of a row");
    static_assert(kElemBytes == kValueBytes && kSlabsPerGroup == kValueSlabsPerGroup,
                  "bf16 V is the 16-bit layout P V reads");
    static_assert(kChunkBytes == kSlabsPerGroup * kChunkSlabBytes, "a producer copy is whole slabs");
    static_assert(kQBytes == kScoreSlabs * kQSlabBytes, "Q is whole slabs");
    static_assert(kPVecs * kVecBytes == kPvSteps * 4 * 4, "a thread's P fragments are whole vectors");
    static_assert(kConsumerThreads % kVecsPerGroupRow == 0, "whole rows per zeroing pass");
    static_assert(kWarpGroupThreads % kVecsPerQRow == 0, "whole rows per Q load pass");
    static_assert(SmemPlan::kKRing % kSmemAlign == 0 && SmemPlan::kVRing % kSmemAlign == 0 &&
                      kKTileBytes % kSmemAlign == 0 && kVTileBytes % kSmemAlign == 0 && kQBytes % kSmemAlign == 0,
                  "operands start on 1024-byte swizzle atoms");
    static_assert(SmemPlan::kReceive % kVecBytes == 0 && SmemPlan::kState % kVecBytes == 0 &&
                      SmemPlan::kBarriers % kBarrierBytes == 0,
                  "messages in whole vectors, barriers 8-byte aligned");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");
    static_assert(kTileTokens == kFewTokensPerSeq,
                  "many_tokens: a sequence of more than kFewTokensPerSeq tokens has rows in both row groups of its first tile");


    static constexpr KernelDesc desc = {
        "wgmma_bf16c2p_d512", "wideattn_wgmma_bf16c2p_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kClusterTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,tma_kv,cta_pair,many_tokens,split_kv", kKindPrefill, "wideattn_wgmma_bf16c2p_d512_split"};
};

}  // namespace wideattn
