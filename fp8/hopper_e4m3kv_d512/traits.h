// traits.h - compile-time constants of the Hopper-tier prefill kernel for bf16 Q over an e4m3
// K/V cache, head dim 512, GQA group 8 (kernel wideattn_wgmma_e4m3kv_d512, sm_90a only): the
// traits of the 8-bit kernel wgmma_e4m3q_d512 (fp8/hopper_e4m3q_d512/traits.h), whose loads, key
// loop and epilogue it runs, plus the block's Q scale: Q is read as bf16 and quantised to e4m3 in
// the kernel with one scale per block (quantize_q.cuh), which needs a few words of shared memory
// for the block-wide maximum. BlockQuantizedQTraits adds that to any e4m3-Q Hopper kernel's
// traits (also wgmma_e4m3pvkv_d512's, fp8/hopper_e4m3pvkv_d512/traits.h).
#pragma once

#include "fp8/hopper_e4m3q_d512/traits.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {

// The traits of an e4m3-Q Hopper kernel `CodeQ` (which names its Q codes' kCodeBytes and
// kCodeVecsPerGroupRow) with what quantize_q.cuh reads for a bf16 Q: the source element size,
// the warps' maxima after CodeQ's shared-memory plan.
template <class CodeQ>
struct BlockQuantizedQTraits : CodeQ {
    using CodeQTraits = CodeQ;

    static constexpr int32_t kQElemBytes = 2;  // bf16 Q in global memory
    static constexpr int32_t kQSourceVecsPerCodeVec =
        (CodeQ::kVecBytes / CodeQ::kCodeBytes) * kQElemBytes / CodeQ::kVecBytes;
    static constexpr int32_t kWarps = CodeQ::kThreads / CodeQ::kWarpSize;
    static constexpr int32_t kAmaxSlotBytes = 4;  // one float per warp

    // CodeQ's plan, then the warps' Q maxima.
    struct SmemPlan : CodeQ::SmemPlan {
        static constexpr int32_t kQAmax = CodeQ::SmemPlan::kEnd;
        static constexpr int32_t kEnd = kQAmax + kWarps * kAmaxSlotBytes;
        static constexpr int32_t kBytes = kEnd + CodeQ::kSmemAlign;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static_assert(SmemPlan::kQAmax % CodeQ::kVecBytes == 0, "the maxima are read as 16-byte vectors");
    static_assert(kWarps * kAmaxSlotBytes % CodeQ::kVecBytes == 0, "whole 16-byte vectors of maxima");
    static_assert(kQSourceVecsPerCodeVec == 2, "a 16-byte vector of codes is two 16-byte vectors of bf16");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");
};

struct WgmmaE4m3KvD512Traits : BlockQuantizedQTraits<WgmmaE4m3QD512Traits> {
    static constexpr KernelDesc desc = {
        "wgmma_e4m3kv_d512", "wideattn_wgmma_e4m3kv_d512",
        kBF16, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,split_kv", kKindPrefill, "wideattn_wgmma_e4m3kv_d512_split"};
};

}  // namespace wideattn
