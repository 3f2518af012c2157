// mma_peak_e4m3.cu - mma.sync m16n8k32 e4m3 throughput probe for `wideattn bench --kv-dtype
// e4m3`, the ceiling the 8-bit kernel is compared with. Two operand modes:
//   streamed = 0: register-only (A and B loaded once, like mma_peak.cu's bf16 probe);
//   streamed = 1: B read from shared memory before every mma, as the attention kernel feeds K
//                 and V, so any per-operand work the compiler attaches to the mma (on sm_90,
//                 which has no e4m3 mma.sync unit, the e4m3 -> f16 unpacking) stays in the loop.
// Operands are random e4m3 codes (no NaN) from global memory and the accumulators are stored,
// so nothing is optimised away.
#include <cstdint>

#include "kernels/common/ptx_mma.cuh"

namespace {
constexpr int kChains = 8;           // independent accumulators per warp (as mma_peak.cu)
constexpr int kStreamedWords = 64;   // B words per lane kept in shared memory (streamed mode)
constexpr int kWarpSize = 32;
constexpr int kThreads = 256;
}

extern "C" __global__ void __launch_bounds__(kThreads) wideattn_mma_peak_e4m3(const uint32_t* operands, float* out,
                                                                           int32_t iterations, int32_t streamed) {
    using wideattn::ptx::mma_e4m3_16832;
    __shared__ uint32_t b_words[kStreamedWords][kWarpSize];
    const int lane = threadIdx.x % kWarpSize;
    uint32_t a[4];
    for (int i = 0; i < 4; ++i) a[i] = operands[lane * 6 + i];
    const uint32_t b0 = operands[lane * 6 + 4], b1 = operands[lane * 6 + 5];
    for (int w = threadIdx.x / kWarpSize; w < kStreamedWords; w += kThreads / kWarpSize)
        b_words[w][lane] = operands[(w * kWarpSize + lane) % (kWarpSize * 6)];
    __syncthreads();
    float acc[kChains][4] = {};
    if (streamed) {
        for (int32_t it = 0; it < iterations; ++it) {
#pragma unroll
            for (int c = 0; c < kChains; ++c) {
                const int w = (it * kChains + 2 * c) % kStreamedWords;
                mma_e4m3_16832(acc[c], a, b_words[w][lane], b_words[w + 1][lane]);
            }
        }
    } else {
        for (int32_t it = 0; it < iterations; ++it) {
#pragma unroll
            for (int c = 0; c < kChains; ++c) mma_e4m3_16832(acc[c], a, b0, b1);
        }
    }
    float sum = 0.0f;
#pragma unroll
    for (int c = 0; c < kChains; ++c) sum += acc[c][0] + acc[c][1] + acc[c][2] + acc[c][3];
    out[blockIdx.x * blockDim.x + threadIdx.x] = sum;
}
