// wgmma_bf16_d512.cu - entry point of the Hopper-tier BF16 prefill kernel for head dim 512,
// GQA group 8 (sm_90a; traits: wgmma_traits.h; loads: wgmma_loads.cuh; loop:
// wgmma_mainloop.cuh; output: the mma tier's epilogue, whose register layout wgmma shares).
//
// Launch: grid.x = token_tile_count(total_q, num_seqs, kTileTokens), grid.y = num_q_heads / 8,
// block = kThreads, dynamic shared memory kSmemBytes; arguments: the params and the TMA tensor
// maps of k_cache and v_cache (KvTensorMaps, encoded by the dispatcher). Each block computes 64 rows (8 tokens
// x the 8 query heads of one KV head) over every key they can see.
#include <cstdint>

#include "kernels/common/kv_tensor_map.h"
#include "kernels/hopper/wgmma_loads.cuh"
#include "kernels/hopper/wgmma_mainloop.cuh"
#include "kernels/hopper/wgmma_tile_order.cuh"
#include "kernels/hopper/wgmma_traits.h"
#include "kernels/mma/mma_block_geometry.cuh"
#include "kernels/mma/mma_epilogue.cuh"

namespace wideattn::hopper {

// write_output of the mma tier stores a warp's 16 rows x 256 dims from o[32][4] in the
// m16n8 accumulator layout; a warp's share of the wgmma m64n256 accumulator is the same.
static_assert(Wt::kDimNTiles == mma::Tr::kDimNTiles && Wt::kDimsPerGroup == mma::Tr::kDimsPerWarp &&
                  Wt::kTokensPerRowTile == mma::Tr::kTokensPerRowTile && Wt::kAccumN == mma::Tr::kMmaN &&
                  Wt::kGroup == mma::Tr::kGroup,
              "the mma-tier epilogue's layout must match the wgmma accumulator");

}  // namespace wideattn::hopper

extern "C" __global__ void __launch_bounds__(wideattn::WgmmaBf16D512Traits::kThreads, 1)
wideattn_wgmma_bf16_d512(const __grid_constant__ wideattn_prefill_params p,
                         const __grid_constant__ wideattn::KvTensorMaps maps) {
    using namespace wideattn;
    using namespace wideattn::hopper;
    extern __shared__ __align__(Wt::kSmemAlign) unsigned char smem[];

    if (threadIdx.x == 0) {  // the first copies need the descriptors: fetch them while the block sets up
        prefetch_tensor_map(&maps.k);
        prefetch_tensor_map(&maps.v);
    }
    const mma::BlockWork work = find_block_work_by_head(p, Wt::kTileTokens);
    if (!work.tile.found) return;
    const GroupPlace at = group_place();
    mma::BlockGeometry geometry;
    mma::block_geometry<Wt>(p, work, at.row_tile, &geometry);

    const uint32_t base = aligned_shared_base(smem);
    SharedMap map;
    map.q = base;
    map.ring = map.q + Wt::kQBytes;
    map.exchange = map.ring + Wt::kRingSlots * Wt::kChunkBytes;
    map.barriers = map.exchange + Wt::kExchangeBytes;

    const int64_t first_token = static_cast<int64_t>(work.tile.q_begin) + work.tile.tile_begin;
    KvTmaStream k_stream, v_stream;
    const int32_t* table_row = p.block_table + geometry.table_offset;
    k_stream.init(p, &maps.k, work.kv_head, at.group, table_row, geometry.kv_end);
    v_stream.init(p, &maps.v, work.kv_head, at.group, table_row, geometry.kv_end);
    issue_prologue(p, geometry, at, map, first_token, work.tile.tile_len, k_stream, v_stream);

    float o[Wt::kDimNTiles][4];
    zero_output(o);
    mma::RowState state{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};

    wgmma_mainloop(p, geometry, at, map, k_stream, v_stream, o, state);
    const int32_t head = work.kv_head * Wt::kGroup + at.lane / 4;
    mma::write_output(p, o, state, first_token, work.tile.tile_len, at.row_tile, head, at.group, at.lane);
}
