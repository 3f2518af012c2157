// block.cuh - one block of the Hopper-tier 8-bit kernels (a token tile of one KV head), shared by
// wgmma_e4m3q_d512 (kernel.cu: Q already e4m3, copied by cp.async with the first K tile) and
// wgmma_e4m3kv_d512 (fp8/hopper_e4m3kv_d512/: bf16 Q quantised in the kernel). Where Q comes from
// is the QSource parameter:
//   QSource::kCopiesCodes   Q codes are cp.async'd in the prologue's first group
//   QSource::scale(...)     called after the K/V prologue is issued: puts the Q codes the copy
//                           did not into shared memory (visible to the async proxy by the first
//                           group_loads_landed) and returns the scale of Q's codes
// Everything else (the K/V streams, the key loop, the epilogue, the split-KV form) is common.
#pragma once

#include <cstdint>

#include "fp8/hopper_e4m3q_d512/epilogue.cuh"
#include "fp8/hopper_e4m3q_d512/loads.cuh"
#include "fp8/hopper_e4m3q_d512/mainloop.cuh"
#include "kernels/common/block_geometry.cuh"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/tile_order.cuh"
#include "kernels/common/wgmma_block.cuh"
#include "wideattn.h"

namespace wideattn::hopper::e4m3q {

// Q already e4m3 in global memory with the per-tensor scale *q_scale.
struct CodedQ {
    static constexpr bool kCopiesCodes = true;

    template <class Traits>
    __device__ __forceinline__ static float scale(const wideattn_prefill_params& p, uint32_t, const CodeSharedMap<Traits>&,
                                                  int64_t, int32_t, int32_t, const GroupPlace&) {
        return __ldg(p.q_scale);
    }
};

// One block; kSplit: the split-KV instantiation (the key range of split blockIdx.z, partials out).
template <class Traits, class QSource, bool kSplit>
__device__ __forceinline__ void e4m3_block(const wideattn_prefill_params& p, unsigned char* smem) {
    BlockWork work;
    GroupPlace at;
    BlockGeometry geometry;
    if (!wgmma_block_start<Traits, kSplit>(p, &work, &at, &geometry)) return;

    const uint32_t base = aligned_shared_base<Traits>(smem);
    const CodeSharedMap<Traits> map = CodeSharedMap<Traits>::at(base);

    const int64_t first_token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
    const int32_t* table_row = p.block_table + geometry.table_offset;
    CodeTileStream<Traits, true> k_stream;
    CodeTileStream<Traits, false> v_stream;
    k_stream.init(p, false, work.kv_head, at.group, at.thread, table_row, geometry.kv_end);
    v_stream.init(p, true, work.kv_head, at.group, at.thread, table_row, geometry.kv_end);
    issue_code_prologue<Traits, QSource::kCopiesCodes>(p, geometry, at, map, first_token, work.tile.tile_len, k_stream,
                                                       v_stream);

    float o[Traits::kDimNTiles][4];
    zero_output(o);
    RowState state{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};

    const float score_scale =
        p.softmax_scale * kLog2e *
        QSource::template scale<Traits>(p, base, map, first_token, work.tile.tile_len, work.kv_head, at) *
        __ldg(p.k_scale);
    wgmma_e4m3q_mainloop<Traits>(p, geometry, at, map, k_stream, v_stream, score_scale, o, state);
    write_scaled_output<Traits, kSplit>(p, o, state, first_token, work.tile.tile_len, at.row_tile, work.kv_head, at.group,
                                        at.lane);
}

}  // namespace wideattn::hopper::e4m3q
