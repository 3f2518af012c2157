// kernel.cu - entry point of the ping-pong variant of the BF16 mma.sync prefill kernel for head
// dim 512, GQA group 8 (traits: traits.h; body, loads and key loop: ../bf16_d512/block.cuh,
// loads.cuh, mainloop.cuh, instantiated on MmaBf16D512PpTraits).
#include "kernels/mma/bf16_d512/block.cuh"
#include "kernels/mma/bf16_d512_pp/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::MmaBf16D512PpTraits::kThreads, 1)
wideattn_mma_bf16_d512_pp(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(16) unsigned char smem[];
    wideattn::mma_bf16::prefill_block<wideattn::MmaBf16D512PpTraits, false>(p, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::MmaBf16D512PpTraits::kThreads, 1)
wideattn_mma_bf16_d512_pp_split(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(16) unsigned char smem[];
    wideattn::mma_bf16::prefill_block<wideattn::MmaBf16D512PpTraits, true>(p, smem);
}
