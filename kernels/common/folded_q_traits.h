// folded_q_traits.h - the traits the folded-Q forms of the K-from-V decode kernels add to their
// base's (decode_e4m3kfvf_d512 over decode_e4m3kfvb_d512, decode_bf16kfvf_d512 over
// decode_bf16kfv_d512): kFoldQ, and a second Q tile for Q' (the base's Q rows and layout,
// kQBytes, 16-byte aligned) after the base's shared memory. Each form adds its KernelDesc.
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"

namespace wideattn {

template <class Base>
struct FoldedQTraits : Base {
    static constexpr bool kFoldQ = true;

    struct SmemPlan : Base::SmemPlan {
        static constexpr int32_t kQFold = (Base::SmemPlan::kEnd + Base::kVecBytes - 1) / Base::kVecBytes * Base::kVecBytes;
        static constexpr int32_t kEnd = kQFold + Base::kQBytes;
        static constexpr int32_t kBytes = kEnd;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;

    static_assert(SmemPlan::kQFold % Base::kVecBytes == 0, "Q' is read and written by 16-byte shared accesses");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");
};

}  // namespace wideattn
