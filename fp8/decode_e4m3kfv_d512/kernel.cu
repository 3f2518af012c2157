// kernel.cu - entry points of the single-token decode kernel that rebuilds K from V
// (WIDEATTN_FLAG_K_FROM_V) over an e4m3 V-only cache, bf16 Q, head dim 512, GQA group 8 (sm_90a):
// per-tensor *v_scale, k_cache absent; the block (block.cuh): the tables, Q, each warp's key loop
// over V chunks with K built from them (keys.cuh), the merge and output of decode_e4m3_d512;
// constants in traits.h.
//
// Launch: as every prefill kernel (kernel_desc.h) with tile_tokens 1 and the K-from-V description
// (kernels/common/k_from_v.h, KFromV) as the second argument: grid.x = query tokens, grid.y =
// num_q_heads / 8, grid.z = key splits (split-KV when > 1), block = kThreads, dynamic shared
// memory kSmemBytes. Selection gives it only calls with WIDEATTN_FLAG_K_FROM_V (feature
// k_from_v_only) of one query token per sequence (single_token, dispatch/selection.cpp).
#include "fp8/decode_e4m3kfv_d512/block.cuh"
#include "fp8/decode_e4m3kfv_d512/traits.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "wideattn_decode_e4m3kfv_d512 needs cvt e4m3x2: sm_89 or newer"
#endif

extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3KfvD512Traits::kThreads, 1)
wideattn_decode_e4m3kfv_d512(const __grid_constant__ wideattn_prefill_params p,
                             const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeE4m3KfvD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_e4m3::decode_kfv_block<wideattn::DecodeE4m3KfvD512Traits, false>(p, kfv, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3KfvD512Traits::kThreads, 1)
wideattn_decode_e4m3kfv_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                   const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeE4m3KfvD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_e4m3::decode_kfv_block<wideattn::DecodeE4m3KfvD512Traits, true>(p, kfv, smem);
}
