// kernel.cu - entry points of the lean-table form of the single-token decode kernel that rebuilds K
// from V over an e4m3 V-only cache (WIDEATTN_FLAG_K_FROM_V), bf16 Q and O, head dim 512, GQA group 8
// (sm_90a): the block of decode_e4m3kfv_d512 (fp8/decode_e4m3kfv_d512/block.cuh) with the traits of
// traits.h (the cos / sin table through row addresses).
//
// Launch: as decode_e4m3kfv_d512 (tile_tokens 1, the K-from-V description as the second argument:
// grid.x = query tokens, grid.y = num_q_heads / 8, grid.z = key splits, block = kThreads, dynamic
// shared memory kSmemBytes).
#include "fp8/decode_e4m3kfv2_d512/traits.h"
#include "fp8/decode_e4m3kfv_d512/block.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "wideattn_decode_e4m3kfv2_d512 needs cvt e4m3x2: sm_89 or newer"
#endif

extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3Kfv2D512Traits::kThreads, 1)
wideattn_decode_e4m3kfv2_d512(const __grid_constant__ wideattn_prefill_params p,
                              const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeE4m3Kfv2D512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_e4m3::decode_kfv_block<wideattn::DecodeE4m3Kfv2D512Traits, false>(p, kfv, smem);
}

extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3Kfv2D512Traits::kThreads, 1)
wideattn_decode_e4m3kfv2_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                    const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeE4m3Kfv2D512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_e4m3::decode_kfv_block<wideattn::DecodeE4m3Kfv2D512Traits, true>(p, kfv, smem);
}
