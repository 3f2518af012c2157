// layout.h - the shared-memory layouts of decode_e4m3kfvw_d512 and the wgmma descriptors that read
// them, as plain host/device arithmetic (tests/test_kfvw_layout.cpp checks them on the CPU): the
// V stages and the Q' tile (128-byte swizzle, K-major: the score product's A and B), the P^T tile
// (K-major without swizzle: the P V product's B) with its keys in the order of the V^T register
// fragments, and which dim a row of those fragments holds.
#pragma once

#include <cstdint>

#include "fp8/decode_e4m3kfvw_d512/traits.h"
#include "kernels/common/kernel_desc.h"
#include "kernels/common/wgmma_decode_layout.h"
#include "kernels/common/wgmma_layout.h"

namespace wideattn::kfvw {

using Traits = DecodeE4m3KfvWD512Traits;

// Byte offsets of 16-byte vector `vec` of a row of 512 e4m3 in a V stage (row: the key) and in Q' (row:
// the term row), in the 128-byte-swizzled K-major layout of hopper::operand_offset.
WIDEATTN_HOST_DEVICE constexpr uint32_t stage_offset(int32_t key, int32_t vec) {
    return hopper::operand_offset<Traits, Traits::kGroupTileKeys>(key, vec);
}

WIDEATTN_HOST_DEVICE constexpr uint32_t fold_offset(int32_t row, int32_t vec) {
    return hopper::operand_offset<Traits, Traits::kTermColumns>(row, vec);
}

// The V^T fragments of the P V product (PTX m64nNk32 8-bit A layout: register 0 = row g, k 4t ..
// 4t + 3; 1 = row g + 8; 2, 3 the same at k + 16) come from transposed ldmatrix (b16) of 8-key
// blocks and a byte permute: lane (g, t) holds keys 2t, 2t + 1, 8 + 2t, 9 + 2t of a 16-key group
// at k 4t .. 4t + 3. So key `key` (0 .. 15) of a group is k position pv_key_position(key) of it.
WIDEATTN_HOST_DEVICE constexpr int32_t pv_key_position(int32_t key) {
    return 4 * ((key % 8) / 2) + 2 * (key / 8) + key % 2;
}

// Byte offset in the P^T tile of column `column` (0 .. 15: head, then kGroup + head for the low
// terms) and key `key` (0 .. 63) of the tile.
WIDEATTN_HOST_DEVICE constexpr uint32_t p_offset(int32_t column, int32_t key) {
    constexpr int32_t kGroupKeys = 16;
    return static_cast<uint32_t>((2 * (key / kGroupKeys) + column / Traits::kAtomRows) * Traits::kCoreBytes +
                                 (column % Traits::kAtomRows) * Traits::kVecBytes + pv_key_position(key % kGroupKeys));
}

// The B descriptor of P V step `step` (keys 32 step .. 32 step + 31 of the tile).
WIDEATTN_HOST_DEVICE inline hopper::SmemDescriptor pv_step_descriptor(uint32_t p_tile, int32_t step) {
    return hopper::interleaved_descriptor(p_tile + step * Traits::kPvStepBytes, Traits::kPLeadingBytes,
                                          Traits::kPStrideBytes);
}

// The dim that row `row` (0 .. 63) of P V dim block `block` holds: warp row / 16 of the
// warpgroup, its 16-byte vector 4 block + warp; rows g: dim 2g of the vector, rows g + 8: 2g + 1.
WIDEATTN_HOST_DEVICE constexpr int32_t pv_row_dim(int32_t block, int32_t row) {
    constexpr int32_t kWarpRows = 16;
    const int32_t warp = row / kWarpRows, r = row % kWarpRows;
    return block * Traits::kPvDimBlock + warp * Traits::kVecBytes + 2 * (r % 8) + r / 8;
}

}  // namespace wideattn::kfvw
