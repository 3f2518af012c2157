// kv_tensor_maps.cpp - the K/V caches of a prefill call as TMA tensor maps (kv_tensor_maps.h).
#include "dispatch/kv_tensor_maps.h"

#include <sstream>
#include <utility>

#include "dispatch/checked_math.h"
#include "dispatch/validation.h"

namespace wideattn {

namespace {

constexpr uint64_t kMaxStrideBytes = uint64_t{1} << 40;  // cuTensorMapEncodeTiled's limit

struct CacheStrides {
    const char* prefix;  // "k" or "v"
    int64_t block, slot, head;
};

// The caller's strides; with a single KV head its stride is never used, so the head dimension
// then gets the smallest stride TMA accepts (head_dim).
CacheStrides cache_strides(const wideattn_prefill_params& p, bool is_value) {
    CacheStrides s = is_value ? CacheStrides{"v", p.v_block_stride, p.v_slot_stride, p.v_head_stride}
                              : CacheStrides{"k", p.k_block_stride, p.k_slot_stride, p.k_head_stride};
    if (p.num_kv_heads == 1) s.head = p.head_dim;
    return s;
}

// Why `stride` (elements of `elem` bytes) cannot be a TMA stride, or "".
std::string stride_over_limit(const char* prefix, const char* dim, int64_t stride, int64_t elem) {
    int64_t bytes = 0;
    if (checked_mul(stride, elem, &bytes) && static_cast<uint64_t>(bytes) < kMaxStrideBytes) return std::string();
    std::ostringstream why;
    why << prefix << "_" << dim << "_stride=" << stride << " is 2^40 bytes or more (TMA strides are below 2^40 bytes)";
    return why.str();
}

// "outer=value is below count x inner=span" for a stride that does not cover the dimension
// inside it; the span is given as a product when it does not fit 64 bits.
std::string below(const char* prefix, const char* outer, int64_t outer_value, const char* count_name, int64_t count,
                  const char* inner, int64_t inner_value, bool span_fits, int64_t span) {
    std::ostringstream why;
    why << prefix << "_" << outer << "_stride=" << outer_value << " is below " << count_name << " x " << prefix << "_"
        << inner << "_stride=";
    if (span_fits)
        why << span;
    else
        why << count << " x " << inner_value << " (beyond 64 bits)";
    why << " (TMA needs each stride to cover the dimension inside it)";
    return why.str();
}

bool v_transposed(const wideattn_prefill_params& p) { return (p.flags & WIDEATTN_FLAG_V_TRANSPOSED) != 0; }

// The head stride of a transposed V cache; with a single KV head, one page's rows.
int64_t transposed_head_stride(const wideattn_prefill_params& p) {
    return p.num_kv_heads == 1 ? int64_t{p.head_dim} * p.block_size : p.v_head_stride;
}

// Why the transposed V cache cannot be a TMA tensor, or "" (the dim rows, block_size bytes apart,
// are 16-byte multiples by validation).
std::string transposed_unsupported(const wideattn_prefill_params& p) {
    const int64_t head = transposed_head_stride(p);
    int64_t page_rows = 0, heads_span = 0;
    checked_mul(int64_t{p.head_dim}, int64_t{p.block_size}, &page_rows);  // both int32: fits
    if (head < page_rows) {
        std::ostringstream why;
        why << "v_head_stride=" << head << " is below head_dim x block_size = " << page_rows
            << " (TMA needs each stride to cover the dimension inside it)";
        return why.str();
    }
    const bool heads_fit = checked_mul(head, p.num_kv_heads, &heads_span);
    if (!heads_fit || p.v_block_stride < heads_span) {
        std::ostringstream why;
        why << "v_block_stride=" << p.v_block_stride << " is below num_kv_heads x v_head_stride";
        if (heads_fit) why << " = " << heads_span;
        why << " (TMA needs each stride to cover the dimension inside it)";
        return why.str();
    }
    for (const auto& [dim, stride] : {std::pair<const char*, int64_t>{"head", head}, {"block", p.v_block_stride}}) {
        std::string why = stride_over_limit("v", dim, stride, 1);
        if (!why.empty()) return why;
    }
    return std::string();
}

}  // namespace

KvMapLayout transposed_v_map_layout(const wideattn_prefill_params& p, bool row_boxes) {
    KvMapLayout layout{};
    // Row boxes: rows of kVtRowDims dims x 16 positions; else one page row (block_size positions) per dim.
    layout.dims[kVtMapDimSlot] = static_cast<uint64_t>(row_boxes ? kVtRowBytes : p.block_size);
    layout.dims[kVtMapDimElem] = static_cast<uint64_t>(row_boxes ? p.head_dim / kVtRowDims : p.head_dim);
    layout.dims[kVtMapDimHead] = static_cast<uint64_t>(p.num_kv_heads);
    layout.dims[kVtMapDimBlock] = static_cast<uint64_t>(p.num_blocks);
    layout.strides[kVtMapDimElem - 1] = static_cast<uint64_t>(row_boxes ? kVtRowBytes : p.block_size);
    layout.strides[kVtMapDimHead - 1] = static_cast<uint64_t>(transposed_head_stride(p));
    layout.strides[kVtMapDimBlock - 1] = static_cast<uint64_t>(p.v_block_stride);
    return layout;
}

KvMapLayout kv_map_layout(const wideattn_prefill_params& p, bool is_value) {
    if (is_value && v_transposed(p)) return transposed_v_map_layout(p, v_row_boxes(p.block_size, p.head_dim));
    const CacheStrides s = cache_strides(p, is_value);
    const uint64_t elem = static_cast<uint64_t>(dtype_size(p.kv_dtype));
    KvMapLayout layout{};
    layout.dims[kKvMapDimElem] = static_cast<uint64_t>(p.head_dim);
    layout.dims[kKvMapDimHead] = static_cast<uint64_t>(p.num_kv_heads);
    layout.dims[kKvMapDimSlot] = static_cast<uint64_t>(p.block_size);
    layout.dims[kKvMapDimBlock] = static_cast<uint64_t>(p.num_blocks);
    layout.strides[kKvMapDimHead - 1] = static_cast<uint64_t>(s.head) * elem;
    layout.strides[kKvMapDimSlot - 1] = static_cast<uint64_t>(s.slot) * elem;
    layout.strides[kKvMapDimBlock - 1] = static_cast<uint64_t>(s.block) * elem;
    return layout;
}

std::string kv_map_unsupported(const wideattn_prefill_params& p) {
    const int64_t elem = dtype_size(p.kv_dtype);
    for (const bool is_value : {false, true}) {
        if (is_value && v_transposed(p)) return transposed_unsupported(p);
        const CacheStrides s = cache_strides(p, is_value);
        if (s.head < p.head_dim) {
            std::ostringstream why;
            why << s.prefix << "_head_stride=" << s.head << " is below head_dim=" << p.head_dim
                << " (TMA needs each stride to cover the dimension inside it)";
            return why.str();
        }
        int64_t heads_span = 0, slots_span = 0;
        const bool heads_fit = checked_mul(s.head, p.num_kv_heads, &heads_span);
        if (!heads_fit || s.slot < heads_span)
            return below(s.prefix, "slot", s.slot, "num_kv_heads", p.num_kv_heads, "head", s.head, heads_fit,
                         heads_span);
        const bool slots_fit = checked_mul(s.slot, p.block_size, &slots_span);
        if (!slots_fit || s.block < slots_span)
            return below(s.prefix, "block", s.block, "block_size", p.block_size, "slot", s.slot, slots_fit,
                         slots_span);
        for (const auto& [dim, stride] : {std::pair<const char*, int64_t>{"head", s.head}, {"slot", s.slot},
                                          {"block", s.block}}) {
            std::string why = stride_over_limit(s.prefix, dim, stride, elem);
            if (!why.empty()) return why;
        }
    }
    return std::string();
}

bool TensorMapKey::operator==(const TensorMapKey& o) const {
    if (base != o.base || data_type != o.data_type || transposed != o.transposed) return false;
    for (int d = 0; d < kKvMapRank; ++d)
        if (layout.dims[d] != o.layout.dims[d]) return false;
    for (int d = 0; d + 1 < kKvMapRank; ++d)
        if (layout.strides[d] != o.layout.strides[d]) return false;
    return true;
}

TensorMapKey kv_map_key(const wideattn_prefill_params& p, bool is_value, const void* base) {
    TensorMapKey key{};
    key.base = reinterpret_cast<uint64_t>(base);
    key.data_type = dtype_size(p.kv_dtype) == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8;
    key.layout = kv_map_layout(p, is_value);
    key.transposed = !(is_value && v_transposed(p)) ? kMapEngine
                     : v_row_boxes(p.block_size, p.head_dim) ? kMapTransposedRows
                                                             : kMapTransposed;
    return key;
}

std::string tensor_maps_unavailable(const Driver& driver) {
    if (driver.cuTensorMapEncodeTiled) return std::string();
    return "the CUDA driver lacks cuTensorMapEncodeTiled (CUDA 12.0 or newer is needed for TMA kernels)";
}

wideattn_status encode_kv_tensor_map(const Driver& driver, const TensorMapKey& key, const char* name, CUtensorMap* map,
                                     std::string* message) {
    if (const std::string why = tensor_maps_unavailable(driver); !why.empty()) {
        *message = why;
        return WIDEATTN_ERROR_NO_DRIVER;
    }
    const uint32_t elem = key.data_type == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 ? 2 : 1;
    const cuuint32_t box[kKvMapRank] = {static_cast<cuuint32_t>(kKvBoxBytes / elem), 1,
                                        static_cast<cuuint32_t>(kKvBoxSlots), 1};
    const cuuint32_t transposed_box[kKvMapRank] = {static_cast<cuuint32_t>(kVtBoxSlots),
                                                   static_cast<cuuint32_t>(kVtBoxDims), 1, 1};
    const cuuint32_t row_box[kKvMapRank] = {static_cast<cuuint32_t>(kVtRowBytes), static_cast<cuuint32_t>(kVtBoxRows),
                                            1, 1};
    const cuuint32_t* chosen = key.transposed == kMapTransposedRows ? row_box
                               : key.transposed == kMapTransposed   ? transposed_box
                                                                    : box;
    const cuuint32_t element_strides[kKvMapRank] = {1, 1, 1, 1};
    const CUresult r = driver.cuTensorMapEncodeTiled(
        map, static_cast<CUtensorMapDataType>(key.data_type), kKvMapRank, reinterpret_cast<void*>(key.base),
        key.layout.dims, key.layout.strides, chosen, element_strides,
        CU_TENSOR_MAP_INTERLEAVE_NONE, key.transposed ? CU_TENSOR_MAP_SWIZZLE_NONE : CU_TENSOR_MAP_SWIZZLE_128B,
        CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
    if (r != CUDA_SUCCESS) {
        *message = std::string("cuTensorMapEncodeTiled(") + name + ") failed: " + cuda_error_text(driver, r);
        return WIDEATTN_ERROR_CUDA;
    }
    return WIDEATTN_OK;
}

wideattn_status encode_kv_tensor_maps(const Driver& driver, const wideattn_prefill_params& p, KvTensorMaps* maps,
                                      std::string* message) {
    // The layout is computed without overflow checks: describable layouts only.
    if (const std::string why = kv_map_unsupported(p); !why.empty()) {
        *message = "the K/V cache cannot be described as TMA tensors: " + why;
        return WIDEATTN_ERROR_UNSUPPORTED;
    }
    const wideattn_status status = encode_kv_tensor_map(driver, kv_map_key(p, false, p.k_cache), "k_cache", &maps->k,
                                                        message);
    if (status != WIDEATTN_OK) return status;
    return encode_kv_tensor_map(driver, kv_map_key(p, true, p.v_cache), "v_cache", &maps->v, message);
}

}  // namespace wideattn
