// kernel_q.cu - entry points of the few-token decode kernel for Q already in e4m3 over an e4m3
// K/V cache, head dim 512, GQA group 8 (sm_90a): speculative verification steps (q_len 2..8) and
// any call of at most 8 query tokens per sequence; per-tensor *q_scale, *k_scale, *v_scale; the
// Q codes converted to f16 exactly (fp8/decode_e4m3_d512/loads.cuh, load_q_codes); the block
// (block.cuh), constants in traits.h. Launch and selection: kernel.cu.
#include "fp8/verify_e4m3_d512/block.cuh"
#include "fp8/verify_e4m3_d512/traits.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "wideattn_verify_e4m3q_d512 needs cvt e4m3x2: sm_89 or newer"
#endif

extern "C" __global__ void __launch_bounds__(wideattn::VerifyE4m3QD512Traits::kThreads, 1)
wideattn_verify_e4m3q_d512(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(wideattn::VerifyE4m3QD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::verify_e4m3::verify_block<true, false>(p, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::VerifyE4m3QD512Traits::kThreads, 1)
wideattn_verify_e4m3q_d512_split(const __grid_constant__ wideattn_prefill_params p) {
    extern __shared__ __align__(wideattn::VerifyE4m3QD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::verify_e4m3::verify_block<true, true>(p, smem);
}
