// kernel.cu - entry points of wgmma_bf16c2p3_d512 (traits.h; the body: kernels/hopper/bf16c2p_d512/).
#include "kernels/hopper/bf16c2p_d512/block.cuh"
#include "kernels/hopper/bf16c2p3_d512/traits.h"

extern "C" __global__ void __cluster_dims__(wideattn::kCtaPairSize, 1, 1)
    __launch_bounds__(wideattn::WgmmaBf16C2p3D512Traits::kThreads, 1)
        wideattn_wgmma_bf16c2p3_d512(const __grid_constant__ wideattn_prefill_params p,
                                    const __grid_constant__ wideattn::KvTensorMaps maps) {
    wideattn::hopper::bf16c2p::cluster_entry<wideattn::WgmmaBf16C2p3D512Traits, false>(p, maps);
}

extern "C" __global__ void __cluster_dims__(wideattn::kCtaPairSize, 1, 1)
    __launch_bounds__(wideattn::WgmmaBf16C2p3D512Traits::kThreads, 1)
        wideattn_wgmma_bf16c2p3_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                          const __grid_constant__ wideattn::KvTensorMaps maps) {
    wideattn::hopper::bf16c2p::cluster_entry<wideattn::WgmmaBf16C2p3D512Traits, true>(p, maps);
}
