// merge.cuh - the body of the split-KV merge kernels (merge_splits_bf16, merge_splits_bf16_rows;
// workspace layout: kernels/common/kernel_desc.h). For row (token, head) with split results (O_s,
// LSE_s), s = 0 .. num_splits-1: m = max LSE_s, w_s = exp(LSE_s - m), o = sum w_s O_s / sum w_s,
// lse = m + log sum w_s; a row whose splits all saw no key (m = -inf) gets zeros and -inf, a row
// with any NaN split LSE (that split met a NaN or +inf score) gets NaN in o and lse, as the
// unsplit kernels give it (docs/design.md "Non-finite inputs"). The splits are summed in index
// order by every lane and the weight sum reduced in a fixed butterfly, so the result depends on
// the inputs alone, and both kernels give the same bits: they differ only in how many warps share
// a row (Traits::kWarpsPerRow, each its own dims) and how many splits' loads a warp has in flight.
//
// On sm_90 and later the dispatcher launches them as a programmatic dependent launch of the split
// kernel (dispatch/dependent_launch.h; WIDEATTN_PDL=0 turns that off): their blocks may start
// while the split kernel's last blocks still run, so everything before
// ptx::wait_prerequisite_grids (griddepcontrol.wait) uses the params alone, and every read of the
// workspace and write of o and lse comes after it. Launched without the attribute (sm_89, a driver
// without cuLaunchKernelEx, WIDEATTN_PDL=0) the wait returns at once; the arithmetic is the same
// either way.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/common/kernel_desc.h"
#include "kernels/common/ptx_griddep.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "wideattn.h"

