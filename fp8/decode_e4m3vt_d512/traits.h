// traits.h - the single-token e4m3 decode kernel over the transposed V layout (kernels
// wideattn_decode_e4m3vt_d512 for bf16 Q and wideattn_decode_e4m3vtq_d512 for e4m3 Q, sm_90a):
// decode_e4m3_d512's block (fp8/decode_e4m3_d512/) with V read from a cache in the layout of
// WIDEATTN_FLAG_V_TRANSPOSED (kernels/common/v_transposed.h), the layout the Hopper-tier FP8
// prefill kernels read. A sub-tile of 16 keys is one interleaved group, so its V codes are
// head_dim rows of 16 bytes; a lane's 4 bytes of a dim row are exactly its A fragment pairs of
// O^T = V^T P^T (no ldmatrix, no byte permute), and O^T's m-tiles are 16 consecutive dims.
#pragma once

#include <cstdint>

#include "fp8/decode_e4m3_d512/traits.h"
#include "kernels/common/kernel_desc.h"
#include "kernels/common/v_transposed.h"

namespace wideattn {

struct DecodeE4m3VtD512Traits : DecodeE4m3D512Traits {
    static constexpr bool kVTransposed = true;

    // The O^T accumulator o[n] (e0, e1 at dim o_dim(n, g); e2, e3 kOHalfDims further): m-tile n
    // is dims 16n .. 16n + 15 (mainloop.cuh, subtile_pv_transposed).
    static constexpr int32_t kOHalfDims = kMmaM / 2;
    WIDEATTN_HOST_DEVICE static constexpr int32_t o_dim(int32_t n, int32_t g) { return kMmaM * n + g; }

    static_assert(kSubTileKeys == kVGroupSlots, "a sub-tile is one interleaved group of the transposed layout");
    static_assert(kChunkBytes == kHeadDim * kVGroupSlots, "a V chunk is head_dim rows of one group's 16 bytes");
    static_assert(kHeadDim % kWarpSize == 0, "a lane copies the same number of dim rows");

    static constexpr KernelDesc desc = {
        "decode_e4m3vt_d512", "wideattn_decode_e4m3vt_d512",
        kBF16, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,v_transposed,split_kv,single_token", kKindPrefill,
        "wideattn_decode_e4m3vt_d512_split"};
};

// The same kernel for Q already in e4m3 with a per-tensor *q_scale (kernel_q.cu).
struct DecodeE4m3VtQD512Traits : DecodeE4m3VtD512Traits {
    static constexpr KernelDesc desc = {
        "decode_e4m3vtq_d512", "wideattn_decode_e4m3vtq_d512",
        kE4M3, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,fp8_q,v_transposed,split_kv,single_token", kKindPrefill,
        "wideattn_decode_e4m3vtq_d512_split"};
};

}  // namespace wideattn
