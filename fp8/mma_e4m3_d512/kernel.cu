// kernel.cu - entry point of the 8-bit mma.sync prefill kernel for head dim 512, GQA group 8,
// Q bf16 quantised to e4m3 in the kernel (one scale per row and dim half) (body: prefill.cuh;
// traits: traits.h). sm_89 and newer.
#include "fp8/mma_e4m3_d512/prefill.cuh"
#include "fp8/mma_e4m3_d512/traits.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "wideattn_mma_e4m3_d512 needs mma.sync e4m3 and cvt e4m3x2: sm_89 or newer"
#endif

extern "C" __global__ void __launch_bounds__(wideattn::MmaE4m3D512Traits::kThreads, 1)
wideattn_mma_e4m3_d512(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(16) unsigned char smem[];
    wideattn::mma_e4m3::e4m3_prefill<wideattn::MmaE4m3D512Traits, false, false>(p, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::MmaE4m3D512Traits::kThreads, 1)
wideattn_mma_e4m3_d512_split(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(16) unsigned char smem[];
    wideattn::mma_e4m3::e4m3_prefill<wideattn::MmaE4m3D512Traits, false, true>(p, smem);
}
