// mma_e4m3_d512.cu - entry point of the 8-bit (e4m3 K/V, Q quantised in the kernel)
// mma.sync prefill kernel for head dim 512, GQA group 8 (traits: e4m3_attn_traits.h; loop:
// e4m3_mainloop.cuh; output: e4m3_epilogue.cuh). sm_89 and newer.
//
// Launch contract = the BF16 kernel's: grid.x = token_tile_count(total_q, num_seqs,
// kTileTokens), grid.y = num_q_heads / 8, block = kThreads, dynamic shared memory
// kSmemBytes. q bf16, k_cache / v_cache e4m3 (strides in bytes) with dequantisation scales
// *k_scale, *v_scale, o bf16, optional fp32 LSE.
#include <cstdint>
#include <cuda_bf16.h>

#include "fp8/attn_e4m3/e4m3_attn_traits.h"
#include "kernels/common/causal_keys.cuh"
#include "fp8/attn_e4m3/e4m3_epilogue.cuh"
#include "fp8/attn_e4m3/e4m3_mainloop.cuh"
#include "kernels/mma/mma_tile_order.cuh"

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
#error "wideattn_mma_e4m3_d512 needs mma.sync e4m3 and cvt e4m3x2: sm_89 or newer"
#endif

extern "C" __global__ void __launch_bounds__(wideattn::MmaE4m3D512Traits::kThreads, 1)
wideattn_mma_e4m3_d512(const __grid_constant__ wideattn_prefill_params p) {
    using namespace wideattn;
    using namespace wideattn::mma_e4m3;
    extern __shared__ __align__(16) unsigned char smem[];

    const mma::BlockWork work = mma::find_block_work(p, Tr::kTileTokens);
    if (!work.tile.found) return;
    const TokenTile& tile = work.tile;

    const int32_t warp = threadIdx.x / Tr::kWarpSize;
    const int32_t lane = threadIdx.x % Tr::kWarpSize;
    const int32_t half = warp % Tr::kDimSplit;
    const int32_t row_tile = warp / Tr::kDimSplit;
    const int32_t head = work.kv_head * Tr::kGroup + lane / 4;  // query head of the thread's rows
    const int64_t first_token = static_cast<int64_t>(tile.q_begin) + tile.tile_begin;

    const CausalKeys causal = causal_keys(p, tile);
    BlockGeometry geometry;
    geometry.kv_end = causal.visible(tile.tile_len);
    geometry.num_tiles = (geometry.kv_end + Tr::kTileKeys - 1) / Tr::kTileKeys;
    // Unclamped end for the thread's first row; the mask clamps it with kv_end, which equals
    // the clamped end for every valid row (kv_end is the clamped end of the last token).
    geometry.row_key_end = static_cast<int32_t>(causal.context_end + row_tile * Tr::kTokensPerRowTile + 1);
    geometry.kv_head = work.kv_head;
    geometry.table_offset = static_cast<int64_t>(tile.seq) * p.block_table_stride;

    uint32_t q[Tr::kQkSteps][4];
    float q_scale[2];
    load_q_fragments(p, q, q_scale, first_token, tile.tile_len, row_tile, head, half, lane);
    const float key_factor = __ldg(p.k_scale) * p.softmax_scale * kLog2e;
    geometry.score_factor[0] = q_scale[0] * key_factor;
    geometry.score_factor[1] = q_scale[1] * key_factor;

    float o[Tr::kDimNTiles][4];
#pragma unroll
    for (int32_t n = 0; n < Tr::kDimNTiles; ++n)
#pragma unroll
        for (int32_t c = 0; c < 4; ++c) o[n][c] = 0.0f;
    RowState state{{-INFINITY, -INFINITY}, {0.0f, 0.0f}};

    attention_mainloop(p, geometry, q, o, state, smem);

    // The tile's placement is recomputed rather than kept live across the loop (registers).
    const mma::BlockWork finished = mma::find_block_work(p, Tr::kTileTokens);
    const int32_t out_lane = threadIdx.x % Tr::kWarpSize;
    const int32_t out_warp = threadIdx.x / Tr::kWarpSize;
    write_output(p, o, state, __ldg(p.v_scale), static_cast<int64_t>(finished.tile.q_begin) + finished.tile.tile_begin,
                 finished.tile.tile_len, out_warp / Tr::kDimSplit, finished.kv_head * Tr::kGroup + out_lane / 4,
                 out_warp % Tr::kDimSplit, out_lane);
}
