// kv_tensor_map.h - a paged K/V cache described as a TMA tensor, for kernels with the "tma_kv"
// feature: the rank, dimension order and copy box of the two tensor maps (K and V) that the
// dispatcher encodes per call (dispatch/kv_tensor_maps.cpp) and passes as the kernel's second
// argument, and that the kernel addresses its copies with. One header for both sides, so the
// coordinates the kernel sends match the dimensions the host described.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "kernels/common/kernel_desc.h"
#include "kernels/common/v_transposed.h"

namespace wideattn {

// Manifest feature of kernels that take KvTensorMaps as their second argument.
constexpr char kFeatureTmaKv[] = "tma_kv";

// Dimensions of the cache tensor, innermost first: the elements of one key's head vector, the KV
// head, the slot inside a block (page), the block. Coordinates are sent in this order.
constexpr int32_t kKvMapDimElem = 0;
constexpr int32_t kKvMapDimHead = 1;
constexpr int32_t kKvMapDimSlot = 2;
constexpr int32_t kKvMapDimBlock = 3;
constexpr int32_t kKvMapRank = 4;

// One copy: 128 bytes of a key's head vector (the 128-byte swizzle span) for kPageSizeMultiple
// (16) consecutive slots of one head in one block. Every block size is a multiple of it, so a box
// never crosses a page; a box whose block coordinate is num_blocks lies outside the tensor and
// lands as zeros.
constexpr int32_t kKvBoxBytes = 128;
constexpr int32_t kKvBoxSlots = kPageSizeMultiple;

// The transposed e4m3 V cache (WIDEATTN_FLAG_V_TRANSPOSED, kernels/common/v_transposed.h) as a
// tensor, innermost first: the slot positions of a page row (contiguous), the head dim (rows
// block_size bytes apart), the KV head, the block. One copy is kVtBoxSlots (16) positions of
// kVtBoxDims consecutive dims without swizzle (v_transposed.h).
constexpr int32_t kVtMapDimSlot = 0;
constexpr int32_t kVtMapDimElem = 1;
constexpr int32_t kVtMapDimHead = 2;
constexpr int32_t kVtMapDimBlock = 3;

// The kernel's second argument (__grid_constant__): tensor maps of k_cache and v_cache.
struct KvTensorMaps {
    CUtensorMap k;
    CUtensorMap v;
};

}  // namespace wideattn
