// v_transposed.h - the transposed e4m3 V cache layout (WIDEATTN_FLAG_V_TRANSPOSED,
// include/wideattn.h; docs/design.md "Transposed V") as plain host/device arithmetic, so the
// quantise kernel, its CPU reference, the test harness and the kernels that read the layout share
// one formula: each (block, kv_head) page holds head_dim rows of block_size codes, and inside each
// group of 16 slots the slots are interleaved into the key order of the FP8 P V's A fragment
// (position 4t + 2a + b of a group holds slot 8a + 2t + b: the two score columns 2t, 2t + 1 of
// each 8-key quad a lane holds sit next to each other, quad after quad).
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"

namespace wideattn {

// Manifest feature of the kernels that read V in this layout (and only in it).
constexpr char kFeatureVTransposed[] = "v_transposed";

constexpr int32_t kVGroupSlots = 16;  // slots interleaved together (kPageSizeMultiple)
constexpr int32_t kVPairSlots = 2;    // consecutive slots kept together (a lane's two score columns)
constexpr int32_t kVQuadSlots = 8;    // slots of one 8-column score quad
constexpr int32_t kVLaneBytes = kVGroupSlots / (kVQuadSlots / kVPairSlots);  // a lane's positions 4t .. 4t+3
static_assert(kVGroupSlots == kPageSizeMultiple, "an interleaved group never straddles a page");

// One TMA copy of the layout (kv_tensor_map.h): kVtBoxSlots positions (one group, 16 bytes) of
// kVtBoxDims consecutive dims, landing without swizzle as [dims][16 bytes], the K-major core
// matrices of the FP8 P V's B operand.
constexpr int32_t kVtBoxSlots = kVGroupSlots;
constexpr int32_t kVtBoxDims = 128;

// Row boxes. With block_size 16 a page row is one group, so the 16-byte rows of consecutive dims
// are contiguous, and a box's kVtBoxDims rows are 2 KB of contiguous memory. TMA makes one L2
// request per box row: described with 16-byte rows, such a box costs 128 requests; described as
// rows of kVtRowBytes (kVtRowDims dims x 16 positions: the map's innermost dimension), then
// head_dim / kVtRowDims row groups, the KV head and the block, the same box is 16 rows of 128
// bytes landing as the same bytes. The dispatcher encodes the map (dispatch/kv_tensor_maps.cpp) and
// the kernels compute the box coordinates by the same rule, v_row_boxes. H200, 2026-12-03: the
// 64-key alternating kernels 1.56-1.67x faster in prefill than with 16-byte rows, the L2 tag
// lookups of the V stream had been their limit (fp8/hopper_e4m3alt64_d512/NOTES.md).
constexpr int32_t kVtRowDims = 8;
constexpr int32_t kVtRowBytes = kVtRowDims * kVGroupSlots;  // 128
constexpr int32_t kVtBoxRows = kVtBoxDims / kVtRowDims;     // 16

// Whether the transposed V cache of these sizes is described with row boxes.
WIDEATTN_HOST_DEVICE constexpr bool v_row_boxes(int32_t block_size, int32_t head_dim) {
    return block_size == kVGroupSlots && head_dim % kVtRowDims == 0;
}

// Byte position of slot `slot` (0 .. block_size-1) inside its page row.
WIDEATTN_HOST_DEVICE constexpr int32_t v_slot_position(int32_t slot) {
    const int32_t group = slot / kVGroupSlots, in_group = slot % kVGroupSlots;
    const int32_t quad = in_group / kVQuadSlots, lane_pair = (in_group % kVQuadSlots) / kVPairSlots;
    return group * kVGroupSlots + lane_pair * kVLaneBytes + quad * kVPairSlots + in_group % kVPairSlots;
}

// The slot stored at byte position `position` of a page row (the inverse of v_slot_position).
WIDEATTN_HOST_DEVICE constexpr int32_t v_position_slot(int32_t position) {
    const int32_t group = position / kVGroupSlots, in_group = position % kVGroupSlots;
    const int32_t lane_pair = in_group / kVLaneBytes, quad = (in_group % kVLaneBytes) / kVPairSlots;
    return group * kVGroupSlots + quad * kVQuadSlots + lane_pair * kVPairSlots + in_group % kVPairSlots;
}

// Element offset of V(block, slot, head, d) in a transposed cache with the given block and head
// strides (elements = bytes: e4m3).
WIDEATTN_HOST_DEVICE constexpr int64_t v_transposed_offset(int64_t block, int32_t slot, int64_t head, int32_t dim,
                                                           int64_t block_stride, int64_t head_stride,
                                                           int32_t block_size) {
    return block * block_stride + head * head_stride + int64_t{dim} * block_size + v_slot_position(slot);
}

}  // namespace wideattn
