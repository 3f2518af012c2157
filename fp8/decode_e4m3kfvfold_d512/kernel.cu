// kernel.cu - entry points of the folded K-from-V decode kernel (WIDEATTN_FLAG_K_FROM_V) over an
// e4m3 V-only cache, bf16 Q, head dim 512, GQA group 8 (sm_90a, candidate): decode_e4m3kfv_d512's
// block (fp8/decode_e4m3kfv_d512/block.cuh) with kFold: K built from V only in the pair blocks that
// rotate (dims below rotary_dims / 2 and their partners), the V codes of the others multiplied with
// Q times k_norm's weight and v_scale (keys.cuh there); constants in traits.h.
//
// Launch: as decode_e4m3kfv_d512 (the K-from-V description as the second argument, grid.x = query
// tokens, grid.y = num_q_heads / 8, grid.z = key splits, block = kThreads, dynamic shared memory
// kSmemBytes).
#include "fp8/decode_e4m3kfv_d512/block.cuh"
#include "fp8/decode_e4m3kfvfold_d512/traits.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "wideattn_decode_e4m3kfvfold_d512 needs cvt e4m3x2: sm_89 or newer"
#endif

extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3KfvFoldD512Traits::kThreads, 1)
wideattn_decode_e4m3kfvfold_d512(const __grid_constant__ wideattn_prefill_params p,
                                 const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeE4m3KfvFoldD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_e4m3::decode_kfv_block<wideattn::DecodeE4m3KfvFoldD512Traits, true, false>(p, kfv, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3KfvFoldD512Traits::kThreads, 1)
wideattn_decode_e4m3kfvfold_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                       const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeE4m3KfvFoldD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_e4m3::decode_kfv_block<wideattn::DecodeE4m3KfvFoldD512Traits, true, true>(p, kfv, smem);
}
