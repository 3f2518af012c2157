// kv_tensor_maps.cpp - the K/V caches of a prefill call as TMA tensor maps (kv_tensor_maps.h).
#include "dispatch/kv_tensor_maps.h"

#include <sstream>

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

}  // namespace

KvMapLayout kv_map_layout(const wideattn_prefill_params& p, bool is_value) {
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
    for (const bool is_value : {false, true}) {
        const CacheStrides s = cache_strides(p, is_value);
        const KvMapLayout layout = kv_map_layout(p, is_value);
        std::ostringstream why;
        if (s.head < p.head_dim) {
            why << s.prefix << "_head_stride=" << s.head << " is below head_dim=" << p.head_dim;
        } else if (s.slot < s.head * p.num_kv_heads) {
            why << s.prefix << "_slot_stride=" << s.slot << " is below num_kv_heads x " << s.prefix
                << "_head_stride=" << s.head * p.num_kv_heads;
        } else if (s.block < s.slot * p.block_size) {
            why << s.prefix << "_block_stride=" << s.block << " is below block_size x " << s.prefix
                << "_slot_stride=" << s.slot * p.block_size;
        } else if (layout.strides[kKvMapDimBlock - 1] >= kMaxStrideBytes) {
            why << s.prefix << "_block_stride=" << s.block << " is 2^40 bytes or more";
        }
        if (!why.str().empty()) return why.str() + " (TMA needs each stride to cover the dimension inside it)";
    }
    return std::string();
}

wideattn_status encode_kv_tensor_maps(const Driver& driver, const wideattn_prefill_params& p, KvTensorMaps* maps,
                                      std::string* message) {
    if (!driver.cuTensorMapEncodeTiled) {
        *message = "the CUDA driver lacks cuTensorMapEncodeTiled (CUDA 12.0 or newer is needed for TMA kernels)";
        return WIDEATTN_ERROR_NO_DRIVER;
    }
    const uint32_t elem = static_cast<uint32_t>(dtype_size(p.kv_dtype));
    const cuuint32_t box[kKvMapRank] = {static_cast<cuuint32_t>(kKvBoxBytes / elem), 1,
                                        static_cast<cuuint32_t>(kKvBoxSlots), 1};
    const cuuint32_t element_strides[kKvMapRank] = {1, 1, 1, 1};
    const CUtensorMapDataType type =
        elem == 2 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_UINT8;
    for (const bool is_value : {false, true}) {
        const KvMapLayout layout = kv_map_layout(p, is_value);
        CUtensorMap* map = is_value ? &maps->v : &maps->k;
        void* base = const_cast<void*>(is_value ? p.v_cache : p.k_cache);
        const CUresult r = driver.cuTensorMapEncodeTiled(
            map, type, kKvMapRank, base, layout.dims, layout.strides, box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE,
            CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
        if (r != CUDA_SUCCESS) {
            *message = std::string("cuTensorMapEncodeTiled(") + (is_value ? "v_cache" : "k_cache") +
                       ") failed: " + cuda_error_text(driver, r);
            return WIDEATTN_ERROR_CUDA;
        }
    }
    return WIDEATTN_OK;
}

}  // namespace wideattn
