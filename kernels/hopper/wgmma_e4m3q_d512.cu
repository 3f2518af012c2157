// wgmma_e4m3q_d512.cu - entry point of the Hopper-tier 8-bit prefill kernel for head dim 512,
// GQA group 8 (sm_90a): Q, K and V e4m3 with per-tensor scales *q_scale, *k_scale, *v_scale
// (traits: wgmma_e4m3q_traits.h; loads: wgmma_e4m3q_loads.cuh; loop: wgmma_e4m3q_mainloop.cuh;
// output: the mma tier's epilogue, as the bf16 Hopper kernel).
//
// Launch: as every prefill kernel (kernel_desc.h): grid.x = token tiles of 8, grid.y =
// num_q_heads / 8, block = kThreads, dynamic shared memory kSmemBytes.
#include <cstdint>

#include "kernels/hopper/wgmma_e4m3q_loads.cuh"
#include "kernels/hopper/wgmma_e4m3q_mainloop.cuh"
#include "kernels/hopper/wgmma_e4m3q_traits.h"
#include "kernels/hopper/wgmma_tile_order.cuh"
#include "kernels/mma/mma_block_geometry.cuh"
#include "kernels/mma/mma_epilogue.cuh"

namespace wideattn::hopper {

static_assert(Et::kTileKeys == Wt::kTileKeys && Et::kThreads == Wt::kThreads &&
                  Et::kRowsPerBlock == Wt::kRowsPerBlock && Et::kExchangeBytes == Wt::kExchangeBytes,
              "the shared loop pieces of wgmma_mainloop.cuh assume the bf16 kernel's block and tile");

}  // namespace wideattn::hopper

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaE4m3QD512Traits::kThreads, 1)
wideattn_wgmma_e4m3q_d512(const __grid_constant__ wideattn_prefill_params p) {
    using namespace wideattn;
    using namespace wideattn::hopper;
    extern __shared__ __align__(Et::kSmemAlign) unsigned char smem[];

    const mma::BlockWork work = find_block_work_by_head(p, Et::kTileTokens);
    if (!work.tile.found) return;
    const GroupPlace at = group_place();
    mma::BlockGeometry geometry;
    mma::block_geometry<Et>(p, work, at.row_tile, &geometry);

    const uint32_t base = aligned_shared_base(smem);
    CodeSharedMap map;
    map.q = base;
    map.key_ring = map.q + Et::kQBytes;
    map.staged_ring = map.key_ring + Et::kKeySlots * Et::kCodeChunkBytes;
    map.value_ring = map.staged_ring + Et::kStagedSlots * Et::kCodeChunkBytes;
    map.exchange = map.value_ring + Et::kHalfValueSlots * Et::kHalfChunkBytes;

    const int64_t first_token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
    const int32_t* table_row = p.block_table + geometry.table_offset;
    CodeTileStream<true> k_stream;
    CodeTileStream<false> v_stream;
    k_stream.init(p, false, work.kv_head, at.group, at.thread, table_row, geometry.kv_end);
    v_stream.init(p, true, work.kv_head, at.group, at.thread, table_row, geometry.kv_end);
    issue_code_prologue(p, geometry, at, map, first_token, work.tile.tile_len, k_stream, v_stream);

    float o[Wt::kDimNTiles][4];
    zero_output(o);
    mma::RowState state{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};

    const float score_scale = p.softmax_scale * mma::kLog2e * __ldg(p.q_scale) * __ldg(p.k_scale);
    wgmma_e4m3q_mainloop(p, geometry, at, map, k_stream, v_stream, score_scale, o, state);
    const float value_scale = __ldg(p.v_scale);
#pragma unroll
    for (int32_t n = 0; n < Wt::kDimNTiles; ++n)
#pragma unroll
        for (int32_t e = 0; e < 4; ++e) o[n][e] *= value_scale;
    const int32_t head = work.kv_head * Et::kGroup + at.lane / 4;
    mma::write_output(p, o, state, first_token, work.tile.tile_len, at.row_tile, head, at.group, at.lane);
}
