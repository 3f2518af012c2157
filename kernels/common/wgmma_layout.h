// wgmma_layout.h - the shared-memory operand layout of the Hopper-tier kernels and the wgmma
// matrix descriptors that read it, as plain host/device arithmetic (no CUDA intrinsics), so the
// CPU tests check the loaders' byte offsets against the descriptors step by step
// (tests/test_wgmma_layout.cpp). `Traits` is a kernel's traits (a WgmmaD512BlockTraits).
//
// Operand layout ([rows][row bytes], bf16, fp16 or e4m3): slab s = bytes [128 s, 128 s + 128) of
// every row is a [rows][128 bytes] block at s * rows * 128; the 16-byte column c of row r is
// stored at column c ^ (r % 8): wgmma's 128-byte swizzle, with 8-row atoms of 1024 bytes (the
// base must be 1024-byte aligned). The FP8 P V of wgmma_e4m3pv_d512 reads V K-major without
// swizzle instead: 8-row x 16-byte core matrices of 128 contiguous bytes (fp8_pv_descriptor).
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"

namespace wideattn::hopper {

// Byte offset of row `row`, 16-byte column `vec` (counted over the whole row) in an operand of
// kRows rows.
template <class Traits, int32_t kRows>
WIDEATTN_HOST_DEVICE constexpr uint32_t operand_offset(int32_t row, int32_t vec) {
    return static_cast<uint32_t>((vec / Traits::kVecsPerSlabRow) * kRows * Traits::kSwizzleBytes +
                                 row * Traits::kSwizzleBytes +
                                 ((vec % Traits::kVecsPerSlabRow) ^ (row % Traits::kAtomRows)) * Traits::kVecBytes);
}

// Matrix descriptor (PTX ISA "matrix descriptor" for wgmma): start address, leading- and
// stride-dimension byte offsets (all in 16-byte units, 14 bits each) and the swizzle mode. Kept
// as two 32-bit words: moving a descriptor inside shared memory adds to the start address in the
// low word only (shared addresses are < 2^18 bytes, so the 14-bit field never carries).
constexpr uint32_t kDescSwizzle128High = 1u << 30;  // bits 62-63 = 1: 128-byte swizzle
constexpr uint32_t kDescAddressMask = 0x3FFFF;
constexpr int kDescUnitShift = 4;
constexpr int kDescLeadingShift = 16;
constexpr uint32_t kDescFieldMask = 0x3FFF;

constexpr uint32_t kDescNoSwizzleHigh = 0;  // bits 62-63 = 0: no swizzle (8-row x 16-byte core matrices)

struct SmemDescriptor {
    uint32_t low;   // start address, leading-dimension byte offset
    uint32_t high;  // stride-dimension byte offset, swizzle mode
};

WIDEATTN_HOST_DEVICE inline SmemDescriptor swizzle128_descriptor(uint32_t shared_address, uint32_t leading_bytes,
                                                                 uint32_t stride_bytes) {
    return SmemDescriptor{((shared_address & kDescAddressMask) >> kDescUnitShift) |
                              ((leading_bytes >> kDescUnitShift) << kDescLeadingShift),
                          (stride_bytes >> kDescUnitShift) | kDescSwizzle128High};
}

// A descriptor of an operand without swizzle: core matrices of 8 rows x 16 bytes, each 128
// contiguous bytes; `leading_bytes` apart along K (K-major), `stride_bytes` apart along M / N.
WIDEATTN_HOST_DEVICE inline SmemDescriptor interleaved_descriptor(uint32_t shared_address, uint32_t leading_bytes,
                                                                  uint32_t stride_bytes) {
    return SmemDescriptor{((shared_address & kDescAddressMask) >> kDescUnitShift) |
                              ((leading_bytes >> kDescUnitShift) << kDescLeadingShift),
                          (stride_bytes >> kDescUnitShift) | kDescNoSwizzleHigh};
}

// A descriptor moved by `bytes` (a multiple of 16) inside shared memory.
WIDEATTN_HOST_DEVICE inline SmemDescriptor descriptor_plus(SmemDescriptor descriptor, uint32_t bytes) {
    return SmemDescriptor{descriptor.low + (bytes >> kDescUnitShift), descriptor.high};
}

struct ScoreDescriptors {
    SmemDescriptor q;  // A: Q rows, K-major
    SmemDescriptor k;  // B: key rows, K-major
};

// Descriptors of score step `step` (0 .. kSlabs * kStepsPerSlab - 1) of warpgroup `group`,
// whose Q and K span kSlabs slabs (both kernels step kScoreStepBytes of a 128-byte row per wgmma).
template <class Traits, int32_t kSlabs>
WIDEATTN_HOST_DEVICE inline ScoreDescriptors score_step_descriptors(uint32_t q_shared, uint32_t k_chunk, int32_t group,
                                                                    int32_t step) {
    const SmemDescriptor q_desc =
        swizzle128_descriptor(q_shared + group * kSlabs * Traits::kQSlabBytes, Traits::kVecBytes, Traits::kAtomBytes);
    const SmemDescriptor k_desc = swizzle128_descriptor(k_chunk + group * kSlabs * Traits::kChunkSlabBytes,
                                                        Traits::kVecBytes, Traits::kAtomBytes);
    const int32_t slab = step / Traits::kStepsPerSlab;
    const int32_t inside = (step % Traits::kStepsPerSlab) * Traits::kScoreStepBytes;
    return ScoreDescriptors{descriptor_plus(q_desc, slab * Traits::kQSlabBytes + inside),
                            descriptor_plus(k_desc, slab * Traits::kChunkSlabBytes + inside)};
}

// Descriptor of P V step `kk` (keys 16 kk .. 16 kk + 15 of the tile) of warpgroup `group`: the
// 16-bit V MN-major, 64-dim slabs kChunkSlabBytes apart (leading), 8-key atoms kAtomBytes apart
// (stride).
template <class Traits>
WIDEATTN_HOST_DEVICE inline SmemDescriptor pv_step_descriptor(uint32_t v_chunk, int32_t group, int32_t kk) {
    const SmemDescriptor v_desc =
        swizzle128_descriptor(v_chunk + group * Traits::kValueSlabsPerGroup * Traits::kChunkSlabBytes,
                              Traits::kChunkSlabBytes, Traits::kAtomBytes);
    return descriptor_plus(v_desc, kk * Traits::kPvK * Traits::kSwizzleBytes);
}

// Descriptor of the FP8 P V of warpgroup `group` (keys 0 .. 31 of the tile, one k32 wgmma): e4m3
// V K-major as the transposed V layout lands ([16-key sub-tile][dim][16 bytes] without swizzle,
// Traits::kVtSubTileBytes per sub-tile and warpgroup): 8-dim core matrices kVecBytes x kAtomRows
// apart (stride), the two 16-key halves a sub-tile apart (leading).
template <class Traits>
WIDEATTN_HOST_DEVICE inline SmemDescriptor fp8_pv_descriptor(uint32_t v_chunk, int32_t group) {
    return interleaved_descriptor(v_chunk + group * Traits::kGroupChunkBytes, Traits::kVtSubTileBytes,
                                  Traits::kAtomRows * Traits::kVecBytes);
}

}  // namespace wideattn::hopper
