// wgmma_peak_bf16.cu - the dense bf16 wgmma rate (m64n256k16 bf16, f32 accumulators) on sm_90a,
// the ceiling `wideattn bench` reports the bf16 Hopper-tier kernels against (body:
// wgmma_peak.cuh).
#include "tools/bench/wgmma_peak.cuh"

namespace {
using namespace wideattn;

struct Bf16Op {
    static __device__ __forceinline__ void mma(float (&acc)[32][4], hopper::SmemDescriptor a,
                                               hopper::SmemDescriptor b) {
        WIDEATTN_WGMMA_PV_SS("m64n256k16.f32.bf16.bf16", ", 0, 0", acc, a, b);
    }
    // Two bf16: random sign and top mantissa bits, exponent 126 or 127 (0.5 .. 1.99).
    static __device__ __forceinline__ uint32_t pattern(uint32_t h) { return (h & 0x80FF80FFu) | 0x3F003F00u; }
};
}  // namespace

extern "C" __global__ void __launch_bounds__(probe::kWgmmaThreads, 1) wideattn_wgmma_peak_bf16(float* out,
                                                                                           int32_t iterations) {
    probe::wgmma_peak_body<Bf16Op>(out, iterations);
}
