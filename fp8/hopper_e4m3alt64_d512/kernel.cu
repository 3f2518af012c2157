// kernel.cu - entry points of the Hopper-tier 8-bit prefill kernel for head dim 512, GQA group 8,
// whose warpgroups take alternate 64-key tiles (sm_90a, candidate): Q, K and V e4m3 with
// per-tensor scales *q_scale, *k_scale, *v_scale, V in the transposed cache layout
// (WIDEATTN_FLAG_V_TRANSPOSED), both products by FP8 wgmma (traits: traits.h; the block:
// block.cuh; loop: mainloop.cuh; loads: fp8/hopper_e4m3alt_d512/loads.cuh; output:
// fp8/hopper_e4m3pv_d512/epilogue.cuh).
//
// Launch: as every prefill kernel (kernel_desc.h): grid.x = token tiles of 8, grid.y =
// num_q_heads / 8, grid.z = key splits (split-KV when > 1), block = kThreads, dynamic shared
// memory kSmemBytes; arguments: the params and the TMA tensor maps of k_cache (the engine layout)
// and v_cache (the transposed layout), encoded by the dispatcher (dispatch/kv_tensor_maps.cpp).
#include "fp8/hopper_e4m3alt64_d512/block.cuh"
#include "fp8/hopper_e4m3alt64_d512/traits.h"
#include "kernels/common/kv_tensor_map.h"

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaE4m3Alt64D512Traits::kThreads, 1)
wideattn_wgmma_e4m3alt64_d512(const __grid_constant__ wideattn_prefill_params p,
                              const __grid_constant__ wideattn::KvTensorMaps maps) {
    wideattn::hopper::e4m3alt64::wide_entry<wideattn::WgmmaE4m3Alt64D512Traits, false, false>(p, maps);
}

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaE4m3Alt64D512Traits::kThreads, 1)
wideattn_wgmma_e4m3alt64_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                    const __grid_constant__ wideattn::KvTensorMaps maps) {
    wideattn::hopper::e4m3alt64::wide_entry<wideattn::WgmmaE4m3Alt64D512Traits, false, true>(p, maps);
}
