// split_partials.cuh - where a split-KV block (grid.z > 1) writes its partial results in the
// caller's workspace: the fp32 O row (normalised by the split's own row sum) and the natural-log
// LSE of (split blockIdx.z, token, query head); layout in kernels/common/kernel_desc.h
// (split_lse_offset). The merge kernel (kernels/merge/splits_bf16) reads them back.
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"
#include "wideattn.h"

namespace wideattn {

// Row index of (this block's split, token, head) in the partial arrays.
__device__ __forceinline__ int64_t split_row(const wideattn_prefill_params& p, int64_t token, int32_t head) {
    return (static_cast<int64_t>(blockIdx.z) * p.total_q + token) * p.num_q_heads + head;
}

__device__ __forceinline__ float* split_o_row(const wideattn_prefill_params& p, int64_t row) {
    return static_cast<float*>(p.workspace) + row * p.head_dim;
}

__device__ __forceinline__ float* split_lse(const wideattn_prefill_params& p, int64_t row) {
    const int64_t offset = split_lse_offset(gridDim.z, p.total_q, p.num_q_heads, p.head_dim);
    return reinterpret_cast<float*>(static_cast<char*>(p.workspace) + offset) + row;
}

}  // namespace wideattn
