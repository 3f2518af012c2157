// kernel_q.cu - entry points of the single-token decode kernel for Q already in e4m3 (per-tensor
// *q_scale; the codes become f16 exactly) over an e4m3 cache whose V is in the transposed layout
// (WIDEATTN_FLAG_V_TRANSPOSED), head dim 512, GQA group 8 (sm_90a): decode_e4m3_d512's block
// (fp8/decode_e4m3_d512/block.cuh) with the traits of traits.h, which read V as [dims][16
// positions] per sub-tile.
//
// Launch: as every prefill kernel (kernel_desc.h) with tile_tokens 1: grid.x = query tokens,
// grid.y = num_q_heads / 8, grid.z = key splits (split-KV when > 1), block = kThreads, dynamic
// shared memory kSmemBytes. Correct for any q_len; selection runs it on its own only for calls of
// at most one query token per sequence ("single_token", dispatch/selection.cpp).
#include "fp8/decode_e4m3_d512/block.cuh"
#include "fp8/decode_e4m3vt_d512/traits.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "wideattn_decode_e4m3vtq_d512 needs cvt e4m3x2: sm_89 or newer"
#endif

extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3VtQD512Traits::kThreads, 1)
wideattn_decode_e4m3vtq_d512(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(wideattn::DecodeE4m3VtQD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_e4m3::decode_block<wideattn::DecodeE4m3VtQD512Traits, true, false>(p, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3VtQD512Traits::kThreads, 1)
wideattn_decode_e4m3vtq_d512_split(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(wideattn::DecodeE4m3VtQD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_e4m3::decode_block<wideattn::DecodeE4m3VtQD512Traits, true, true>(p, smem);
}
