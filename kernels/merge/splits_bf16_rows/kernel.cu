// kernel.cu - merge_splits_bf16_rows, the split-KV merge kernel with four warps per row (traits:
// traits.h; body and semantics: kernels/merge/splits_bf16/merge.cuh).
#include "kernels/common/block_timeline.cuh"
#include "kernels/merge/splits_bf16/merge.cuh"
#include "kernels/merge/splits_bf16_rows/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::MergeSplitsBf16RowsTraits::kThreads)
wideattn_merge_splits_bf16_rows(const __grid_constant__ wideattn_prefill_params p) {
    const wideattn::BlockTimeline timeline;
    wideattn::merge::merge_rows<wideattn::MergeSplitsBf16RowsTraits>(p);
    timeline.finish("merge_splits_bf16_rows");
}
