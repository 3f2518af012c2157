// kernel.cu - entry point of the BF16 mma.sync prefill kernel for head dim 512, GQA group 8,
// without ping-pong (traits: traits.h; body: block.cuh; loads: loads.cuh; loop: mainloop.cuh;
// output: kernels/common/epilogue.cuh). The ping-pong variant: ../bf16_d512_pp/.
#include "kernels/mma/bf16_d512/block.cuh"
#include "kernels/mma/bf16_d512/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::MmaBf16D512Traits::kThreads, 1)
wideattn_mma_bf16_d512(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(16) unsigned char smem[];
    wideattn::mma_bf16::prefill_block<wideattn::MmaBf16D512Traits, false>(p, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::MmaBf16D512Traits::kThreads, 1)
wideattn_mma_bf16_d512_split(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(16) unsigned char smem[];
    wideattn::mma_bf16::prefill_block<wideattn::MmaBf16D512Traits, true>(p, smem);
}
