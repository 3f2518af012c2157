// kernel.cu - entry points of the Hopper-tier 8-bit prefill kernel with alternating 64-key tiles
// for bf16 Q over an e4m3 cache with V in the transposed layout (WIDEATTN_FLAG_V_TRANSPOSED), head
// dim 512, GQA group 8 (sm_90a, candidate): per-tensor *k_scale, *v_scale; Q quantised to e4m3 in
// the kernel with one scale per block (fp8/hopper_e4m3kv_d512/quantize_q.cuh), then the block of
// wgmma_e4m3alt64_d512 (fp8/hopper_e4m3alt64_d512/block.cuh); traits: traits.h.
//
// Launch: as every prefill kernel (kernel_desc.h): grid.x = token tiles of 8, grid.y =
// num_q_heads / 8, grid.z = key splits (split-KV when > 1), block = kThreads, dynamic shared
// memory kSmemBytes; arguments: the params and the TMA tensor maps of k_cache (the engine layout)
// and v_cache (the transposed layout), encoded by the dispatcher (dispatch/kv_tensor_maps.cpp).
#include "fp8/hopper_e4m3alt64_d512/block.cuh"
#include "fp8/hopper_e4m3alt64kv_d512/traits.h"
#include "kernels/common/kv_tensor_map.h"

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaE4m3Alt64KvD512Traits::kThreads, 1)
wideattn_wgmma_e4m3alt64kv_d512(const __grid_constant__ wideattn_prefill_params p,
                                const __grid_constant__ wideattn::KvTensorMaps maps) {
    wideattn::hopper::e4m3alt64::wide_entry<wideattn::WgmmaE4m3Alt64KvD512Traits, true, false>(p, maps);
}

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaE4m3Alt64KvD512Traits::kThreads, 1)
wideattn_wgmma_e4m3alt64kv_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                      const __grid_constant__ wideattn::KvTensorMaps maps) {
    wideattn::hopper::e4m3alt64::wide_entry<wideattn::WgmmaE4m3Alt64KvD512Traits, true, true>(p, maps);
}
