// mma_peak.cu - register-only mma.sync m16n8k16 bf16 loop: measures the tensor rate the mma
// tier can reach on this GPU, so `wideattn bench` reports "% of mma.sync rate" from a ceiling
// measured in the same run. Operands come from global memory (random, never zeros) and the
// accumulators are stored, so nothing is optimised away.
#include <cstdint>

#include "kernels/common/ptx_mma.cuh"

namespace {
constexpr int kChains = 8;  // independent accumulators per warp: enough to cover mma latency
}

extern "C" __global__ void __launch_bounds__(256) wideattn_mma_peak(const uint32_t* operands, float* out,
                                                                    int32_t iterations) {
    using wideattn::ptx::mma_bf16_16816;
    const int lane = threadIdx.x % 32;
    uint32_t a[4];
    for (int i = 0; i < 4; ++i) a[i] = operands[lane * 6 + i];
    const uint32_t b0 = operands[lane * 6 + 4], b1 = operands[lane * 6 + 5];
    float acc[kChains][4] = {};
    for (int32_t it = 0; it < iterations; ++it) {
#pragma unroll
        for (int c = 0; c < kChains; ++c) mma_bf16_16816(acc[c], a, b0, b1);
    }
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kChains; ++c) sum += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
