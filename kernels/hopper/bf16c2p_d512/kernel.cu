// kernel.cu - entry points of wgmma_bf16c2p_d512, the two-CTA Hopper-tier BF16 prefill kernel for
// head dim 512, GQA group 8 that exchanges probabilities (sm_90a; the BF16 prefill default; traits: traits.h;
// one CTA: block.cuh; loads and the producer: loads.cuh; the P messages between the CTAs:
// exchange.cuh; the key loops: mainloop.cuh; output: kernels/common/epilogue.cuh).
//
// Launch ("cta_pair", as wgmma_bf16c2_d512): grid.x = kCtaPairSize x token_tile_count(total_q,
// num_seqs, 16), grid.y = num_q_heads / 8, grid.z = key splits (split-KV when > 1), block =
// kThreads (384), dynamic shared memory kSmemBytes; clusters of two CTAs along x, fixed here by
// __cluster_dims__. Arguments: the params and the TMA tensor maps of k_cache and v_cache
// (KvTensorMaps, encoded by the dispatcher). CTA c of a cluster computes the scores of 64 rows
// (row group c: 8 tokens x the 8 query heads of one KV head) over all 512 dims, and dims
// [256 c, 256 c + 256) of O for all 128 rows of the tile.
#include "kernels/hopper/bf16c2p_d512/block.cuh"
#include "kernels/hopper/bf16c2p_d512/traits.h"

extern "C" __global__ void __cluster_dims__(wideattn::kCtaPairSize, 1, 1)
    __launch_bounds__(wideattn::WgmmaBf16C2pD512Traits::kThreads, 1)
        wideattn_wgmma_bf16c2p_d512(const __grid_constant__ wideattn_prefill_params p,
                                    const __grid_constant__ wideattn::KvTensorMaps maps) {
    wideattn::hopper::bf16c2p::cluster_entry<wideattn::WgmmaBf16C2pD512Traits, false>(p, maps);
}

extern "C" __global__ void __cluster_dims__(wideattn::kCtaPairSize, 1, 1)
    __launch_bounds__(wideattn::WgmmaBf16C2pD512Traits::kThreads, 1)
        wideattn_wgmma_bf16c2p_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                          const __grid_constant__ wideattn::KvTensorMaps maps) {
    wideattn::hopper::bf16c2p::cluster_entry<wideattn::WgmmaBf16C2pD512Traits, true>(p, maps);
}
