// wgmma_peak_e4m3.cu - the dense FP8 wgmma rate (m64n256k32 e4m3, f32 accumulators) on sm_90a,
// the ceiling `wideattn bench` reports the 8-bit kernels' prefill TFLOP/s against (body:
// wgmma_peak.cuh).
#include "tools/bench/wgmma_peak.cuh"

namespace {
using namespace wideattn;

struct E4m3Op {
    static __device__ __forceinline__ void mma(float (&acc)[32][4], hopper::SmemDescriptor a,
                                               hopper::SmemDescriptor b) {
        ptx::wgmma_m64n256k32_e4m3_ss(acc, a, b);
    }
    // Four e4m3 codes: random sign and mantissa, exponent field 6 or 7 (0.5 .. 1.875).
    static __device__ __forceinline__ uint32_t pattern(uint32_t h) { return (h & 0x8F8F8F8Fu) | 0x30303030u; }
};
}  // namespace

extern "C" __global__ void __launch_bounds__(probe::kWgmmaThreads, 1) wideattn_wgmma_peak_e4m3(float* out,
                                                                                           int32_t iterations) {
    probe::wgmma_peak_body<E4m3Op>(out, iterations);
}
