// online_softmax.cuh - the O accumulator functions, the online-softmax state and the lazy rescale
// shared by every prefill tier (mma BF16 and 8-bit, Hopper BF16 and 8-bit): scores in log2 units,
// ex2.approx, and a warp-uniform rescale of O and the row sums whenever a row maximum grows past
// Traits::kRescaleThresholdLog2. A thread holds two rows (row g and row g + 8 of its warp's 16)
// in the m16n8 accumulator layout, which the wgmma accumulators share.
#pragma once

#include <cstdint>

namespace wideattn {

constexpr float kLog2e = 1.4426950408889634f;  // scores are kept in log2 units: exp(x) = 2^(x log2 e)

__device__ __forceinline__ float fast_exp2(float x) {
    float y;
    asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
    return y;
}

// Online-softmax state of the thread's two rows (row g and row g + 8 of its m-tile).
struct RowState {
    float max_log2[2];  // running maximum of the scaled scores, log2 units (lazily updated)
    float sum[2];       // this thread's part of the row sum of 2^(score - max) (times the kernel's P scale)
};

// Completes row r's sum over the four lanes that share the row; stores it in state.sum[r] and
// returns it.
__device__ __forceinline__ float reduce_row_sum(RowState& state, int32_t r) {
    constexpr uint32_t kFullMask = 0xffffffffu;
    float total = state.sum[r];
    total += __shfl_xor_sync(kFullMask, total, 1);
    total += __shfl_xor_sync(kFullMask, total, 2);
    state.sum[r] = total;
    return total;
}

// Natural-log LSE of a row whose sum is of 2^(score - base_log2); -inf for an empty row (sum 0),
// NaN for a row whose sum is NaN (a NaN or +inf score: docs/design.md "Non-finite inputs"), so a
// split-KV merge can tell the two apart.
__device__ __forceinline__ float row_lse(float base_log2, float sum) {
    constexpr float kLn2 = 0.6931471805599453f;
    return sum == 0.0f ? -INFINITY : base_log2 * kLn2 + logf(sum);
}

// 1 / sum of a row's softmax sum for normalising O: 0 for an empty row (whose O is 0), NaN for
// a NaN sum, so a NaN row stays NaN whatever its O holds.
__device__ __forceinline__ float inverse_row_sum(float sum, float numerator = 1.0f) {
    return sum == 0.0f ? 0.0f : numerator / sum;
}

// Clears the O accumulator (the thread's kNTiles 8-column quads).
template <int32_t kNTiles>
__device__ __forceinline__ void zero_output(float (&o)[kNTiles][4]) {
#pragma unroll
    for (int32_t n = 0; n < kNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) o[n][e] = 0.0f;
}

// Multiplies the O accumulator's row g values (elements 0, 1 of each 8-column quad) by alpha[0]
// and its row g + 8 values (elements 2, 3) by alpha[1].
template <int32_t kNTiles>
__device__ __forceinline__ void rescale_output(float (&o)[kNTiles][4], const float (&alpha)[2]) {
#pragma unroll
    for (int32_t n = 0; n < kNTiles; ++n) {
        o[n][0] *= alpha[0];
        o[n][1] *= alpha[0];
        o[n][2] *= alpha[1];
        o[n][3] *= alpha[1];
    }
}

// Raises the running maxima to tile_max when any row of the warp grew by more than the threshold
// (warp-uniform decision), scaling the sums by alpha; returns whether it did, in which case O must
// be multiplied by alpha (row g, row g + 8) before it accumulates this tile.
template <class Traits>
__device__ __forceinline__ bool raise_max_if_grown(const float (&tile_max)[2], RowState& state, float (&alpha)[2]) {
    constexpr uint32_t kFullMask = 0xffffffffu;
    const bool grows = tile_max[0] > state.max_log2[0] + Traits::kRescaleThresholdLog2 ||
                       tile_max[1] > state.max_log2[1] + Traits::kRescaleThresholdLog2;
    const bool rescale = __any_sync(kFullMask, grows);
    if (rescale) {
#pragma unroll
        for (int32_t r = 0; r < 2; ++r) {
            const float updated = fmaxf(state.max_log2[r], tile_max[r]);
            alpha[r] = updated == -INFINITY ? 1.0f : fast_exp2(state.max_log2[r] - updated);
            state.max_log2[r] = updated;
            state.sum[r] *= alpha[r];
        }
    }
    return rescale;
}

// raise_max_if_grown, then O rescaled at once (the mma tier: no asynchronous writer of O).
template <class Traits>
__device__ __forceinline__ void rescale_if_grown(const float (&tile_max)[2], float (&o)[Traits::kDimNTiles][4],
                                                 RowState& state) {
    float alpha[2];
    if (raise_max_if_grown<Traits>(tile_max, state, alpha)) rescale_output(o, alpha);
}

}  // namespace wideattn
