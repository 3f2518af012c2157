// kernel_w4m.cu - entry points of decode_bf16w4m_d512 (sm_90a, a candidate): decode_bf16w4_d512's
// block (block.cuh, DecodeBf16W4MD512Traits in traits.h) whose split entry merges its own
// splits (kernels/common/split_self_merge.cuh): the dispatcher launches no merge kernel after it
// and gives it the larger workspace of the feature merges_splits. Launch as decode_bf16w4_d512.
#include "kernels/decode_bf16_d512/block.cuh"
#include "kernels/decode_bf16_d512/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16W4MD512Traits::kThreads,
                                             wideattn::DecodeBf16W4MD512Traits::kBlocksPerSm)
wideattn_decode_bf16w4m_d512(const __grid_constant__ wideattn_prefill_params p) {
    wideattn::decode_bf16::decode_entry<wideattn::DecodeBf16W4MD512Traits, false>(p, "decode_bf16w4m_d512");
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split),
// merging its splits in the kernel.
extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16W4MD512Traits::kThreads,
                                             wideattn::DecodeBf16W4MD512Traits::kBlocksPerSm)
wideattn_decode_bf16w4m_d512_split(const __grid_constant__ wideattn_prefill_params p) {
    wideattn::decode_bf16::decode_entry<wideattn::DecodeBf16W4MD512Traits, true>(p, "decode_bf16w4m_d512_split");
}
