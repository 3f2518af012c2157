// kernel_w4.cu - entry points of decode_bf16w4_d512 (sm_90a, the BF16 decode default):
// decode_bf16_d512's block (block.cuh) with 4 warps and half the rings (DecodeBf16W4D512Traits,
// traits.h), two blocks per SM. Launch as decode_bf16_d512 (kernel.cu) with kThreads threads and
// kSmemBytes of dynamic shared memory; the dispatcher's split count (one block per SM) suits it
// too (NOTES.md, "Measured").
#include "kernels/decode_bf16_d512/block.cuh"
#include "kernels/decode_bf16_d512/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16W4D512Traits::kThreads,
                                             wideattn::DecodeBf16W4D512Traits::kBlocksPerSm)
wideattn_decode_bf16w4_d512(const __grid_constant__ wideattn_prefill_params p) {
    wideattn::decode_bf16::decode_entry<wideattn::DecodeBf16W4D512Traits, false>(p, "decode_bf16w4_d512");
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16W4D512Traits::kThreads,
                                             wideattn::DecodeBf16W4D512Traits::kBlocksPerSm)
wideattn_decode_bf16w4_d512_split(const __grid_constant__ wideattn_prefill_params p) {
    wideattn::decode_bf16::decode_entry<wideattn::DecodeBf16W4D512Traits, true>(p, "decode_bf16w4_d512_split");
}
