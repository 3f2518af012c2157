// kernel.cu - entry points of decode_bf16kfvbulk_d512 (sm_90a, a candidate): decode_bf16kfv_d512's
// block (kernels/decode_bf16kfv_d512/block.cuh) with its V chunks copied by the bulk-copy engine
// (traits.h). Launched as decode_bf16kfv_d512: the K-from-V description as the second argument,
// kThreads threads, kSmemBytes of dynamic shared memory, one block per SM.
#include "kernels/decode_bf16kfv_d512/block.cuh"
#include "kernels/decode_bf16kfvbulk_d512/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16KfvBulkD512Traits::kThreads, 1)
wideattn_decode_bf16kfvbulk_d512(const __grid_constant__ wideattn_prefill_params p,
                                 const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeBf16KfvBulkD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_bf16::decode_bf16kfv_block<wideattn::DecodeBf16KfvBulkD512Traits, false>(p, kfv, smem);
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16KfvBulkD512Traits::kThreads, 1)
wideattn_decode_bf16kfvbulk_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                       const __grid_constant__ wideattn::KFromV kfv) {
    extern __shared__ __align__(wideattn::DecodeBf16KfvBulkD512Traits::kSmemAlign) unsigned char smem[];
    wideattn::decode_bf16::decode_bf16kfv_block<wideattn::DecodeBf16KfvBulkD512Traits, true>(p, kfv, smem);
}
