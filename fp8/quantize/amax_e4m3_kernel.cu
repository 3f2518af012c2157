// amax_e4m3_kernel.cu - amax_e4m3: the per-tensor e4m3 scale max(amax / 448, 2^-126) of a bf16
// [token][head][d] tensor (wideattn_compute_scale); the body is amax_e4m3.cuh's.
#include "fp8/quantize/amax_e4m3.cuh"

extern "C" __global__ void __launch_bounds__(wideattn::fp8::AmaxE4m3Traits::kThreads)
wideattn_amax_e4m3(const wideattn_scale_params p) {
    wideattn::fp8::amax_e4m3_body<false>(p);
}
