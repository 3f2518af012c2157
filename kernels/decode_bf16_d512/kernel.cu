// kernel.cu - entry points of the single-token decode kernel over a BF16 K/V cache, head dim 512,
// GQA group 8 (sm_90a): bf16 Q, K, V into mma.sync m16n8k16 bf16 as they are; the block
// (block.cuh): each warp's key loop (mainloop.cuh), the merge and output (fp8/decode_e4m3_d512/epilogue.cuh);
// constants in traits.h.
//
// Launch: as every prefill kernel (kernel_desc.h) with tile_tokens 1: grid.x = query tokens,
// grid.y = num_q_heads / 8, grid.z = key splits (split-KV when > 1), block = kThreads, dynamic
// shared memory kSmemBytes. Correct for any q_len (one block per token, each reading its keys);
// selection runs it on its own only for calls of at most one query token per sequence
// ("single_token", dispatch/selection.cpp), and only where its priority or a tuning file puts it
// first (bundle/meson.build).
#include "kernels/decode_bf16_d512/block.cuh"
#include "kernels/decode_bf16_d512/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16D512Traits::kThreads,
                                             wideattn::DecodeBf16D512Traits::kBlocksPerSm)
wideattn_decode_bf16_d512(const __grid_constant__ wideattn_prefill_params p) {
    wideattn::decode_bf16::decode_entry<wideattn::DecodeBf16D512Traits, false>(p, "decode_bf16_d512");
}

// The split-KV entry (grid.z = key splits; kernels/common/block_geometry.cuh, restrict_to_split).
extern "C" __global__ void __launch_bounds__(wideattn::DecodeBf16D512Traits::kThreads,
                                             wideattn::DecodeBf16D512Traits::kBlocksPerSm)
wideattn_decode_bf16_d512_split(const __grid_constant__ wideattn_prefill_params p) {
    wideattn::decode_bf16::decode_entry<wideattn::DecodeBf16D512Traits, true>(p, "decode_bf16_d512_split");
}
