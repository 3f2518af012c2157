// traits.h - compile-time constants of the Hopper-tier FP8 P V prefill kernel for bf16 Q over an
// e4m3 cache whose V pages are transposed (kernel wideattn_wgmma_e4m3pvkv_d512, sm_90a only): the
// traits of wgmma_e4m3pv_d512 (fp8/hopper_e4m3pv_d512/traits.h), whose block it runs, plus what
// the in-kernel quantisation of Q needs (fp8/hopper_e4m3kv_d512/quantize_q.cuh): Q read as bf16
// and quantised to e4m3 with one scale per block, the warps' maxima in a few words of shared
// memory.
#pragma once

#include "fp8/hopper_e4m3pv_d512/traits.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct WgmmaE4m3PvKvD512Traits : WgmmaE4m3PvD512Traits {
    using CodeQTraits = WgmmaE4m3PvD512Traits;

    // The names quantize_q.cuh reads.
    static constexpr int32_t kCodeBytes = kElemBytes;  // e4m3
    static constexpr int32_t kCodeVecsPerGroupRow = kHeadDim * kCodeBytes / kVecBytes / kWarpGroups;
    static constexpr int32_t kQElemBytes = 2;  // bf16 Q in global memory
    static constexpr int32_t kQSourceVecsPerCodeVec = (kVecBytes / kCodeBytes) * kQElemBytes / kVecBytes;
    static constexpr int32_t kWarps = kThreads / kWarpSize;
    static constexpr int32_t kAmaxSlotBytes = 4;  // one float per warp

    // The FP8 P V kernel's plan, then the warps' Q maxima.
    struct SmemPlan : CodeQTraits::SmemPlan {
        static constexpr int32_t kQAmax = CodeQTraits::SmemPlan::kEnd;
        static constexpr int32_t kEnd = kQAmax + kWarps * kAmaxSlotBytes;
        static constexpr int32_t kBytes = kEnd + kSmemAlign;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static_assert(SmemPlan::kQAmax % kVecBytes == 0, "the maxima are read as 16-byte vectors");
    static_assert(kWarps * kAmaxSlotBytes % kVecBytes == 0, "whole 16-byte vectors of maxima");
    static_assert(kQSourceVecsPerCodeVec == 2, "a 16-byte vector of codes is two 16-byte vectors of bf16");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "wgmma_e4m3pvkv_d512", "wideattn_wgmma_e4m3pvkv_d512",
        kBF16, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,tma_kv,v_transposed,split_kv", kKindPrefill,
        "wideattn_wgmma_e4m3pvkv_d512_split"};
};

}  // namespace wideattn
