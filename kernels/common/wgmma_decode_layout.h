// wgmma_decode_layout.h - the score k-step descriptors of the wgmma decode kernels
// decode_e4m3kfvw_d512 and decode_bf16kfvw_d512: a V stage and the Q' tile in the 128-byte-swizzled
// K-major layout (hopper::operand_offset), each step reading kScoreStepBytes of a slab row of both,
// as plain host/device arithmetic for the CPU layout tests.
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"
#include "kernels/common/wgmma_layout.h"

namespace wideattn {

// The descriptors of one score k-step: A = the stage's keys, B = Q''s term rows.
struct FoldScoreStep {
    hopper::SmemDescriptor v;
    hopper::SmemDescriptor q;
};

// Score k-step `step` over the stage at `stage` (slabs Traits::kStageSlabBytes apart) and Q' at
// `fold` (slabs Traits::kFoldSlabBytes apart): both at the step's bytes of its slab.
template <class Traits>
WIDEATTN_HOST_DEVICE inline FoldScoreStep fold_score_step(uint32_t stage, uint32_t fold, int32_t step) {
    constexpr int32_t kStepsPerSlab = Traits::kSwizzleBytes / Traits::kScoreStepBytes;
    const int32_t slab = step / kStepsPerSlab;
    const int32_t inside = (step % kStepsPerSlab) * Traits::kScoreStepBytes;
    return FoldScoreStep{hopper::swizzle128_descriptor(stage + slab * Traits::kStageSlabBytes + inside,
                                                       Traits::kVecBytes, Traits::kAtomBytes),
                         hopper::swizzle128_descriptor(fold + slab * Traits::kFoldSlabBytes + inside,
                                                       Traits::kVecBytes, Traits::kAtomBytes)};
}

}  // namespace wideattn
