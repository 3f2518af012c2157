// kernel.cu - entry points of wgmma_bf16mix_d512 (sm_90a, a candidate): BF16 attention for head
// dim 512, GQA group 8, on wgmma_bf16_d512's grid, in which a block whose token tile holds a single
// token (a decode sequence of a mixed batch, or the last token of a prompt whose length is 1 mod 8)
// runs decode_bf16_d512's block (kernels/decode_bf16_d512/block.cuh: 8 warps streaming the keys
// through their own rings, 8 rows) instead of the 64-row wgmma block
// (kernels/hopper/bf16_d512/block.cuh), which would fill 8 of its rows; traits: traits.h.
//
// Why: in a mixed batch the one-token blocks are bound by memory and the prompt's blocks by the
// tensor cores; the decode block streams its keys at a higher rate per SM than the wgmma block, so
// the SMs that hold one-token blocks free up sooner for the prompt's tiles (NOTES.md).
//
// Launch: as wgmma_bf16_d512 (grid.x = token tiles of 8, grid.y = num_q_heads / 8, grid.z = key
// splits; block kThreads; dynamic shared memory kSmemBytes; the params and the K/V tensor maps).
// Under split-KV both blocks write their partial rows where the merge reads them
// (kernels/common/split_partials.cuh); each cuts its keys by its own key tile.
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/tile_order.cuh"
#include "kernels/common/wgmma_block.cuh"
#include "kernels/decode_bf16_d512/block.cuh"
#include "kernels/hopper/bf16_d512/block.cuh"
#include "kernels/hopper/bf16mix_d512/traits.h"

template <bool kSplit>
__device__ __forceinline__ void wgmma_bf16mix_entry(const wideattn_prefill_params& p,
                                                    const wideattn::KvTensorMaps& maps) {
    using Traits = wideattn::WgmmaBf16MixD512Traits;
    extern __shared__ __align__(Traits::kSmemAlign) unsigned char smem[];
    const wideattn::BlockWork work = wideattn::find_block_work_by_head(p, Traits::kTileTokens);
    if (!work.tile.found) return;
    if (work.tile.tile_len == 1) {  // block-uniform: every thread has the same tile
        wideattn::decode_bf16::decode_tile<kSplit>(p, work, smem);
        return;
    }
    wideattn::ptx::prefetch_kv_tensor_maps(maps);
    wideattn::hopper::bf16::bf16_tile<kSplit>(p, maps, work, smem);
}

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaBf16MixD512Traits::kThreads, 1)
wideattn_wgmma_bf16mix_d512(const __grid_constant__ wideattn_prefill_params p,
                            const __grid_constant__ wideattn::KvTensorMaps maps) {
    wgmma_bf16mix_entry<false>(p, maps);
}

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaBf16MixD512Traits::kThreads, 1)
wideattn_wgmma_bf16mix_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                  const __grid_constant__ wideattn::KvTensorMaps maps) {
    wgmma_bf16mix_entry<true>(p, maps);
}
