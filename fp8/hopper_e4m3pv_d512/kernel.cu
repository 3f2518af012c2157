// kernel.cu - entry point of the Hopper-tier FP8 P V prefill kernel for head dim 512, GQA group 8
// (sm_90a): Q, K and V e4m3 with per-tensor scales *q_scale, *k_scale, *v_scale, V in the
// transposed cache layout (WIDEATTN_FLAG_V_TRANSPOSED), both products by FP8 wgmma (traits:
// traits.h; loads: loads.cuh and kernels/common/wgmma_loads.cuh; loop: mainloop.cuh; output:
// epilogue.cuh).
//
// Launch: as every prefill kernel (kernel_desc.h): grid.x = token tiles of 8, grid.y =
// num_q_heads / 8, grid.z = key splits (split-KV when > 1), block = kThreads, dynamic shared
// memory kSmemBytes; arguments: the params and the TMA tensor maps of k_cache (the engine layout)
// and v_cache (the transposed layout), encoded by the dispatcher (dispatch/kv_tensor_maps.cpp).
#include <cstdint>

#include "fp8/hopper_e4m3pv_d512/epilogue.cuh"
#include "fp8/hopper_e4m3pv_d512/loads.cuh"
#include "fp8/hopper_e4m3pv_d512/mainloop.cuh"
#include "fp8/hopper_e4m3pv_d512/traits.h"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/kv_tensor_map.h"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/tile_order.cuh"
#include "kernels/common/wgmma_block.cuh"

namespace wideattn::hopper::e4m3pv {

// One block; kSplit: the split-KV instantiation (the key range of split blockIdx.z, partials out).
template <bool kSplit>
__device__ __forceinline__ void e4m3pv_block(const wideattn_prefill_params& p, const KvTensorMaps& maps,
                                             unsigned char* smem) {
    using Traits = WgmmaE4m3PvD512Traits;
    const BlockWork work = find_block_work_by_head(p, Traits::kTileTokens);
    if (!work.tile.found) return;
    const GroupPlace at = group_place<Traits>();
    BlockGeometry geometry;
    block_geometry<Traits>(p, work, at.row_tile, &geometry);
    if constexpr (kSplit) restrict_to_split<Traits>(p, &geometry);

    const SharedMap map = shared_map<Traits>(aligned_shared_base<Traits>(smem));
    const int64_t first_token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
    const int32_t* table_row = p.block_table + geometry.table_offset;
    Streams<Traits> streams;
    streams.k.init(p, &maps.k, work.kv_head, at.group, table_row, geometry.kv_end);
    streams.v.init(p, &maps.v, work.kv_head, at.group, table_row, geometry.kv_end);
    issue_prologue<Traits>(p, geometry, at, map, first_token, work.tile.tile_len, streams);

    float o[Traits::kDimNTiles][4];
    zero_output(o);
    RowState state{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};
    const float score_scale = p.softmax_scale * kLog2e * __ldg(p.q_scale) * __ldg(p.k_scale);
    wgmma_e4m3pv_mainloop<Traits>(p, geometry, at, map, streams, score_scale, o, state);
    write_block_output<Traits, kSplit>(p, o, state, first_token, work.tile.tile_len, at.row_tile, work.kv_head,
                                       at.group, at.lane);
}

}  // namespace wideattn::hopper::e4m3pv

// The two entries: unsplit, and split-KV (grid.z = key splits), each its own function.
template <bool kSplit>
__device__ __forceinline__ void wgmma_e4m3pv_entry(const wideattn_prefill_params& p,
                                                   const wideattn::KvTensorMaps& maps) {
    using Traits = wideattn::WgmmaE4m3PvD512Traits;
    extern __shared__ __align__(Traits::kSmemAlign) unsigned char smem[];
    if (threadIdx.x == 0) {  // the first copies need the descriptors: fetch them while the block sets up
        wideattn::ptx::prefetch_tensor_map(&maps.k);
        wideattn::ptx::prefetch_tensor_map(&maps.v);
    }
    wideattn::hopper::e4m3pv::e4m3pv_block<kSplit>(p, maps, smem);
}

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaE4m3PvD512Traits::kThreads, 1)
wideattn_wgmma_e4m3pv_d512(const __grid_constant__ wideattn_prefill_params p,
                           const __grid_constant__ wideattn::KvTensorMaps maps) {
    wgmma_e4m3pv_entry<false>(p, maps);
}

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaE4m3PvD512Traits::kThreads, 1)
wideattn_wgmma_e4m3pv_d512_split(const __grid_constant__ wideattn_prefill_params p,
                                 const __grid_constant__ wideattn::KvTensorMaps maps) {
    wgmma_e4m3pv_entry<true>(p, maps);
}
