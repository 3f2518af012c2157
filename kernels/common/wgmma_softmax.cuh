// wgmma_softmax.cuh - the online softmax step of the Hopper-tier kernels (exp2; O rescaled when a
// row maximum grows past the kernel's kRescaleThresholdLog2: 0, every growth, in the bf16 kernels,
// 8 in wgmma_e4m3q_d512; as the mma tier: online_softmax.cuh) on a 64 x 32 score tile held in the wgmma accumulator
// layout, writing P as the 16-bit A fragments of the P V wgmmas (bf16 or fp16 pairs); its
// exponent part (exponentiate_scores) also serves wgmma_e4m3pv_d512's e4m3 P, and its two halves
// (score_row_maxima, exponentiate_from_maxima) wgmma_e4m3alt_d512, which trades the maxima
// between them. `Traits` is a kernel's traits (a WgmmaD512BlockTraits).
#pragma once

#include <cstdint>
#include <cuda_fp16.h>

#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_mma.cuh"

namespace wideattn::hopper {

// The scale argument of exchange_scores or softmax_step when the other one applies the scale.
constexpr float kUnitScale = 1.0f;

// P fragments as bf16 pairs (the bf16 kernel) or fp16 pairs (the e4m3 kernel's fp16 P V).
struct PackBf16 {
    __device__ static __forceinline__ uint32_t pack(float low, float high) { return ptx::pack_bf16x2(low, high); }
};
struct PackF16 {
    __device__ static __forceinline__ uint32_t pack(float low, float high) {
        const __half2 packed = __floats2half2_rn(low, high);
        return *reinterpret_cast<const uint32_t*>(&packed);
    }
};

// The row maxima of the thread's two rows (g, g + 8) of a score tile, over the quad of lanes
// sharing them; kFoldScale: s is unscaled and the maxima are multiplied by `scale` (> 0: for
// scale > 0, max(s) * scale rounds to max(s * scale)).
template <class Traits, bool kFoldScale>
__device__ __forceinline__ void score_row_maxima(const float (&s)[Traits::kKeyNTiles][4], float scale,
                                                 float (&tile_max)[2]) {
    constexpr uint32_t kFullMask = 0xffffffffu;
#pragma unroll
    for (int32_t r = 0; r < 2; ++r) {
        float m = -INFINITY;
#pragma unroll
        for (int32_t n = 0; n < Traits::kKeyNTiles; ++n) m = fmaxf(m, fmaxf(s[n][2 * r], s[n][2 * r + 1]));
        m = fmaxf(m, __shfl_xor_sync(kFullMask, m, 1));
        m = fmaxf(m, __shfl_xor_sync(kFullMask, m, 2));
        tile_max[r] = kFoldScale ? m * scale : m;
    }
}

// s replaced by P = 2^(s - max + prob_scale_log2) against the running maxima of `state`, added to
// its row sums; kFoldScale: s is unscaled and each exp2 argument is one fused s * scale - max.
// Only the 8-column quads [kFrom, kTo) (default: all), so that a caller can run the tile in parts.
template <class Traits, bool kFoldScale, int32_t kFrom = 0, int32_t kTo = Traits::kKeyNTiles>
__device__ __forceinline__ void exponentiate_from_maxima(float (&s)[Traits::kKeyNTiles][4], float scale,
                                                         RowState& state, float prob_scale_log2) {
    static_assert(0 <= kFrom && kFrom <= kTo && kTo <= Traits::kKeyNTiles, "quads of the tile");
    float base[2];
#pragma unroll
    for (int32_t r = 0; r < 2; ++r)
        base[r] = state.max_log2[r] == -INFINITY ? 0.0f : state.max_log2[r] - prob_scale_log2;
#pragma unroll
    for (int32_t n = kFrom; n < kTo; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) {
            s[n][e] = fast_exp2(kFoldScale ? fmaf(s[n][e], scale, -base[e / 2]) : s[n][e] - base[e / 2]);
            state.sum[e / 2] += s[n][e];
        }
}

// The exponent part of the online-softmax step: the tile's row maxima, the rescale decision
// (warp-uniform; both warpgroups decide alike since their scores are bitwise equal), and s
// replaced by P = 2^(s - max + prob_scale_log2) with the row sums updated. Returns whether O must
// be multiplied by alpha (row g, row g + 8) before the next P V; the caller does that once no
// wgmma writes O any more. kFoldScale: s is unscaled and `scale` (> 0) is applied here, to the
// row maxima and in each exp2 argument (the 8-bit kernels: 2% faster there, commit 328e0c0);
// otherwise s is already scaled by exchange_scores and `scale` is unused (the bf16 kernel:
// folding measured 0.7% slower). prob_scale_log2 lifts P into the range of an 8-bit P
// (wgmma_e4m3pv_d512: 8); 0 elsewhere.
template <class Traits, bool kFoldScale>
__device__ __forceinline__ bool exponentiate_scores(float (&s)[Traits::kKeyNTiles][4], float scale, RowState& state,
                                                    float (&alpha)[2], float prob_scale_log2 = 0.0f) {
    float tile_max[2];
    score_row_maxima<Traits, kFoldScale>(s, scale, tile_max);
    const bool rescale = raise_max_if_grown<Traits>(tile_max, state, alpha);
    exponentiate_from_maxima<Traits, kFoldScale>(s, scale, state, prob_scale_log2);
    return rescale;
}

// P (s after exponentiation) written as the 16-bit A fragments of the P V wgmmas.
template <class Traits, class PackPair = PackBf16>
__device__ __forceinline__ void pack_probs(const float (&s)[Traits::kKeyNTiles][4],
                                           uint32_t (&prob)[Traits::kPvSteps][4]) {
#pragma unroll
    for (int32_t kk = 0; kk < Traits::kPvSteps; ++kk) {
        prob[kk][0] = PackPair::pack(s[2 * kk][0], s[2 * kk][1]);
        prob[kk][1] = PackPair::pack(s[2 * kk][2], s[2 * kk][3]);
        prob[kk][2] = PackPair::pack(s[2 * kk + 1][0], s[2 * kk + 1][1]);
        prob[kk][3] = PackPair::pack(s[2 * kk + 1][2], s[2 * kk + 1][3]);
    }
}

// Online softmax step: exponentiate_scores, then P written as the 16-bit A
// fragments of the P V wgmmas; returns whether O must be multiplied by alpha before the next P V.
template <class Traits, class PackPair = PackBf16, bool kFoldScale = false>
__device__ __forceinline__ bool softmax_step(float (&s)[Traits::kKeyNTiles][4], float scale, RowState& state,
                                             uint32_t (&prob)[Traits::kPvSteps][4], float (&alpha)[2]) {
    const bool rescale = exponentiate_scores<Traits, kFoldScale>(s, scale, state, alpha);
    pack_probs<Traits, PackPair>(s, prob);
    return rescale;
}

}  // namespace wideattn::hopper
