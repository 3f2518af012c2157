// block.cuh - one block of the Hopper-tier 8-bit kernels with alternating key tiles, shared by
// wgmma_e4m3alt_d512 (kernel.cu: Q already e4m3, copied by cp.async) and wgmma_e4m3altkv_d512
// (fp8/hopper_e4m3altkv_d512/: bf16 Q quantised in the kernel with one scale per block, as
// wgmma_e4m3kv_d512 does); K and V e4m3 with per-tensor scales, V in the transposed cache layout.
// The block's place, geometry and epilogue are wgmma_e4m3pv_d512's (fp8/hopper_e4m3pv_d512/).
#pragma once

#include <cstdint>

#include "fp8/hopper_e4m3alt_d512/loads.cuh"
#include "fp8/hopper_e4m3kv_d512/quantize_q.cuh"
#include "fp8/hopper_e4m3alt_d512/mainloop.cuh"
#include "fp8/hopper_e4m3pv_d512/epilogue.cuh"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/kv_tensor_map.h"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/tile_order.cuh"
#include "kernels/common/wgmma_block.cuh"

namespace wideattn::hopper::e4m3alt {

// One block; kQuantizeQ: Q is bf16, quantised into shared memory with one scale per block, else
// e4m3 codes with the per-tensor *q_scale; kSplit: the split-KV instantiation (the key range of
// split blockIdx.z, partials out).
template <class Traits, bool kQuantizeQ, bool kSplit>
__device__ __forceinline__ void alternating_block(const wideattn_prefill_params& p, const KvTensorMaps& maps,
                                                  unsigned char* smem) {
    BlockWork work;
    GroupPlace at;
    BlockGeometry geometry;
    if (!wgmma_block_start<Traits, kSplit>(p, &work, &at, &geometry)) return;

    const SharedMap map = shared_map<Traits>(aligned_shared_base<Traits>(smem));
    const int64_t first_token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
    Streams<Traits> streams;
    streams.init(p, maps, work.kv_head, at.group, p.block_table + geometry.table_offset, geometry.kv_end);
    issue_prologue<Traits, !kQuantizeQ>(p, geometry, at, map, first_token, work.tile.tile_len, streams);
    float block_q_scale = 0.0f;  // kQuantizeQ: the block's Q scale
    if constexpr (kQuantizeQ)
        block_q_scale = e4m3kv::quantize_q_block<Traits>(
            p, map.q, aligned_shared_base<Traits>(smem) + Traits::SmemPlan::kQAmax, first_token,
            work.tile.tile_len, work.kv_head, at.group, at.thread);

    float o[Traits::kDimNTiles][4];
    zero_output(o);
    RowState state{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};
    const float score_scale =
        p.softmax_scale * kLog2e * (kQuantizeQ ? block_q_scale : __ldg(p.q_scale)) * __ldg(p.k_scale);
    alternating_mainloop<Traits>(p, geometry, at, map, streams, score_scale, o, state);
    e4m3pv::write_block_output<Traits, kSplit>(p, o, state, first_token, work.tile.tile_len, at.row_tile,
                                               work.kv_head, at.group, at.lane);
}

// The body of an entry point: the tensor-map prefetch while the block sets up, then the block.
template <class Traits, bool kQuantizeQ, bool kSplit>
__device__ __forceinline__ void alternating_entry(const wideattn_prefill_params& p, const KvTensorMaps& maps) {
    extern __shared__ __align__(Traits::kSmemAlign) unsigned char smem[];
    ptx::prefetch_kv_tensor_maps(maps);
    alternating_block<Traits, kQuantizeQ, kSplit>(p, maps, smem);
}

}  // namespace wideattn::hopper::e4m3alt
