// kernel.cu - entry points of the wgmma form of the single-token decode kernel that rebuilds K
// from a BF16 V-only cache (sm_90a; a candidate): the block of block.cuh with the traits of
// traits.h; launched as decode_bf16kfv_d512 (its kernel.cu: the parameters and the K-from-V
// description).
#include "kernels/decode_bf16kfvw_d512/block.cuh"
#include "kernels/decode_bf16kfvw_d512/traits.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "wideattn_decode_bf16kfvw_d512 needs wgmma: sm_90a or newer"
#endif

extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16KfvWD512Traits::kThreads, 1)
wideattn_decode_bf16kfvw_d512(const __grid_constant__ wideattn_prefill_params p,
                              const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeBf16KfvWD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::kfvw_bf16::decode_kfvw_bf16_block<false>(p, kfv, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16KfvWD512Traits::kThreads, 1)
wideattn_decode_bf16kfvw_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                    const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeBf16KfvWD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::kfvw_bf16::decode_kfvw_bf16_block<true>(p, kfv, smem);
}
