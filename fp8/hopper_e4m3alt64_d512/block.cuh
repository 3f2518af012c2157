// block.cuh - one block of the Hopper-tier 8-bit kernels with alternating 64-key tiles, shared by
// wgmma_e4m3alt64_d512 (kernel.cu: e4m3 Q with a per-tensor scale, copied by cp.async) and
// wgmma_e4m3alt64kv_d512 (fp8/hopper_e4m3alt64kv_d512/: bf16 Q quantised in the kernel with one
// scale per block, as wgmma_e4m3kv_d512 does); K and V e4m3 with per-tensor scales, V in the
// transposed cache layout. wgmma_e4m3alt_d512's block (fp8/hopper_e4m3alt_d512/block.cuh: its
// place, geometry, prologue and streams over this kernel's traits) around the 64-key loop
// (mainloop.cuh); the epilogue is wgmma_e4m3pv_d512's. A sequence whose new tokens fit the token
// tile (decode and verification steps: its K/V streamed for this block alone, so the time is the
// stream's) takes the loop with P as two e4m3 terms; longer sequences' blocks share their K/V in
// L2 and are bound by the tensor pipe, and keep one term.
#pragma once

#include <cstdint>

#include "fp8/hopper_e4m3alt64_d512/mainloop.cuh"
#include "fp8/hopper_e4m3alt_d512/loads.cuh"
#include "fp8/hopper_e4m3alt_d512/mainloop.cuh"
#include "fp8/hopper_e4m3kv_d512/quantize_q.cuh"
#include "fp8/hopper_e4m3pv_d512/epilogue.cuh"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/kv_tensor_map.h"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/tile_order.cuh"
#include "kernels/common/wgmma_block.cuh"

namespace wideattn::hopper::e4m3alt64 {

// One block; kQuantizeQ: Q is bf16, quantised into shared memory with one scale per block, else
// e4m3 codes with the per-tensor *q_scale; kSplit: the split-KV instantiation (the key range of
// split blockIdx.z, rounded to lcm(64, block_size) keys by restrict_to_split, partials out).
template <class Traits, bool kQuantizeQ, bool kSplit>
__device__ __forceinline__ void wide_block(const wideattn_prefill_params& p, const KvTensorMaps& maps,
                                           unsigned char* smem) {
    BlockWork work;
    GroupPlace at;
    BlockGeometry geometry;
    if (!wgmma_block_start<Traits, kSplit>(p, &work, &at, &geometry)) return;

    const SharedMap map = e4m3alt::shared_map<Traits>(aligned_shared_base<Traits>(smem));
    const int64_t first_token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
    e4m3alt::Streams<Traits> streams;
    streams.init(p, maps, work.kv_head, at.group, p.block_table + geometry.table_offset, geometry.kv_end);
    e4m3alt::issue_prologue<Traits, !kQuantizeQ>(p, geometry, at, map, first_token, work.tile.tile_len, streams);
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
    if (work.tile.q_len <= Traits::kTileTokens)
        wide_mainloop<Traits, true>(p, geometry, at, map, streams, score_scale, o, state);
    else
        wide_mainloop<Traits, false>(p, geometry, at, map, streams, score_scale, o, state);
    e4m3pv::write_block_output<Traits, kSplit>(p, o, state, first_token, work.tile.tile_len, at.row_tile,
                                               work.kv_head, at.group, at.lane);
}

// The body of an entry point: the tensor-map prefetch while the block sets up, then the block.
template <class Traits, bool kQuantizeQ, bool kSplit>
__device__ __forceinline__ void wide_entry(const wideattn_prefill_params& p, const KvTensorMaps& maps) {
    extern __shared__ __align__(Traits::kSmemAlign) unsigned char smem[];
    ptx::prefetch_kv_tensor_maps(maps);
    wide_block<Traits, kQuantizeQ, kSplit>(p, maps, smem);
}

}  // namespace wideattn::hopper::e4m3alt64
