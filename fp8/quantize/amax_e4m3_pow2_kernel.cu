// amax_e4m3_pow2_kernel.cu - amax_e4m3_pow2: amax_e4m3's scale rounded up to a power of two
// (wideattn_compute_scale_pow2); the body is amax_e4m3.cuh's.
#include "fp8/quantize/amax_e4m3.cuh"

extern "C" __global__ void __launch_bounds__(wideattn::fp8::AmaxE4m3Pow2Traits::kThreads)
wideattn_amax_e4m3_pow2(const wideattn_scale_params p) {
    wideattn::fp8::amax_e4m3_body<true>(p);
}
