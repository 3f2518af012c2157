// kernel.cu - merge_splits_bf16, the split-KV merge kernel with one warp per row (traits: traits.h;
// body and semantics: merge.cuh).
#include "kernels/common/block_timeline.cuh"
#include "kernels/merge/splits_bf16/merge.cuh"
#include "kernels/merge/splits_bf16/traits.h"

extern "C" __global__ void __launch_bounds__(wideattn::MergeSplitsBf16Traits::kThreads)
wideattn_merge_splits_bf16(const __grid_constant__ wideattn_prefill_params p) {
    const wideattn::BlockTimeline timeline;
    wideattn::merge::merge_rows<wideattn::MergeSplitsBf16Traits>(p);
    timeline.finish("merge_splits_bf16");
}
