// traits.h - launch constants and manifest description of the split-KV merge kernel
// (merge_splits_bf16): after a split prefill launch (grid.z = num_splits), it combines each
// (token, query head) row's fp32 partial O and LSE from the workspace into bf16 o and fp32 lse.
//   grid.x = ceil(total_q * num_q_heads / kRowsPerBlock), block = kThreads, no shared memory;
//   one warp per row, each lane owning kDimsPerLane dims in kVecsPerLane 4-float vectors.
// In the manifest tile.tokens = kRowsPerBlock (rows per block), tile.keys and tile.heads 1.
// MergeSplitsTraits is the shape both merge kernels share (merge.cuh's body reads it);
// merge_splits_bf16_rows (kernels/merge/splits_bf16_rows/) gives a row several warps.
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"
#include "wideattn.h"

namespace wideattn {

// kWarpsPerRow warps per (token, head) row, each merging kHeadDim / kWarpsPerRow dims with
// kSplitsInFlightPerWarp splits' partial loads in flight.
template <int32_t kWarpsPerRowValue, int32_t kSplitsInFlightValue>
struct MergeSplitsTraits {
    static constexpr int32_t kWarpSize = 32;
    static constexpr int32_t kThreads = 128;
    static constexpr int32_t kWarpsPerRow = kWarpsPerRowValue;
    static constexpr int32_t kRowsPerBlock = kThreads / kWarpSize / kWarpsPerRow;
    static constexpr int32_t kHeadDim = 512;
    static constexpr int32_t kDimsPerWarp = kHeadDim / kWarpsPerRow;
    static constexpr int32_t kVecFloats = 4;  // one 16-byte load of a partial row
    static constexpr int32_t kVecsPerLane = kDimsPerWarp / (kWarpSize * kVecFloats);
    static constexpr int32_t kDimsPerLane = kVecsPerLane * kVecFloats;
    static constexpr int32_t kMaxGroup = 1 << 16;  // any GQA group: rows are (token, query head)
    // Split LSEs a lane holds (splits lane, lane + 32, ...: every split up to WIDEATTN_MAX_SPLITS),
    // and the partial O rows whose loads a warp issues before it adds any of them.
    static constexpr int32_t kLsePerLane = (WIDEATTN_MAX_SPLITS + kWarpSize - 1) / kWarpSize;
    static constexpr int32_t kSplitsInFlight = kSplitsInFlightValue;
    // Whether the first kSplitsInFlight splits' partial rows are loaded before the LSEs arrive
    // (merge.cuh); true in merge_splits_bf16_rows.
    static constexpr bool kEarlyLoads = false;
    // Whether the blocks let the next grid in the stream be scheduled right after their wait
    // (griddepcontrol.launch_dependents); true in merge_splits_bf16_rows. Scheduling only: a grid
    // after it that is not a programmatic dependent launch (none of the dispatcher's first launches
    // is) still starts after this grid has completed, so there the trigger does nothing.
    static constexpr bool kTriggersEarly = false;
    static constexpr int32_t kMinSm = 80;
    static_assert(kThreads % (kWarpSize * kWarpsPerRow) == 0, "whole rows per block");
    static_assert(kDimsPerWarp % (kWarpSize * kVecFloats) == 0, "whole vectors per lane");
    static_assert(kWarpSize % kSplitsInFlight == 0, "a lane's splits come in whole groups");

    // The manifest description of a merge kernel of this shape named `name` (entry `symbol`).
    static constexpr KernelDesc merge_desc(const char* name, const char* symbol) {
        return {name, symbol,
                kF32, kF32, kBF16,
                kHeadDim, kHeadDim, kHeadDim,
                1, kMaxGroup,
                kRowsPerBlock, 1, 1, kThreads, 0, kMinSm,
                "lse,deterministic", kKindMergeSplits};
    }
};

struct MergeSplitsBf16Traits : MergeSplitsTraits<1, 8> {
    static constexpr KernelDesc desc = merge_desc("merge_splits_bf16", "wideattn_merge_splits_bf16");
};

}  // namespace wideattn
