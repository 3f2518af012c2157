// block.cuh - one block of the Hopper-tier BF16 prefill kernel (kernel.cu): its work item (64 rows:
// 8 tokens x the 8 query heads of one KV head) in the head-slowest order, its keys (its split's
// under split-KV), the K/V streams, the key loop (mainloop.cuh) and the output
// (kernels/common/epilogue.cuh).
#pragma once

#include <cstdint>

#include "kernels/common/block_geometry.cuh"
#include "kernels/common/epilogue.cuh"
#include "kernels/common/kv_tensor_map.h"
#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/tile_order.cuh"
#include "kernels/common/wgmma_block.cuh"
#include "kernels/hopper/bf16_d512/loads.cuh"
#include "kernels/hopper/bf16_d512/mainloop.cuh"
#include "kernels/hopper/bf16_d512/traits.h"

namespace wideattn::hopper::bf16 {

// One block: its token tile in the head-slowest order, if any; kSplit: the split-KV instantiation
// (the key range of split blockIdx.z, partials out).
template <bool kSplit>
__device__ __forceinline__ void bf16_block(const wideattn_prefill_params& p, const KvTensorMaps& maps,
                                           unsigned char* smem) {
    using Traits = WgmmaBf16D512Traits;
    BlockWork work;
    GroupPlace at;
    BlockGeometry geometry;
    if (!wgmma_block_start<Traits, kSplit>(p, &work, &at, &geometry)) return;

    const SharedMap map = shared_map<Traits>(aligned_shared_base<Traits>(smem));

    const int64_t first_token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
    KvTmaStream<Traits> k_stream, v_stream;
    const int32_t* table_row = p.block_table + geometry.table_offset;
    k_stream.init(p, &maps.k, work.kv_head, at.group, table_row, geometry.kv_end);
    v_stream.init(p, &maps.v, work.kv_head, at.group, table_row, geometry.kv_end);
    issue_prologue<Traits>(p, geometry, at, map, first_token, work.tile.tile_len, k_stream, v_stream);

    float o[Traits::kDimNTiles][4];
    zero_output(o);
    RowState state{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};

    wgmma_mainloop<Traits>(p, geometry, at, map, k_stream, v_stream, o, state);
    const int32_t head = work.kv_head * Traits::kGroup + at.lane / 4;
    if constexpr (kSplit)
        write_partials<Traits>(p, o, state, first_token, work.tile.tile_len, at.row_tile, head, at.group, at.lane);
    else
        write_output<Traits>(p, o, state, first_token, work.tile.tile_len, at.row_tile, head, at.group, at.lane);
}

}  // namespace wideattn::hopper::bf16
