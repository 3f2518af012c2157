// kernel_pdl.cu - entry points of wgmma_bf16pdl_d512 (sm_90a, a candidate): wgmma_bf16_d512's block
// (block.cuh) after a wait for the grids before it in the stream (griddepcontrol.wait) and before
// any read of the metadata or the tensors, so the dispatcher launches it as a programmatic
// dependent launch (feature "pdl_wait", WgmmaBf16PdlD512Traits in traits.h; docs/design.md
// section 5). Launch otherwise as wgmma_bf16_d512 (kernel.cu). The tensor maps it prefetches are
// kernel parameters, which no earlier grid writes.
#include "kernels/common/ptx_griddep.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/hopper/bf16_d512/block.cuh"
#include "kernels/hopper/bf16_d512/traits.h"

template <bool kSplit>
__device__ __forceinline__ void wgmma_bf16pdl_entry(const wideattn_prefill_params& p,
                                                    const wideattn::KvTensorMaps& maps) {
    using Traits = wideattn::WgmmaBf16PdlD512Traits;
    extern __shared__ __align__(Traits::kSmemAlign) unsigned char smem[];
    wideattn::ptx::prefetch_kv_tensor_maps(maps);
    wideattn::ptx::wait_prerequisite_grids();
    wideattn::hopper::bf16::bf16_block<kSplit>(p, maps, smem);
}

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaBf16PdlD512Traits::kThreads, 1)
wideattn_wgmma_bf16pdl_d512(const __grid_constant__ wideattn_prefill_params p,
                            const __grid_constant__ wideattn::KvTensorMaps maps) {
    wgmma_bf16pdl_entry<false>(p, maps);
}

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaBf16PdlD512Traits::kThreads, 1)
wideattn_wgmma_bf16pdl_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                  const __grid_constant__ wideattn::KvTensorMaps maps) {
    wgmma_bf16pdl_entry<true>(p, maps);
}
