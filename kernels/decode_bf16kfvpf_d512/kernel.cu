// kernel.cu - entry points of decode_bf16kfv_d512 with the L2 prefetch of its V rows (a candidate,
// sm_90a): decode_bf16kfv_d512's block (kernels/decode_bf16kfv_d512/block.cuh) instantiated with
// DecodeBf16KfvPfD512Traits (traits.h). Launch and selection as decode_bf16kfv_d512's
// (kernels/decode_bf16kfv_d512/kernel.cu), ranked below it.
#include "kernels/decode_bf16kfv_d512/block.cuh"
#include "kernels/decode_bf16kfvpf_d512/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16KfvPfD512Traits::kThreads, 1)
wideattn_decode_bf16kfvpf_d512(const __grid_constant__ wideattn_prefill_params p,
                               const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeBf16KfvPfD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_bf16::decode_bf16kfv_block<wideattn::DecodeBf16KfvPfD512Traits, false>(p, kfv, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16KfvPfD512Traits::kThreads, 1)
wideattn_decode_bf16kfvpf_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                     const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeBf16KfvPfD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_bf16::decode_bf16kfv_block<wideattn::DecodeBf16KfvPfD512Traits, true>(p, kfv, smem);
}
