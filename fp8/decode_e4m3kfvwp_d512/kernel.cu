// kernel.cu - entry points of the pipelined form of the FP8-wgmma K-from-V decode (sm_90a; a
// candidate): decode_e4m3kfvw_d512's block (fp8/decode_e4m3kfvw_d512/block.cuh) with the traits of
// traits.h here (its pipelined key loop); launched as decode_e4m3kfv_d512 (its kernel.cu: the
// parameters and the K-from-V description).
#include "fp8/decode_e4m3kfvw_d512/block.cuh"
#include "fp8/decode_e4m3kfvwp_d512/traits.h"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "wideattn_decode_e4m3kfvwp_d512 needs wgmma: sm_90a or newer"
#endif

extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3KfvWPD512Traits::kThreads, 1)
wideattn_decode_e4m3kfvwp_d512(const __grid_constant__ wideattn_prefill_params p,
                               const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeE4m3KfvWPD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::kfvw::decode_kfvw_block<wideattn::DecodeE4m3KfvWPD512Traits, false>(p, kfv, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3KfvWPD512Traits::kThreads, 1)
wideattn_decode_e4m3kfvwp_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                     const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeE4m3KfvWPD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::kfvw::decode_kfvw_block<wideattn::DecodeE4m3KfvWPD512Traits, true>(p, kfv, smem);
}
