// kernel.cu - entry points of decode_bf16kfvw16_d512, the candidate form of the BF16 K-from-V
// decode kernel with sixteen warps, four a sub-tile (traits.h; the block is
// kernels/decode_bf16kfvw12_d512/block.cuh). Launch and selection as decode_bf16kfv_d512
// (kernels/decode_bf16kfv_d512/kernel.cu) with 512 threads a block; a candidate ranks below it.
#include "kernels/decode_bf16kfvw12_d512/block.cuh"
#include "kernels/decode_bf16kfvw16_d512/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16KfvW16D512Traits::kThreads, 1)
wideattn_decode_bf16kfvw16_d512(const __grid_constant__ wideattn_prefill_params p,
                                const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeBf16KfvW16D512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_bf16::decode_bf16kfvw12_block<wideattn::DecodeBf16KfvW16D512Traits, false>(p, kfv, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16KfvW16D512Traits::kThreads, 1)
wideattn_decode_bf16kfvw16_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                      const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeBf16KfvW16D512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_bf16::decode_bf16kfvw12_block<wideattn::DecodeBf16KfvW16D512Traits, true>(p, kfv, smem);
}
