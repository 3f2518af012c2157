// kernel.cu - merge_splits_bf16_rows_early, the candidate split-KV merge with four warps per row
// and the first splits' partial rows loaded before their LSEs arrive (traits: traits.h; body and
// semantics: kernels/merge/splits_bf16/merge.cuh).
#include "kernels/common/block_timeline.cuh"
#include "kernels/merge/splits_bf16/merge.cuh"
#include "kernels/merge/splits_bf16_rows_early/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::MergeSplitsBf16RowsEarlyTraits::kThreads)
wideattn_merge_splits_bf16_rows_early(const __grid_constant__ wideattn_prefill_params p) {
    const wideattn::BlockTimeline timeline;
    wideattn::merge::merge_rows<wideattn::MergeSplitsBf16RowsEarlyTraits>(p);
    timeline.finish("merge_splits_bf16_rows_early");
}
