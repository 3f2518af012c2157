// traits.h - compile-time constants of the fp64 reference attention kernel.
// Read by kernel.cu and by the manifest generator (tools/build/manifest_gen.cpp).
#pragma once

#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct ReferenceF64Traits {
    static constexpr int32_t kThreads = 256;
    static constexpr int32_t kWarps = kThreads / 32;
    static constexpr int32_t kMaxHeadDim = 512;
    static constexpr int32_t kHeadDimStep = 32;  // one element per lane per step of a dot product
    static constexpr int32_t kMaxHeadsPerBlock = kWarps;  // warp w computes the scores of head w
    static constexpr int32_t kKeysPerChunk = 32;
    static constexpr int32_t kDimsPerLane = kMaxHeadDim / 32;
    static constexpr int32_t kAccPerThread = kMaxHeadsPerBlock * kMaxHeadDim / kThreads;

    // Dynamic shared memory: one chunk of K and of V (bf16), the chunk's probabilities
    // (fp64, per head), and the per-head softmax state.
    static constexpr int32_t kKvChunkBytes = kKeysPerChunk * kMaxHeadDim * 2;
    static constexpr int32_t kProbBytes = kMaxHeadsPerBlock * kKeysPerChunk * 8;
    static constexpr int32_t kStateArrayBytes = kMaxHeadsPerBlock * 8;  // one double per head
    static constexpr int32_t kStateBytes = 3 * kStateArrayBytes;       // running max, sum, rescale
    // Shared memory plan (byte offsets from the dynamic shared memory base). The K and V chunks
    // are [kKeysPerChunk][head_dim] at the call's head dim, V right behind K, inside kKvChunks.
    struct SmemPlan {
        static constexpr int32_t kKvChunks = 0;
        static constexpr int32_t kProbs = kKvChunks + 2 * kKvChunkBytes;  // [head][key]
        static constexpr int32_t kRunningMax = kProbs + kProbBytes;
        static constexpr int32_t kRunningSum = kRunningMax + kStateArrayBytes;
        static constexpr int32_t kRescale = kRunningSum + kStateArrayBytes;
        static constexpr int32_t kBytes = kRescale + kStateArrayBytes;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static constexpr int32_t kMinSm = 80;  // plain fp64 arithmetic: the lowest arch the bundle builds

    static_assert(kMaxHeadDim % kHeadDimStep == 0, "head dim bound must be a whole number of steps");
    static_assert(kMaxHeadsPerBlock * kMaxHeadDim % kThreads == 0, "accumulators must split evenly");
    static_assert(kSmemBytes == 2 * kKvChunkBytes + kProbBytes + kStateBytes, "the plan holds every region once");
    static_assert(kSmemBytes <= kSmemLimitSm120, "reference kernel must fit sm_120/sm_86 shared memory");

    static constexpr KernelDesc desc = {
        "reference_f64", "wideattn_reference_f64",
        kBF16, kBF16, kF64,
        kHeadDimStep, kMaxHeadDim, kHeadDimStep,
        1, 1 << 16,
        1, kKeysPerChunk, kMaxHeadsPerBlock, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,any_group,fp64_output,k_from_v", kKindPrefill};
};

}  // namespace wideattn
