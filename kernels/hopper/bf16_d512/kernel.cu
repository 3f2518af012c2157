// kernel.cu - entry point of the Hopper-tier BF16 prefill kernel for head dim 512, GQA group 8
// (sm_90a; traits: traits.h; the block: block.cuh; loads: loads.cuh and
// kernels/common/wgmma_loads.cuh; loop: mainloop.cuh; output: kernels/common/epilogue.cuh, whose
// m16n8 register layout a warp's share of the wgmma accumulator has).
//
// Launch: grid.x = token_tile_count(total_q, num_seqs, kTileTokens), grid.y = num_q_heads / 8,
// grid.z = key splits (split-KV when > 1, kernels/common/block_geometry.cuh),
// block = kThreads, dynamic shared memory kSmemBytes; arguments: the params and the TMA tensor
// maps of k_cache and v_cache (KvTensorMaps, encoded by the dispatcher). Each block computes 64
// rows (8 tokens x the 8 query heads of one KV head) over every key they can see.
#include "kernels/common/block_timeline.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/hopper/bf16_d512/block.cuh"
#include "kernels/hopper/bf16_d512/traits.h"

// The two entries: unsplit, and split-KV (grid.z = key splits), each its own function; each
// block's record of the block timeline where its records form is built in (block_timeline.cuh).
template <bool kSplit>
__device__ __forceinline__ void wgmma_bf16_entry(const wideattn_prefill_params& p, const wideattn::KvTensorMaps& maps) {
    using Traits = wideattn::WgmmaBf16D512Traits;
    extern __shared__ __align__(Traits::kSmemAlign) unsigned char smem[];
    const wideattn::BlockTimeline timeline;
    wideattn::ptx::prefetch_kv_tensor_maps(maps);
    wideattn::hopper::bf16::bf16_block<kSplit>(p, maps, smem);
    timeline.finish(kSplit ? "wgmma_bf16_d512_split" : "wgmma_bf16_d512");
}

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaBf16D512Traits::kThreads, 1)
wideattn_wgmma_bf16_d512(const __grid_constant__ wideattn_prefill_params p,
                         const __grid_constant__ wideattn::KvTensorMaps maps) {
    wgmma_bf16_entry<false>(p, maps);
}

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaBf16D512Traits::kThreads, 1)
wideattn_wgmma_bf16_d512_split(const __grid_constant__ wideattn_prefill_params p,
                               const __grid_constant__ wideattn::KvTensorMaps maps) {
    wgmma_bf16_entry<true>(p, maps);
}
