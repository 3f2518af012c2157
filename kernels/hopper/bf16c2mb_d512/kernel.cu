// kernel.cu - entry points of the bounded form of the two-CTA Hopper-tier BF16 prefill kernel for
// head dim 512, GQA group 8 (sm_90a): the cluster and block of wgmma_bf16c2_d512
// (kernels/hopper/bf16c2_d512/block.cuh) with the partial row maxima exchanged beside the scores
// and the exact row maxima found only where their bound allows a growth; traits: traits.h.
//
// Launch: as wgmma_bf16c2_d512 ("cta_pair": grid.x = kCtaPairSize x the 16-token tiles, grid.y =
// num_q_heads / 8, grid.z = key splits, block = kThreads, dynamic shared memory kSmemBytes,
// clusters of two CTAs along x fixed by __cluster_dims__); arguments: the params and the TMA tensor
// maps of k_cache and v_cache, encoded by the dispatcher.
#include "kernels/hopper/bf16c2_d512/block.cuh"
#include "kernels/hopper/bf16c2mb_d512/traits.h"

extern "C" __global__ void __cluster_dims__(wideattn::kCtaPairSize, 1, 1)
    __launch_bounds__(wideattn::WgmmaBf16C2mbD512Traits::kThreads, 1)
        wideattn_wgmma_bf16c2mb_d512(const __grid_constant__ wideattn_prefill_params p,
                                     const __grid_constant__ wideattn::KvTensorMaps maps) {
    wideattn::hopper::bf16c2::cluster_entry<wideattn::WgmmaBf16C2mbD512Traits, false>(p, maps);
}

extern "C" __global__ void __cluster_dims__(wideattn::kCtaPairSize, 1, 1)
    __launch_bounds__(wideattn::WgmmaBf16C2mbD512Traits::kThreads, 1)
        wideattn_wgmma_bf16c2mb_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                           const __grid_constant__ wideattn::KvTensorMaps maps) {
    wideattn::hopper::bf16c2::cluster_entry<wideattn::WgmmaBf16C2mbD512Traits, true>(p, maps);
}
