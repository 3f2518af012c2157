// kernel.cu - entry points of the few-token decode kernel for bf16 Q over an e4m3 K/V cache, head
// dim 512, GQA group 8 (sm_90a): speculative verification steps (q_len 2..8) and any call of at
// most 8 query tokens per sequence; per-tensor *k_scale, *v_scale; Q scaled by a power of two per
// block and held as f16 (fp8/decode_e4m3_d512/loads.cuh); the block (block.cuh): the key loop
// (mainloop.cuh), the output (epilogue.cuh); constants in traits.h.
//
// Launch: as every prefill kernel (kernel_desc.h) with tile_tokens 8: grid.x = token tiles,
// grid.y = num_q_heads / 8, grid.z = key splits (split-KV when > 1), block = kThreads, dynamic
// shared memory kSmemBytes. Correct for any call; selection runs it on its own only for calls of
// at most 8 query tokens per sequence ("few_tokens", dispatch/selection.cpp).
#include "fp8/verify_e4m3_d512/block.cuh"
#include "fp8/verify_e4m3_d512/traits.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "wideattn_verify_e4m3_d512 needs cvt e4m3x2: sm_89 or newer"
#endif

extern "C" __global__ void __launch_bounds__(wideattn::VerifyE4m3D512Traits::kThreads, 1)
wideattn_verify_e4m3_d512(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(wideattn::VerifyE4m3D512Traits::kSmemAlign) unsigned char smem[];
    wideattn::verify_e4m3::verify_block<false, false>(p, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::VerifyE4m3D512Traits::kThreads, 1)
wideattn_verify_e4m3_d512_split(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(wideattn::VerifyE4m3D512Traits::kSmemAlign) unsigned char smem[];
    wideattn::verify_e4m3::verify_block<false, true>(p, smem);
}
