// traits.h - every compile-time constant of the BF16 mma.sync prefill kernel for head dim 512
// and GQA group 8 (kernel wideattn_mma_bf16_d512). Read by the kernel sources and by the
// manifest generator; the same constants build every arch (sm_80 .. sm_120a).
//
// Block layout (64 rows = 8 tokens x 8 heads, warp = m-tile x dim half, pair-wise score
// exchange) and the KernelDesc shape: kernels/common/mma_block_traits.h, shared with the 8-bit
// kernels. Here: mma.sync m16n8k16 bf16, the ping-pong and chain options, and K/V streaming
// through a ring of 16-key chunks (one chunk = the K or the V of one key tile) filled with
// cp.async.
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/common/mma_block_traits.h"

namespace wideattn {

struct MmaBf16D512Traits : MmaD512BlockTraits {
    // mma.sync.m16n8k16 shape: k extent (m16n8 in the base).
    static constexpr int32_t kMmaK = 16;

    // Ping-pong (when kPingPong): warps 0..3 (group 0) run Q K^T, softmax, P V of key tile
    // j; warps 4..7 (group 1) run P V of tile j-1, then Q K^T and softmax of tile j, so one
    // group's softmax overlaps the other's matrix products. Measured slower on the H200
    // (it shortens the K/V prefetch distance; see NOTES.md), so off here; the ping-pong build
    // ships as its own kernel, mma_bf16_d512_pp (../bf16_d512_pp/traits.h).
    static constexpr bool kPingPong = false;
    static constexpr int32_t kWarpGroups = 2;
    static constexpr int32_t kWarpsPerGroup = kWarps / kWarpGroups;
    // Independent accumulator chains per score n-tile in Q K^T (k-steps alternate between
    // them) to shorten the dependent mma.sync chain. 2 measured within 0.5% of 1 on the H200
    // and costs 8 registers (spills on some archs), so 1.
    static constexpr int32_t kQkChains = 1;

    // Key tiles and the shared-memory ring.
    static constexpr int32_t kTileKeys = 16;
    static constexpr int32_t kRingSlots = 5;  // see the issue schedule in mainloop.cuh
    static constexpr int32_t kElemBytes = 2;  // bf16
    static constexpr int32_t kChunkElems = kTileKeys * kHeadDim;
    static constexpr int32_t kChunkBytes = kChunkElems * kElemBytes;
    static constexpr int32_t kVecElems = 8;  // bf16 per 16-byte cp.async
    static constexpr int32_t kVecsPerRow = kHeadDim / kVecElems;
    static constexpr int32_t kVecBytes = kVecElems * kElemBytes;
    static constexpr int32_t kPairVecBytes = 2 * kVecBytes;                    // one ldmatrix k-step
    static constexpr int32_t kSwizzleSpanBytes = kSwizzleRows * kVecElems * kElemBytes;  // one XOR period

    // Fragment counts per warp.
    static constexpr int32_t kQkSteps = kDimsPerWarp / kMmaK;     // k-steps of Q K^T
    static constexpr int32_t kKeyNTiles = kTileKeys / kMmaN;      // n-tiles of the scores
    static constexpr int32_t kPvSteps = kTileKeys / kMmaK;        // k-steps of P V
    static constexpr int32_t kDimNTiles = kDimsPerWarp / kMmaN;   // n-tiles of O

    // Shared memory plan (byte offsets from the dynamic shared memory base): the ring, then the
    // partial-score exchange.
    static constexpr int32_t kRingBytes = kRingSlots * kChunkBytes;
    static constexpr int32_t kExchangeBytes = exchange_bytes(kTileKeys);
    struct SmemPlan {
        static constexpr int32_t kRing = 0;
        static constexpr int32_t kExchange = kRing + kRingBytes;
        static constexpr int32_t kBytes = kExchange + kExchangeBytes;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    // Softmax rescale: O and the row sums are rescaled whenever a row maximum grows by more than
    // this many powers of two. 0: at every growth, so the largest P of a row is exactly 1 and only
    // the smaller ones are rounded to bf16. With the softmax peaked (Gemma 4: QK-norm, scale 1.0)
    // the output is carried by a few keys and rounding the largest P (a lazy threshold of 8 lets
    // it reach 2^8) cost mean abs error 1.19x and max abs error 1.87x the tuned Triton peer's
    // (H200, 2026-12-01, tools/bench/peer_accuracy.py); 0 gives 1.00x for 1.1% at the 16k prompt
    // (BENCHMARKS.md, kernels/mma/NOTES.md).
    static constexpr float kRescaleThresholdLog2 = 0.0f;

    static constexpr int32_t kMinSm = 80;  // mma.sync bf16 and cp.async

    static_assert(kDimsPerWarp % (2 * kMmaK) == 0, "ldmatrix.x4 covers two k-steps of K");
    static_assert(kTileKeys % kMmaK == 0 && kKeyNTiles == 2 && kPvSteps == 1,
                  "score tile is one ldmatrix.x4 of K per k-step and one P fragment");
    static_assert(kRingSlots == 5, "both issue schedules of mainloop.cuh need exactly 5 slots");
    static_assert(kPageSizeMultiple % kTileKeys == 0, "block_size is only guaranteed to be a multiple of "
                                                      "kPageSizeMultiple: a key tile must never straddle a page");
    static_assert(kWarpsPerGroup * kWarpGroups == kWarps && kWarpsPerGroup % kDimSplit == 0,
                  "warp pairs never straddle the ping-pong groups");
    static_assert(kQkSteps % kQkChains == 0, "k-steps split evenly over the accumulator chains");
    static_assert(kSmemBytes <= kSmemLimitSm120, "must fit sm_120 / sm_89 / sm_86 shared memory");
    static_assert(kSmemBytes <= kSmemLimitSm80, "must fit sm_80 shared memory");

    static constexpr KernelDesc desc = prefill_desc("mma_bf16_d512", "wideattn_mma_bf16_d512", kBF16, kBF16,
                                                    kTileKeys, kSmemBytes, kMinSm, "varlen,paged,causal,gqa,lse,split_kv",
                                                    "wideattn_mma_bf16_d512_split");
};

}  // namespace wideattn
