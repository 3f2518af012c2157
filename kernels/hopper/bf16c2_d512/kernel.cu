// kernel.cu - entry point of the two-CTA Hopper-tier BF16 prefill kernel for head dim 512, GQA
// group 8 (sm_90a; traits: traits.h; one CTA: block.cuh; loads and the producer: loads.cuh; the
// score exchange between the CTAs: exchange.cuh; loop: mainloop.cuh; output:
// kernels/common/epilogue.cuh).
//
// Launch ("cta_pair"): grid.x = kCtaPairSize x token_tile_count(total_q, num_seqs, 16), grid.y =
// num_q_heads / 8, grid.z = key splits (split-KV when > 1, kernels/common/block_geometry.cuh),
// block = kThreads (384), dynamic shared memory kSmemBytes; clusters of two CTAs
// along x, fixed here by __cluster_dims__. Arguments: the params and the TMA tensor maps of k_cache
// and v_cache (KvTensorMaps, encoded by the dispatcher). CTA c of a cluster computes dims
// [256 c, 256 c + 256) of 128 rows (16 tokens x the 8 query heads of one KV head) over every key
// they can see.
#include "kernels/hopper/bf16c2_d512/block.cuh"
#include "kernels/hopper/bf16c2_d512/traits.h"

extern "C" __global__ void __cluster_dims__(wideattn::kCtaPairSize, 1, 1)
    __launch_bounds__(wideattn::WgmmaBf16C2D512Traits::kThreads, 1)
        wideattn_wgmma_bf16c2_d512(const __grid_constant__ wideattn_prefill_params p,
                                   const __grid_constant__ wideattn::KvTensorMaps maps) {
    wideattn::hopper::bf16c2::cluster_entry<wideattn::WgmmaBf16C2D512Traits, false>(p, maps);
}

extern "C" __global__ void __cluster_dims__(wideattn::kCtaPairSize, 1, 1)
    __launch_bounds__(wideattn::WgmmaBf16C2D512Traits::kThreads, 1)
        wideattn_wgmma_bf16c2_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                         const __grid_constant__ wideattn::KvTensorMaps maps) {
    wideattn::hopper::bf16c2::cluster_entry<wideattn::WgmmaBf16C2D512Traits, true>(p, maps);
}