namespace wideattn::merge {

constexpr uint32_t kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_max(float x) {
#pragma unroll
    for (int32_t offset = 16; offset > 0; offset /= 2) x = fmaxf(x, __shfl_xor_sync(kFullMask, x, offset));
    return x;
}

__device__ __forceinline__ float warp_sum(float x) {
#pragma unroll
    for (int32_t offset = 16; offset > 0; offset /= 2) x += __shfl_xor_sync(kFullMask, x, offset);
    return x;
}

// The block's rows: warp w merges dims [kDimsPerWarp x (w % kWarpsPerRow), + kDimsPerWarp) of row
// blockIdx.x x kRowsPerBlock + w / kWarpsPerRow.
template <class Traits>
__device__ __forceinline__ void merge_rows(const wideattn_prefill_params& p) {
    const int32_t lane = threadIdx.x % Traits::kWarpSize;
    const int32_t warp = threadIdx.x / Traits::kWarpSize;
    const int64_t rows = static_cast<int64_t>(p.total_q) * p.num_q_heads;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * Traits::kRowsPerBlock + warp / Traits::kWarpsPerRow;
    if (row >= rows) return;
    const int32_t dim0 = (warp % Traits::kWarpsPerRow) * Traits::kDimsPerWarp;
    const int32_t splits = p.num_splits;
    const float* lse_parts = reinterpret_cast<const float*>(
        static_cast<const char*>(p.workspace) + split_lse_offset(splits, p.total_q, p.num_q_heads, p.head_dim));
    const float* o_parts = static_cast<const float*>(p.workspace);
    // The split kernel's partials are complete and visible past this point.
    ptx::wait_prerequisite_grids();
    if constexpr (Traits::kTriggersEarly) ptx::allow_dependent_launch();

    // Traits::kEarlyLoads: the partial O rows of splits 0 .. kSplitsInFlight - 1 loaded before the
    // LSEs arrive (whether or not a split saw a key of the row: a row of every split lies in the
    // workspace), so that both loads take one memory latency instead of one after the other; a
    // split whose LSE is -inf still adds nothing below.
    float4 early[Traits::kEarlyLoads ? Traits::kSplitsInFlight : 1][Traits::kVecsPerLane];
    if constexpr (Traits::kEarlyLoads) {
#pragma unroll
        for (int32_t u = 0; u < Traits::kSplitsInFlight; ++u) {
            const float* part = o_parts + (static_cast<int64_t>(u) * rows + row) * p.head_dim + dim0;
#pragma unroll
            for (int32_t v = 0; v < Traits::kVecsPerLane; ++v)
                early[u][v] = u < splits ? *reinterpret_cast<const float4*>(
                                               part + (v * Traits::kWarpSize + lane) * Traits::kVecFloats)
                                         : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
    }

    // Every split's LSE in registers first (lane l holds splits l, l + 32, ...), so that the
    // loads of the partial O rows below depend on no loaded value and go out kSplitsInFlight at a
    // time: a batch-1 decode merges 32 or more splits per row, and a load chain per split would
    // cost a memory latency each.
    float lse_own[Traits::kLsePerLane];
#pragma unroll
    for (int32_t i = 0; i < Traits::kLsePerLane; ++i) {
        const int32_t s = lane + i * Traits::kWarpSize;
        lse_own[i] = s < splits ? lse_parts[s * rows + row] : -INFINITY;
    }
    float m = -INFINITY;
    bool nan_split = false;
#pragma unroll
    for (int32_t i = 0; i < Traits::kLsePerLane; ++i) {
        m = fmaxf(m, lse_own[i]);  // fmaxf drops a NaN: nan_split keeps it
        nan_split = nan_split || isnan(lse_own[i]);
    }
    m = __any_sync(kFullMask, nan_split) ? NAN : warp_max(m);
    // exp(LSE_s - m) by the lane holding split s, in the order of s within the lane.
    float w_own[Traits::kLsePerLane];
    float weights = 0.0f;
#pragma unroll
    for (int32_t i = 0; i < Traits::kLsePerLane; ++i) {
        w_own[i] = expf(lse_own[i] - m);
        if (m != -INFINITY && lane + i * Traits::kWarpSize < splits) weights += w_own[i];
    }
    weights = warp_sum(weights);

    float acc[Traits::kDimsPerLane] = {};
    if (m != -INFINITY) {
#pragma unroll
        for (int32_t i = 0; i < Traits::kLsePerLane; ++i) {
            for (int32_t t = 0; t < Traits::kWarpSize; t += Traits::kSplitsInFlight) {
                const int32_t first = i * Traits::kWarpSize + t;
                if (first >= splits) break;
                float w[Traits::kSplitsInFlight];
                bool used[Traits::kSplitsInFlight];
                float4 x[Traits::kSplitsInFlight][Traits::kVecsPerLane];
#pragma unroll
                for (int32_t u = 0; u < Traits::kSplitsInFlight; ++u) {
                    // A split that saw no key of this row (LSE -inf) adds nothing: its O is not read.
                    const float lse = __shfl_sync(kFullMask, lse_own[i], t + u);
                    w[u] = __shfl_sync(kFullMask, w_own[i], t + u);
                    used[u] = first + u < splits && lse != -INFINITY;
                    const float* part = o_parts + (static_cast<int64_t>(first + u) * rows + row) * p.head_dim + dim0;
#pragma unroll
                    for (int32_t v = 0; v < Traits::kVecsPerLane; ++v) {
                        if (Traits::kEarlyLoads && first == 0)
                            x[u][v] = early[Traits::kEarlyLoads ? u : 0][v];
                        else
                            x[u][v] = used[u] ? *reinterpret_cast<const float4*>(
                                                    part + (v * Traits::kWarpSize + lane) * Traits::kVecFloats)
                                              : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
                    }
                }
#pragma unroll
                for (int32_t u = 0; u < Traits::kSplitsInFlight; ++u) {
                    if (!used[u]) continue;
#pragma unroll
                    for (int32_t v = 0; v < Traits::kVecsPerLane; ++v) {
                        acc[v * Traits::kVecFloats + 0] += w[u] * x[u][v].x;
                        acc[v * Traits::kVecFloats + 1] += w[u] * x[u][v].y;
                        acc[v * Traits::kVecFloats + 2] += w[u] * x[u][v].z;
                        acc[v * Traits::kVecFloats + 3] += w[u] * x[u][v].w;
                    }
                }
            }
        }
    }
    // m NaN: every w_s and the sum are NaN, and so is each O element (the NaN split is summed),
    // which inv = 0 keeps NaN. (A division that may see NaN makes ptxas keep its slow path, with
    // a stack frame and spills on sm_120a.)
    const float inv = weights > 0.0f ? 1.0f / weights : 0.0f;
    const int64_t token = row / p.num_q_heads;
    const int32_t head = static_cast<int32_t>(row % p.num_q_heads);
    __nv_bfloat16* out =
        static_cast<__nv_bfloat16*>(p.o) + token * p.o_token_stride + head * p.o_head_stride + dim0;
#pragma unroll
    for (int32_t v = 0; v < Traits::kVecsPerLane; ++v) {
        const float* a = acc + v * Traits::kVecFloats;
        uint2 packed;
        packed.x = ptx::pack_bf16x2(a[0] * inv, a[1] * inv);
        packed.y = ptx::pack_bf16x2(a[2] * inv, a[3] * inv);
        *reinterpret_cast<uint2*>(out + (v * Traits::kWarpSize + lane) * Traits::kVecFloats) = packed;
    }
    if (p.lse != nullptr && lane == 0 && dim0 == 0)
        static_cast<float*>(p.lse)[head * p.lse_head_stride + token] = weights == 0.0f ? -INFINITY : m + logf(weights);
}

}  // namespace wideattn::merge
