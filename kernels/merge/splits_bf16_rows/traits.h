// traits.h - merge_splits_bf16_rows: merge_splits_bf16 (kernels/merge/splits_bf16/) with the four
// warps of a block on one (token, query head) row, 128 dims each, and the partial loads of 32
// splits in flight per warp (one load each): a batch-1 decode's merge (32 rows of 32 splits) runs
// on 32 blocks in one round of loads instead of 8 blocks in four; the partial O rows of the first
// 32 splits are loaded right after the wait for the split kernel, beside the split LSEs
// (kEarlyLoads, kernels/merge/splits_bf16/merge.cuh: one memory latency for both instead of one
// after the other), and the blocks let the next grid in the stream be scheduled right after their
// wait (kTriggersEarly: griddepcontrol.launch_dependents, which does nothing unless that grid is
// a programmatic dependent launch; none of the dispatcher's first launches is since the
// programmatic first launch of 80f8258 was removed. Kept: this kernel was measured with it, and
// leaving it out would change its machine code). The same arithmetic in the same order, so the
// same bits.
//   grid.x = total_q * num_q_heads (kRowsPerBlock 1), block = kThreads, no shared memory.
#pragma once

#include "kernels/merge/splits_bf16/traits.h"

namespace wideattn {

struct MergeSplitsBf16RowsTraits : MergeSplitsTraits<4, 32> {
    static constexpr bool kEarlyLoads = true;
    static constexpr bool kTriggersEarly = true;
    static constexpr KernelDesc desc = merge_desc("merge_splits_bf16_rows", "wideattn_merge_splits_bf16_rows");
};

}  // namespace wideattn
