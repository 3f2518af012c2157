// kernel.cu - entry points of the folded-Q form of the single-token decode kernel that rebuilds K
// from an e4m3 V-only cache (sm_90a; a candidate): decode_e4m3kfv_d512's block
// (fp8/decode_e4m3kfv_d512/block.cuh) with the traits of traits.h here (the unrotated dims' scores
// as V codes against Q folded with w v_scale); launched as decode_e4m3kfv_d512 (its kernel.cu).
#include "fp8/decode_e4m3kfv_d512/block.cuh"
#include "fp8/decode_e4m3kfvf_d512/traits.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "wideattn_decode_e4m3kfvf_d512 needs mul.rn.bf16x2: sm_90 or newer"
#endif

extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3KfvFD512Traits::kThreads, 1)
wideattn_decode_e4m3kfvf_d512(const __grid_constant__ wideattn_prefill_params p,
                              const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeE4m3KfvFD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_e4m3::decode_kfv_block<wideattn::DecodeE4m3KfvFD512Traits, false>(p, kfv, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3KfvFD512Traits::kThreads, 1)
wideattn_decode_e4m3kfvf_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                    const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeE4m3KfvFD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_e4m3::decode_kfv_block<wideattn::DecodeE4m3KfvFD512Traits, true>(p, kfv, smem);
}
