// kernel.cu - entry points of the folded-Q form of the single-token decode kernel that rebuilds K
// from a BF16 V-only cache (sm_90a; a candidate): decode_bf16kfv_d512's block
// (kernels/decode_bf16kfv_d512/block.cuh) with the traits of traits.h here (the unrotated dims'
// scores as V against Q folded with k_norm's weight); launched as decode_bf16kfv_d512 (its kernel.cu).
#include "kernels/decode_bf16kfv_d512/block.cuh"
#include "kernels/decode_bf16kfvf_d512/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16KfvFD512Traits::kThreads, 1)
wideattn_decode_bf16kfvf_d512(const __grid_constant__ wideattn_prefill_params p,
                              const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeBf16KfvFD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_bf16::decode_bf16kfv_block<wideattn::DecodeBf16KfvFD512Traits, false>(p, kfv, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16KfvFD512Traits::kThreads, 1)
wideattn_decode_bf16kfvf_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                    const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeBf16KfvFD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_bf16::decode_bf16kfv_block<wideattn::DecodeBf16KfvFD512Traits, true>(p, kfv, smem);
}
