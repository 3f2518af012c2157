// epilogue.cuh - finishes a block of the Hopper-tier FP8 P V kernel: the P scale 2^kProbScaleLog2
// leaves the row maxima (O and the row sums both carry it, so O / l is unchanged and the LSE is
// of the unscaled P), then the 8-bit Hopper epilogue (fp8/hopper_e4m3q_d512/epilogue.cuh: O times
// v_scale, the shared BF16 epilogue or, kSplit, the split-KV partials).
#pragma once

#include <cstdint>

#include "fp8/hopper_e4m3q_d512/epilogue.cuh"
#include "kernels/common/online_softmax.cuh"
#include "wideattn.h"

namespace wideattn::hopper::e4m3pv {

template <class Traits, bool kSplit>
__device__ __forceinline__ void write_block_output(const wideattn_prefill_params& p,
                                                   float (&o)[Traits::kDimNTiles][4], RowState& state,
                                                   int64_t first_token, int32_t tile_len, int32_t row_tile,
                                                   int32_t kv_head, int32_t group, int32_t lane) {
#pragma unroll
    for (int32_t r = 0; r < 2; ++r)
        if (state.max_log2[r] != -INFINITY) state.max_log2[r] -= Traits::kProbScaleLog2;
    e4m3q::write_scaled_output<Traits, kSplit>(p, o, state, first_token, tile_len, row_tile, kv_head, group, lane);
}

}  // namespace wideattn::hopper::e4m3pv
