// kernel_w4pdl.cu - entry points of decode_bf16w4pdl_d512 (sm_90a, a candidate): decode_bf16w4_d512's
// block (block.cuh) with DecodeBf16W4PdlD512Traits (traits.h): it waits for the grids before it in
// the stream before any read, so the dispatcher launches it as a programmatic dependent launch
// ("pdl_wait", dispatch/dependent_launch.h). Launch otherwise as decode_bf16w4_d512 (kernel_w4.cu).
#include "kernels/decode_bf16_d512/block.cuh"
#include "kernels/decode_bf16_d512/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16W4PdlD512Traits::kThreads,
                                             wideattn::DecodeBf16W4PdlD512Traits::kBlocksPerSm)
wideattn_decode_bf16w4pdl_d512(const __grid_constant__ wideattn_prefill_params p) {
    wideattn::decode_bf16::decode_entry<wideattn::DecodeBf16W4PdlD512Traits, false>(p, "decode_bf16w4pdl_d512");
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16W4PdlD512Traits::kThreads,
                                             wideattn::DecodeBf16W4PdlD512Traits::kBlocksPerSm)
wideattn_decode_bf16w4pdl_d512_split(const __grid_constant__ wideattn_prefill_params p) {
    wideattn::decode_bf16::decode_entry<wideattn::DecodeBf16W4PdlD512Traits, true>(p, "decode_bf16w4pdl_d512_split");
}
