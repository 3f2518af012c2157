// layout.h - the shared-memory layouts of decode_bf16kfvw_d512 and the wgmma descriptors that read
// them, as plain host/device arithmetic (tests/test_kfvw_bf16_layout.cpp checks them on the CPU):
// the V stages and the Q' tile (128-byte swizzle, K-major: the score product's A and B), the same
// stage read MN-major as V^T (the P V product's A, imm-trans-a), the P^T tile (K-major without
// swizzle: the P V product's B), the dims of the warpgroups' O^T rows, and Q' as two bf16 terms.
#pragma once

#include <cstdint>

#include "kernels/common/k_from_v.h"
#include "kernels/common/kernel_desc.h"
#include "kernels/common/wgmma_decode_layout.h"
#include "kernels/common/wgmma_layout.h"
#include "kernels/decode_bf16kfvw_d512/traits.h"

namespace wideattn::kfvw_bf16 {

using Traits = DecodeBf16KfvWD512Traits;

// Byte offsets of 16-byte vector `vec` of a row of 512 bf16 in a V stage (row: the key) and in Q' (row:
// the term row), in the 128-byte-swizzled K-major layout of hopper::operand_offset.
WIDEATTN_HOST_DEVICE constexpr uint32_t stage_offset(int32_t key, int32_t vec) {
    return hopper::operand_offset<Traits, Traits::kTileKeysW>(key, vec);
}

WIDEATTN_HOST_DEVICE constexpr uint32_t fold_offset(int32_t row, int32_t vec) {
    return hopper::operand_offset<Traits, Traits::kTermColumns>(row, vec);
}

// The A descriptor of P V for warpgroup `group`, dim block `block` (0 .. 3: slab 4 group + block)
// and key step `step` (keys 16 step .. 16 step + 15): V^T MN-major (dims contiguous) from the
// stage, 64-dim slabs kStageSlabBytes apart (leading), 8-key atoms kAtomBytes apart (stride).
WIDEATTN_HOST_DEVICE inline hopper::SmemDescriptor pv_v_descriptor(uint32_t stage, int32_t group, int32_t block,
                                                                   int32_t step) {
    const int32_t slab = group * Traits::kPvDimBlocks + block;
    return hopper::swizzle128_descriptor(stage + slab * Traits::kStageSlabBytes +
                                             step * Traits::kPvStepKeys * Traits::kSwizzleBytes,
                                         Traits::kStageSlabBytes, Traits::kAtomBytes);
}

// Byte offset in a P^T tile of head `head` (0 .. 7) and key `key` (0 .. 63) of the tile.
WIDEATTN_HOST_DEVICE constexpr uint32_t p_offset(int32_t head, int32_t key) {
    return static_cast<uint32_t>((key / Traits::kCoreKeys) * Traits::kCoreBytes + head * Traits::kVecBytes +
                                 (key % Traits::kCoreKeys) * Traits::kElemBytes);
}

// The B descriptor of P V step `step` (keys 16 step .. 16 step + 15 of the tile).
WIDEATTN_HOST_DEVICE inline hopper::SmemDescriptor pv_p_descriptor(uint32_t p_tile, int32_t step) {
    return hopper::interleaved_descriptor(p_tile + step * Traits::kPvStepBytes, Traits::kPLeadingBytes,
                                          Traits::kPStrideBytes);
}

// The dim that accumulator row `row` (0 .. 63) of P V dim block `block` of warpgroup `group` holds.
WIDEATTN_HOST_DEVICE constexpr int32_t pv_row_dim(int32_t group, int32_t block, int32_t row) {
    return group * Traits::kGroupDims + block * Traits::kPvDimBlock + row;
}

// Whether 16-dim score block `block` (0 .. 31) holds a dim of a rotated Q load (the Q loads below
// rotated_q_loads, decode_bf16kfv_d512's: dims 32 q .. 32 q + 31 and their partners 256 on).
WIDEATTN_HOST_DEVICE constexpr bool block_rotates(int32_t block, int32_t rotated_q_loads) {
    return (block % Traits::kGroupScoreSteps) / Traits::kScoreStepsPerQLoad < rotated_q_loads;
}

// Q' = x as two bf16 values, x = hi + lo to about 2^-16 of |x| (hi = bf16(x), lo = bf16(x - hi),
// both nearest-even; x - hi is exact in fp32). A finite x past bf16's largest value takes hi =
// bf16(x) rounded toward zero, so hi stays finite and lo takes the rest; a non-finite x gives a
// non-finite hi and a NaN lo.
struct Bf16Terms {
    float hi;
    float lo;
};

WIDEATTN_HOST_DEVICE inline Bf16Terms split_bf16_terms(float x) {
    constexpr uint32_t kExponent = 0x7f800000u, kHighHalf = 0xffff0000u;
    const uint32_t bits = fp8::float_bits(x);
    float hi = round_to_bf16(x);
    if ((bits & kExponent) != kExponent && (fp8::float_bits(hi) & kExponent) == kExponent)
        hi = fp8::bits_float(bits & kHighHalf);
    return Bf16Terms{hi, round_to_bf16(x - hi)};
}

}  // namespace wideattn::kfvw_bf16
