// kernel.cu - entry point of the Hopper-tier 8-bit prefill kernel for head dim 512, GQA group 8
// (sm_90a): Q, K and V e4m3 with per-tensor scales *q_scale, *k_scale, *v_scale (traits:
// traits.h; the block: block.cuh, with loads.cuh and kernels/common/wgmma_loads.cuh, mainloop.cuh
// and epilogue.cuh).
//
// Launch: as every prefill kernel (kernel_desc.h): grid.x = token tiles of 8, grid.y =
// num_q_heads / 8, grid.z = key splits (split-KV when > 1), block = kThreads, dynamic shared
// memory kSmemBytes.
#include "fp8/hopper_e4m3q_d512/block.cuh"
#include "fp8/hopper_e4m3q_d512/traits.h"

// The two entries: unsplit, and split-KV (grid.z = key splits), each its own function.
extern "C" __global__ void __launch_bounds__(wideattn::WgmmaE4m3QD512Traits::kThreads, 1)
wideattn_wgmma_e4m3q_d512(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(wideattn::WgmmaE4m3QD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::hopper::e4m3q::e4m3_block<wideattn::WgmmaE4m3QD512Traits, wideattn::hopper::e4m3q::CodedQ, false>(p, smem);
}

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaE4m3QD512Traits::kThreads, 1)
wideattn_wgmma_e4m3q_d512_split(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(wideattn::WgmmaE4m3QD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::hopper::e4m3q::e4m3_block<wideattn::WgmmaE4m3QD512Traits, wideattn::hopper::e4m3q::CodedQ, true>(p, smem);
}
