// kernel.cu - entry points of the warp-pair form of the bf16-key single-token decode kernel that
// rebuilds K from an e4m3 V-only cache (sm_90a; a candidate the dispatcher runs by name only):
// the block of block.cuh (16 warps in 8 pairs that split the dims) with the traits of traits.h;
// launched as decode_e4m3kfv_d512 (its kernel.cu) with kThreads threads a block.
#include "fp8/decode_e4m3kfvp_d512/block.cuh"
#include "fp8/decode_e4m3kfvp_d512/traits.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "wideattn_decode_e4m3kfvp_d512 needs mul.rn.bf16x2: sm_90 or newer"
#endif

extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3KfvPD512Traits::kThreads, 1)
wideattn_decode_e4m3kfvp_d512(const __grid_constant__ wideattn_prefill_params p,
                              const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeE4m3KfvPD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_e4m3::decode_kfvp_block<wideattn::DecodeE4m3KfvPD512Traits, false>(p, kfv, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3KfvPD512Traits::kThreads, 1)
wideattn_decode_e4m3kfvp_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                    const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeE4m3KfvPD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_e4m3::decode_kfvp_block<wideattn::DecodeE4m3KfvPD512Traits, true>(p, kfv, smem);
}
