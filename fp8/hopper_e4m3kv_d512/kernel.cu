// kernel.cu - entry points of the Hopper-tier prefill kernel for bf16 Q over an e4m3 K/V cache,
// head dim 512, GQA group 8 (sm_90a), what an FP8-KV serving engine sends: per-tensor
// *k_scale, *v_scale; Q quantised to e4m3 in the kernel with one scale per block
// (quantize_q.cuh). The block is the 8-bit kernel's (fp8/hopper_e4m3q_d512/block.cuh: its K/V
// code streams, key loop and epilogue) with that Q source; traits: traits.h.
//
// Launch: as every prefill kernel (kernel_desc.h): grid.x = token tiles of 8, grid.y =
// num_q_heads / 8, grid.z = key splits (split-KV when > 1), block = kThreads, dynamic shared
// memory kSmemBytes.
#include "fp8/hopper_e4m3kv_d512/quantize_q.cuh"
#include "fp8/hopper_e4m3kv_d512/traits.h"
#include "fp8/hopper_e4m3q_d512/block.cuh"

// The two entries: unsplit, and split-KV (grid.z = key splits), each its own function.
extern "C" __global__ void __launch_bounds__(wideattn::WgmmaE4m3KvD512Traits::kThreads, 1)
wideattn_wgmma_e4m3kv_d512(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(wideattn::WgmmaE4m3KvD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::hopper::e4m3q::e4m3_block<wideattn::WgmmaE4m3KvD512Traits, wideattn::hopper::e4m3kv::QuantizedQ, false>(
        p, smem);
}

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaE4m3KvD512Traits::kThreads, 1)
wideattn_wgmma_e4m3kv_d512_split(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(wideattn::WgmmaE4m3KvD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::hopper::e4m3q::e4m3_block<wideattn::WgmmaE4m3KvD512Traits, wideattn::hopper::e4m3kv::QuantizedQ, true>(
        p, smem);
}
