// kv_tensor_maps.h - the host side of kernels with the "tma_kv" feature: the K and V caches of a
// prefill call described as TMA tensors (kernels/common/kv_tensor_map.h gives rank, order and
// box), whether the caller's strides can be described that way (selection skips the kernel when
// not), and the encoding through the driver's cuTensorMapEncodeTiled, resolved lazily.
#pragma once

#include <cstdint>
#include <string>

#include "dispatch/driver.h"
#include "kernels/common/kv_tensor_map.h"
#include "wideattn.h"

namespace wideattn {

// One cache as a TMA tensor: sizes (elements) per dimension in kKvMapDim* order, and the byte
// strides of dimensions 1..3.
struct KvMapLayout {
    uint64_t dims[kKvMapRank];
    uint64_t strides[kKvMapRank - 1];
};

// For params that kv_map_unsupported accepts (its products are then known to fit). A V cache in
// the transposed layout (WIDEATTN_FLAG_V_TRANSPOSED) is described in kVtMapDim* order instead,
// byte strides block_size, v_head_stride and v_block_stride, and copied in boxes of kVtBoxSlots
// x kVtBoxDims without swizzle; where v_row_boxes holds (block_size 16), as rows of kVtRowBytes,
// head_dim / kVtRowDims of them kVtRowBytes apart, copied in boxes of kVtRowBytes x kVtBoxRows.
KvMapLayout kv_map_layout(const wideattn_prefill_params& p, bool is_value);

// The map of a transposed V cache in either form (kv_map_layout takes row_boxes from v_row_boxes).
KvMapLayout transposed_v_map_layout(const wideattn_prefill_params& p, bool row_boxes);

// The forms of a map (TensorMapKey::transposed): a cache in the engine layout (128-byte swizzle,
// boxes of kKvBoxBytes x kKvBoxSlots), a transposed V cache in 16-byte rows (boxes of kVtBoxSlots x
// kVtBoxDims) or, where v_row_boxes holds, in 128-byte rows (boxes of kVtRowBytes x kVtBoxRows).
constexpr uint32_t kMapEngine = 0;
constexpr uint32_t kMapTransposed = 1;
constexpr uint32_t kMapTransposedRows = 2;

// What one map is encoded from (the key of TensorMapCache): the base, the data type and the layout.
struct TensorMapKey {
    uint64_t base;
    uint32_t data_type;   // CUtensorMapDataType
    uint32_t transposed;  // kMap*: the engine layout, or a transposed V cache (WIDEATTN_FLAG_V_TRANSPOSED, no swizzle)
    KvMapLayout layout;
    bool operator==(const TensorMapKey& o) const;
};

// The key of the K (is_value false) or V map of params kv_map_unsupported accepts, over `base`.
TensorMapKey kv_map_key(const wideattn_prefill_params& p, bool is_value, const void* base);

// Encodes one map (the driver must have cuTensorMapEncodeTiled). WIDEATTN_ERROR_CUDA with
// *message naming `name` ("k_cache", "v_cache") when the driver refuses it.
wideattn_status encode_kv_tensor_map(const Driver& driver, const TensorMapKey& key, const char* name, CUtensorMap* map,
                                     std::string* message);

// Why no tensor map can be encoded by `driver` ("" when cuTensorMapEncodeTiled is there).
std::string tensor_maps_unavailable(const Driver& driver);

// Empty when both caches of validated params can be described as TMA tensors; otherwise why
// not, naming the argument and value. Beyond what validation already requires (16-byte aligned
// bases and rows), the driver documents that every dimension's stride covers the one inside it
// (head stride >= head_dim, slot stride >= num_kv_heads x head stride, block stride >=
// block_size x slot stride; transposed V: head stride >= head_dim x block_size, block stride >=
// num_kv_heads x head stride) and that strides stay below 2^40 bytes. Every product is computed
// with overflow checks: strides whose products do not fit 64 bits are "not describable" too.
std::string kv_map_unsupported(const wideattn_prefill_params& p);

// Encodes both maps for validated params whose layout kv_map_unsupported accepts. Returns
// WIDEATTN_OK, or with *message: WIDEATTN_ERROR_UNSUPPORTED for a layout kv_map_unsupported
// refuses (selection never picks a "tma_kv" kernel for one), WIDEATTN_ERROR_NO_DRIVER when the
// driver lacks cuTensorMapEncodeTiled and WIDEATTN_ERROR_CUDA when it refuses the layout.
wideattn_status encode_kv_tensor_maps(const Driver& driver, const wideattn_prefill_params& p, KvTensorMaps* maps,
                                      std::string* message);

}  // namespace wideattn
