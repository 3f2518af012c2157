// kernel_w4bulk.cu - entry points of decode_bf16w4bulk_d512 (sm_90a, a candidate):
// decode_bf16w4_d512's block (block.cuh) with its K and V chunk rows copied by the bulk-copy
// engine (DecodeBf16W4BulkD512Traits, traits.h), two blocks per SM. Launched as decode_bf16w4_d512.
#include "kernels/decode_bf16_d512/block.cuh"
#include "kernels/decode_bf16_d512/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16W4BulkD512Traits::kThreads,
                                             wideattn::DecodeBf16W4BulkD512Traits::kBlocksPerSm)
wideattn_decode_bf16w4bulk_d512(const __grid_constant__ wideattn_prefill_params p) {
    wideattn::decode_bf16::decode_entry<wideattn::DecodeBf16W4BulkD512Traits, false>(p, "decode_bf16w4bulk_d512");
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16W4BulkD512Traits::kThreads,
                                             wideattn::DecodeBf16W4BulkD512Traits::kBlocksPerSm)
wideattn_decode_bf16w4bulk_d512_split(const __grid_constant__ wideattn_prefill_params p) {
    wideattn::decode_bf16::decode_entry<wideattn::DecodeBf16W4BulkD512Traits, true>(p, "decode_bf16w4bulk_d512_split");
}
