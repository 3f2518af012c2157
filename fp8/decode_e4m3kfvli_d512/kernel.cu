// kernel.cu - entry points of decode_e4m3kfvli_d512, the candidate form of the e4m3 K-from-V
// decode kernel with the block-table entries read a step ahead and the lean V copies (traits.h;
// the block is fp8/decode_e4m3kfv_d512/block.cuh). Launch and selection as decode_e4m3kfv_d512
// (fp8/decode_e4m3kfv_d512/kernel.cu); a candidate ranks below it.
#include "fp8/decode_e4m3kfv_d512/block.cuh"
#include "fp8/decode_e4m3kfvli_d512/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3KfvLiD512Traits::kThreads, 1)
wideattn_decode_e4m3kfvli_d512(const __grid_constant__ wideattn_prefill_params p,
                               const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeE4m3KfvLiD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_e4m3::decode_kfv_block<wideattn::DecodeE4m3KfvLiD512Traits, false>(p, kfv, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeE4m3KfvLiD512Traits::kThreads, 1)
wideattn_decode_e4m3kfvli_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                     const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeE4m3KfvLiD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_e4m3::decode_kfv_block<wideattn::DecodeE4m3KfvLiD512Traits, true>(p, kfv, smem);
}
