// traits.h - merge_splits_bf16_rows_early (candidate): merge_splits_bf16_rows
// (kernels/merge/splits_bf16_rows/) with the partial O rows of the first 32 splits loaded right
// after the wait for the split kernel, before the split LSEs arrive (kEarlyLoads,
// kernels/merge/splits_bf16/merge.cuh), so a batch-1 decode's merge waits one memory latency for
// both instead of one after the other; and the blocks let the next grid in the stream be scheduled
// right after their wait (kTriggersEarly: the next call's "pdl_wait" kernel, e.g.
// decode_bf16w4pdl_d512, then starts as the merge ends). The same arithmetic in the same order, so
// the same bits.
//   grid.x = total_q * num_q_heads (kRowsPerBlock 1), block = kThreads, no shared memory.
#pragma once

#include "kernels/merge/splits_bf16/traits.h"

namespace wideattn {

struct MergeSplitsBf16RowsEarlyTraits : MergeSplitsTraits<4, 32> {
    static constexpr bool kEarlyLoads = true;
    static constexpr bool kTriggersEarly = true;
    static constexpr KernelDesc desc =
        merge_desc("merge_splits_bf16_rows_early", "wideattn_merge_splits_bf16_rows_early");
};

}  // namespace wideattn
