// amax_e4m3.cuh - the body of the per-tensor e4m3 scale kernels of a bf16 [token][head][d]
// tensor (the "compute the scale" step before quantising K/V or Q): *scale =
// e4m3_scale_for_finite_amax(max |x|) over the finite inputs of every token whose slot is not
// negative, NaN/inf counted; with kPowerOfTwo that scale rounded up to a power of two
// (e4m3_power_of_two_scale). The entry points: amax_e4m3_kernel.cu (wideattn_compute_scale) and
// amax_e4m3_pow2_kernel.cu (wideattn_compute_scale_pow2).
//
// Deterministic without a second pass: the dispatcher first sets *scale to kE4m3MinScale (a
// memset on the same stream); each block reduces the bit patterns of its |x| (for non-negative
// floats the bits order like the values), turns its amax into a scale and raises *scale with
// atomicMax on the float's bits. amax -> scale is monotonic (a correctly rounded division and a
// max, then the round-up to a power of two), so the largest block scale is the scale of the
// tensor's amax: the CPU reference's bits (fp8/codec/quantize_reference.cpp) whatever order the
// blocks run in.
#pragma once

#include <cstdint>

#include "fp8/codec/e4m3.h"
#include "wideattn.h"
#include "fp8/quantize/amax_traits.h"

namespace wideattn::fp8::amax_detail {

constexpr uint32_t kFullWarp = 0xFFFFFFFFu;
constexpr int32_t kBf16ToFloatShift = 16;  // a bf16 is the top half of a float

}  // namespace wideattn::fp8::amax_detail

namespace wideattn::fp8 {

template <bool kPowerOfTwo>
__device__ __forceinline__ void amax_e4m3_body(const wideattn_scale_params& p) {
    using Traits = AmaxE4m3Traits;
    using amax_detail::kBf16ToFloatShift;
    using amax_detail::kFullWarp;
    __shared__ uint32_t warp_amax[Traits::kWarps];

    const int64_t first_token = int64_t{blockIdx.x} * Traits::kTokensPerBlock;
    const int64_t end_token = min(first_token + Traits::kTokensPerBlock, int64_t{p.tokens});
    const int64_t first = (int64_t{blockIdx.y} * Traits::kThreads + threadIdx.x) * Traits::kElemsPerThread;
    uint32_t amax_bits = 0;  // bits of the largest finite |x| seen by this thread
    int32_t nonfinite = 0;
    if (first < int64_t{p.heads} * p.head_dim) {
        const int64_t head = first / p.head_dim;
        const int64_t dim = first % p.head_dim;  // head_dim % 8 == 0: the 8 elements share a head
        const uint16_t* column = static_cast<const uint16_t*>(p.src) + head * p.src_head_stride + dim;
        for (int64_t token = first_token; token < end_token; ++token) {
            if (p.slot_mapping && p.slot_mapping[token] < 0) continue;  // padding
            const uint4 packed = *reinterpret_cast<const uint4*>(column + token * p.src_token_stride);
            const uint32_t words[] = {packed.x, packed.y, packed.z, packed.w};
#pragma unroll
            for (uint32_t word : words) {
                const uint32_t halves[] = {word << kBf16ToFloatShift, word & 0xFFFF0000u};
#pragma unroll
                for (uint32_t bits : halves) {
                    const uint32_t magnitude = bits & kFloatAbsMask;
                    if (magnitude >= kFloatInfBits)
                        ++nonfinite;
                    else
                        amax_bits = max(amax_bits, magnitude);
                }
            }
        }
    }
    // Every thread takes part in the reduction, including those past the last column.
    amax_bits = __reduce_max_sync(kFullWarp, amax_bits);
    const int32_t warp = threadIdx.x / Traits::kWarpSize;
    const int32_t lane = threadIdx.x % Traits::kWarpSize;
    if (lane == 0) warp_amax[warp] = amax_bits;
    __syncthreads();
    if (threadIdx.x == 0) {
        uint32_t block_amax = 0;
#pragma unroll
        for (int32_t w = 0; w < Traits::kWarps; ++w) block_amax = max(block_amax, warp_amax[w]);
        float scale = e4m3_scale_for_finite_amax(bits_float(block_amax));
        if constexpr (kPowerOfTwo) scale = e4m3_power_of_two_scale(scale);
        atomicMax(reinterpret_cast<unsigned int*>(p.scale), float_bits(scale));
    }
    if (nonfinite && p.nonfinite_count) atomicAdd(p.nonfinite_count, nonfinite);
}

}  // namespace wideattn::fp8
