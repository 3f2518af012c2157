// k_from_v_tables.cuh - the shared-memory tables of the kernels that rebuild K from V
// (decode_e4m3kfv_d512, decode_bf16kfv_d512): k_norm's weight (head_dim fp32) and inv_freq of the
// head_dim / 2 frequencies (fp32, 0 from rotary_dims / 2 on), staged once per block, one
// frequency and two weights per thread, and read back as vectors by the K build.
#pragma once

#include <cstdint>

#include "kernels/common/k_from_v.h"

namespace wideattn {

constexpr uint32_t kKFromVTableEntryBytes = sizeof(float);  // one table entry in shared memory

// Stages the two tables at `weight` and `freq` (k_from_v_inv_freq: the caller's entries below
// rotary_dims / 2, or computed from rope_theta; 0 past them), read within their validated extents
// (head_dim and rotary_dims / 2 entries). Needs Traits::kThreads == head_dim / 2. Returns the
// thread's two weights. Visible to the block after its next barrier.
template <class Traits>
__device__ __forceinline__ float2 stage_k_from_v_tables(const KFromV& kfv, uint32_t weight, uint32_t freq) {
    static_assert(Traits::kHeadDim == 2 * Traits::kThreads, "one frequency and two weights per thread");
    const int32_t thread = static_cast<int32_t>(threadIdx.x);
    // Two scalar loads: the table is only 4-byte aligned (dispatch/validation.cpp).
    const float2 w = make_float2(__ldg(kfv.k_norm_scale + 2 * thread), __ldg(kfv.k_norm_scale + 2 * thread + 1));
    const float inv_freq = k_from_v_inv_freq(kfv, thread, Traits::kHeadDim);
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(weight + 2 * kKFromVTableEntryBytes * thread), "f"(w.x),
                 "f"(w.y)
                 : "memory");
    asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(freq + kKFromVTableEntryBytes * thread), "f"(inv_freq) : "memory");
    return w;
}

}  // namespace wideattn
