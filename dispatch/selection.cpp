// selection.cpp - argument validation and kernel selection (see selection.h).
#include "dispatch/selection.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <sstream>

#include "dispatch/kv_tensor_maps.h"
#include "dispatch/manifest_format.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {
namespace {

constexpr uintptr_t kTensorAlignment = 16;  // 16-byte vector loads and cp.async
constexpr int32_t kBlockSizeMultiple = 16;
constexpr int32_t kMaxGridY = 65535;  // CUDA's grid.y limit

std::string pointer_text(const void* ptr) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "%p", ptr);
    return buf;
}

class Validator {
public:
    explicit Validator(std::string* message) : message_(message) {}

    bool fail(const std::string& text) {
        *message_ = text;
        return false;
    }
    bool not_null(const void* ptr, const char* name) {
        return ptr ? true : fail(std::string(name) + " is NULL");
    }
    bool aligned(const void* ptr, uintptr_t alignment, const char* name) {
        if (reinterpret_cast<uintptr_t>(ptr) % alignment == 0) return true;
        return fail(std::string(name) + "=" + pointer_text(ptr) + " is not " + std::to_string(alignment) +
                    "-byte aligned");
    }
    // A stride must be positive and keep every row 16-byte aligned.
    bool stride(int64_t value, int32_t elem_size, const char* name) {
        if (value < 1) return fail(std::string(name) + "=" + std::to_string(value) + " must be >= 1");
        const int64_t multiple = kTensorAlignment / elem_size;
        if (value % multiple != 0)
            return fail(std::string(name) + "=" + std::to_string(value) + " is not a multiple of " +
                        std::to_string(multiple) + " elements (rows must stay 16-byte aligned)");
        return true;
    }
    // A byte stride or size that must be a positive multiple of `multiple_of`.
    bool multiple(int64_t value, int64_t multiple_of, const char* name) {
        if (value >= 1 && value % multiple_of == 0) return true;
        return fail(std::string(name) + "=" + std::to_string(value) + " is not a positive multiple of " +
                    std::to_string(multiple_of));
    }
    bool at_least(int64_t value, int64_t lo, const char* name) {
        if (value >= lo) return true;
        return fail(std::string(name) + "=" + std::to_string(value) + " must be >= " + std::to_string(lo));
    }
    bool dtype(int32_t value, const char* name) {
        if (dtype_size(value) > 0) return true;
        return fail(std::string(name) + "=" + std::to_string(value) + " is not a wideattn_dtype (0..4)");
    }
    // The output rows [token][head] must not overlap: the inner stride covers head_dim and the
    // outer stride covers all rows of the inner dimension.
    bool output_rows_disjoint(int64_t token_stride, int64_t head_stride, int32_t total_q, int32_t heads,
                              int32_t head_dim) {
        const bool token_outer = token_stride >= head_stride;
        const int64_t inner = token_outer ? head_stride : token_stride;
        const int64_t outer = token_outer ? token_stride : head_stride;
        const int64_t inner_count = token_outer ? heads : total_q;
        const int64_t outer_count = token_outer ? total_q : heads;
        if (inner >= head_dim && (outer_count <= 1 || outer >= inner * inner_count)) return true;
        std::ostringstream s;
        s << "o_token_stride=" << token_stride << " and o_head_stride=" << head_stride
          << " make output rows overlap (head_dim=" << head_dim << ", num_q_heads=" << heads
          << ", total_q=" << total_q << ")";
        return fail(s.str());
    }

private:
    std::string* message_;
};

}  // namespace

int32_t dtype_size(int32_t dtype) {
    switch (dtype) {
        case WIDEATTN_DTYPE_BF16:
        case WIDEATTN_DTYPE_F16: return 2;
        case WIDEATTN_DTYPE_F32: return 4;
        case WIDEATTN_DTYPE_F64: return 8;
        case WIDEATTN_DTYPE_E4M3: return 1;
        default: return 0;
    }
}

wideattn_status validate_params(const wideattn_prefill_params* p, std::string* message) {
    Validator v(message);
    if (!p) {
        *message = "params is NULL";
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    const bool ok =
        v.dtype(p->q_dtype, "q_dtype") && v.dtype(p->kv_dtype, "kv_dtype") && v.dtype(p->o_dtype, "o_dtype") &&
        v.not_null(p->q, "q") && v.not_null(p->k_cache, "k_cache") && v.not_null(p->v_cache, "v_cache") &&
        v.not_null(p->o, "o") && v.not_null(p->cu_seqlens_q, "cu_seqlens_q") &&
        v.not_null(p->seq_lens_k, "seq_lens_k") && v.not_null(p->block_table, "block_table") &&
        v.aligned(p->q, kTensorAlignment, "q") && v.aligned(p->k_cache, kTensorAlignment, "k_cache") &&
        v.aligned(p->v_cache, kTensorAlignment, "v_cache") && v.aligned(p->o, kTensorAlignment, "o") &&
        v.aligned(p->cu_seqlens_q, sizeof(int32_t), "cu_seqlens_q") &&
        v.aligned(p->seq_lens_k, sizeof(int32_t), "seq_lens_k") &&
        v.aligned(p->block_table, sizeof(int32_t), "block_table") && v.at_least(p->num_seqs, 1, "num_seqs") &&
        v.at_least(p->total_q, 0, "total_q") && v.at_least(p->num_kv_heads, 1, "num_kv_heads") &&
        v.at_least(p->num_q_heads, 1, "num_q_heads") && v.at_least(p->head_dim, 1, "head_dim") &&
        v.at_least(p->num_blocks, 1, "num_blocks") && v.at_least(p->block_table_stride, 1, "block_table_stride");
    if (!ok) return WIDEATTN_ERROR_INVALID_ARGUMENT;

    std::ostringstream s;
    if (p->num_q_heads % p->num_kv_heads != 0) {
        s << "num_q_heads=" << p->num_q_heads << " is not a multiple of num_kv_heads=" << p->num_kv_heads;
        *message = s.str();
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    if (p->block_size < kBlockSizeMultiple || p->block_size % kBlockSizeMultiple != 0) {
        s << "block_size=" << p->block_size << " is not a positive multiple of " << kBlockSizeMultiple;
        *message = s.str();
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    if (!std::isfinite(p->softmax_scale) || p->softmax_scale <= 0.0f) {
        s << "softmax_scale=" << p->softmax_scale << " must be finite and > 0";
        *message = s.str();
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    if (p->reserved != 0) {
        s << "reserved=" << p->reserved << " must be 0";
        *message = s.str();
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    const int32_t q_size = dtype_size(p->q_dtype), kv_size = dtype_size(p->kv_dtype), o_size = dtype_size(p->o_dtype);
    if (p->head_dim % (kTensorAlignment / kv_size) != 0 || p->head_dim % (kTensorAlignment / q_size) != 0) {
        s << "head_dim=" << p->head_dim << " is not a multiple of 16 bytes of its elements";
        *message = s.str();
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    const bool strides_ok = v.stride(p->q_token_stride, q_size, "q_token_stride") &&
                            v.stride(p->q_head_stride, q_size, "q_head_stride") &&
                            v.stride(p->k_block_stride, kv_size, "k_block_stride") &&
                            v.stride(p->k_slot_stride, kv_size, "k_slot_stride") &&
                            v.stride(p->k_head_stride, kv_size, "k_head_stride") &&
                            v.stride(p->v_block_stride, kv_size, "v_block_stride") &&
                            v.stride(p->v_slot_stride, kv_size, "v_slot_stride") &&
                            v.stride(p->v_head_stride, kv_size, "v_head_stride") &&
                            v.stride(p->o_token_stride, o_size, "o_token_stride") &&
                            v.stride(p->o_head_stride, o_size, "o_head_stride") &&
                            v.output_rows_disjoint(p->o_token_stride, p->o_head_stride, p->total_q, p->num_q_heads,
                                                   p->head_dim);
    if (!strides_ok) return WIDEATTN_ERROR_INVALID_ARGUMENT;
    if (p->lse) {
        const uintptr_t lse_align = p->o_dtype == WIDEATTN_DTYPE_F64 ? sizeof(double) : sizeof(float);
        if (!v.aligned(p->lse, lse_align, "lse")) return WIDEATTN_ERROR_INVALID_ARGUMENT;
        if (p->lse_head_stride < p->total_q) {
            s << "lse_head_stride=" << p->lse_head_stride << " is smaller than total_q=" << p->total_q;
            *message = s.str();
            return WIDEATTN_ERROR_INVALID_ARGUMENT;
        }
    }
    const struct {
        const float* ptr;
        bool needed;
        const char* name;
        const char* dtype_field;
        int32_t dtype;
    } scales[] = {{p->q_scale, p->q_dtype == WIDEATTN_DTYPE_E4M3, "q_scale", "q_dtype", p->q_dtype},
                  {p->k_scale, p->kv_dtype == WIDEATTN_DTYPE_E4M3, "k_scale", "kv_dtype", p->kv_dtype},
                  {p->v_scale, p->kv_dtype == WIDEATTN_DTYPE_E4M3, "v_scale", "kv_dtype", p->kv_dtype}};
    for (const auto& scale : scales) {
        if (scale.needed && !scale.ptr) {
            s << scale.name << " is NULL but " << scale.dtype_field << "=e4m3 needs a scale";
            *message = s.str();
            return WIDEATTN_ERROR_INVALID_ARGUMENT;
        }
        if (!scale.needed && scale.ptr) {
            s << scale.name << "=" << pointer_text(scale.ptr) << " is set but " << scale.dtype_field << "="
              << dtype_name(scale.dtype) << " takes no scale (pass NULL)";
            *message = s.str();
            return WIDEATTN_ERROR_INVALID_ARGUMENT;
        }
        if (scale.ptr && !v.aligned(scale.ptr, sizeof(float), scale.name)) return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    return WIDEATTN_OK;
}

bool arch_runs_on(const ManifestKernel& k, int32_t cc_major, int32_t cc_minor) {
    if (k.arch_specific) return k.arch_major == cc_major && k.arch_minor == cc_minor;
    return k.arch_major == cc_major && k.arch_minor <= cc_minor;
}

namespace {

// Candidate `index` fits; keeps it as *best when there is none yet, when it is another kernel of
// higher priority (equal priorities: the smaller name, so the manifest's order never decides), or
// when it is the same kernel built for an arch closer to the device (highest compatible minor,
// arch-specific over generic).
void keep_closest_cubin(const std::vector<ManifestKernel>& kernels, int32_t index, int32_t* best) {
    if (*best < 0) {
        *best = index;
        return;
    }
    const ManifestKernel& k = kernels[index];
    const ManifestKernel& b = kernels[*best];
    if (b.name != k.name) {
        if (k.priority > b.priority || (k.priority == b.priority && k.name < b.name)) *best = index;
        return;
    }
    if (k.arch_minor > b.arch_minor || (k.arch_minor == b.arch_minor && k.arch_specific && !b.arch_specific))
        *best = index;
}

}  // namespace

bool has_prefill_kernel(const std::vector<ManifestKernel>& kernels, const std::string& name) {
    for (const ManifestKernel& k : kernels)
        if (k.kind == kKindPrefill && k.name == name) return true;
    return false;
}

wideattn_status select_kernel(const std::vector<ManifestKernel>& kernels, const wideattn_prefill_params& p,
                              int32_t cc_major, int32_t cc_minor, int32_t* index, std::string* message,
                              const std::string& only_name) {
    const int32_t group = p.num_q_heads / p.num_kv_heads;
    int32_t best = -1;
    // One reason per kernel name, in manifest order: an arch mismatch is replaced by the
    // reason a cubin of the right arch was refused, which says more.
    std::vector<std::pair<std::string, std::string>> misses;  // (name, reason)
    std::vector<bool> miss_is_arch;
    // The restriction applies to the dtypes the named kernel takes; other calls (e.g. the fp64
    // reference next to a restricted bf16 kernel) select as usual.
    const bool restricted =
        !only_name.empty() && std::any_of(kernels.begin(), kernels.end(), [&](const ManifestKernel& k) {
            return k.kind == kKindPrefill && k.name == only_name && k.q_dtype == p.q_dtype &&
                   k.kv_dtype == p.kv_dtype && k.o_dtype == p.o_dtype;
        });
    for (size_t i = 0; i < kernels.size(); ++i) {
        const ManifestKernel& k = kernels[i];
        if (k.kind != kKindPrefill) continue;
        if (restricted && k.name != only_name) continue;
        if (k.q_dtype != p.q_dtype || k.kv_dtype != p.kv_dtype || k.o_dtype != p.o_dtype) continue;
        std::ostringstream miss;
        std::string tma_why;
        const bool arch_miss = !arch_runs_on(k, cc_major, cc_minor);
        if (arch_miss) {
            miss << k.name << " (" << k.arch << ") does not run on sm_" << cc_major << cc_minor;
        } else if (p.head_dim < k.head_dim_min || p.head_dim > k.head_dim_max ||
                   (p.head_dim - k.head_dim_min) % k.head_dim_step != 0) {
            miss << k.name << " serves head_dim " << k.head_dim_min << ".." << k.head_dim_max << " step "
                 << k.head_dim_step << ", not head_dim=" << p.head_dim;
        } else if (group < k.group_min || group > k.group_max) {
            miss << k.name << " serves group " << k.group_min << ".." << k.group_max << ", not num_q_heads/num_kv_heads="
                 << group;
        } else if (p.lse && !k.has_feature("lse")) {
            miss << k.name << " cannot write lse";
        } else if (k.has_feature(kFeatureTmaKv) && !(tma_why = kv_map_unsupported(p)).empty()) {
            miss << k.name << " loads K/V with TMA, which cannot address this cache: " << tma_why;
        } else if (p.num_q_heads / heads_per_block(group, k.heads_per_block_max) > kMaxGridY) {
            miss << k.name << " would need " << p.num_q_heads / heads_per_block(group, k.heads_per_block_max)
                 << " blocks in grid.y for num_q_heads=" << p.num_q_heads << " (limit " << kMaxGridY << ")";
        } else {
            keep_closest_cubin(kernels, static_cast<int32_t>(i), &best);
            continue;
        }
        size_t slot = 0;
        while (slot < misses.size() && misses[slot].first != k.name) ++slot;
        if (slot == misses.size()) {
            misses.emplace_back(k.name, miss.str());
            miss_is_arch.push_back(arch_miss);
        } else if (miss_is_arch[slot] && !arch_miss) {
            misses[slot].second = miss.str();
            miss_is_arch[slot] = false;
        }
    }
    if (best >= 0) {
        *index = best;
        return WIDEATTN_OK;
    }
    std::ostringstream s;
    s << "no kernel in the bundle for q_dtype=" << dtype_name(p.q_dtype) << " kv_dtype=" << dtype_name(p.kv_dtype)
      << " o_dtype=" << dtype_name(p.o_dtype) << " head_dim=" << p.head_dim << " group=" << group
      << (p.lse ? " with lse" : "") << " on sm_" << cc_major << cc_minor;
    if (restricted) s << " (selection restricted to kernel " << only_name << " by wideattn_set_prefill_kernel)";
    if (misses.empty()) s << ": no kernel has these dtypes";
    for (size_t i = 0; i < misses.size(); ++i) s << (i ? "; " : ": ") << misses[i].second;
    *message = s.str();
    return WIDEATTN_ERROR_UNSUPPORTED;
}

LaunchGeometry launch_geometry(const ManifestKernel& k, const wideattn_prefill_params& p) {
    LaunchGeometry g;
    const int32_t group = p.num_q_heads / p.num_kv_heads;
    g.grid_x = static_cast<uint32_t>(token_tile_count(p.total_q, p.num_seqs, k.tile_tokens));
    g.grid_y = static_cast<uint32_t>(p.num_q_heads / heads_per_block(group, k.heads_per_block_max));
    g.block_x = static_cast<uint32_t>(k.threads);
    g.dynamic_smem = static_cast<uint32_t>(k.dynamic_smem);
    return g;
}

}  // namespace wideattn

namespace wideattn {

wideattn_status validate_quantize_params(const wideattn_quantize_params* p, std::string* message) {
    Validator v(message);
    if (!p) {
        *message = "params is NULL";
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    constexpr int32_t kCacheVecBytes = 8;  // the kernel stores 8 e4m3 bytes per thread
    std::ostringstream s;
    if (p->src_dtype != WIDEATTN_DTYPE_BF16) {
        s << "src_dtype=" << p->src_dtype << " is not supported (bf16 = " << WIDEATTN_DTYPE_BF16 << ")";
        *message = s.str();
        return WIDEATTN_ERROR_UNSUPPORTED;
    }
    const bool ok = v.not_null(p->src, "src") && v.not_null(p->cache, "cache") && v.not_null(p->scale, "scale") &&
                    v.aligned(p->src, kTensorAlignment, "src") && v.aligned(p->cache, kCacheVecBytes, "cache") &&
                    (!p->slot_mapping || v.aligned(p->slot_mapping, sizeof(int64_t), "slot_mapping")) &&
                    v.aligned(p->scale, sizeof(float), "scale") &&
                    (!p->nonfinite_count || v.aligned(p->nonfinite_count, sizeof(int32_t), "nonfinite_count")) &&
                    v.at_least(p->tokens, 0, "tokens") && v.at_least(p->heads, 1, "heads") &&
                    v.at_least(p->head_dim, 1, "head_dim") && v.at_least(p->block_size, 1, "block_size") &&
                    v.at_least(p->num_blocks, 1, "num_blocks") &&
                    v.stride(p->src_token_stride, dtype_size(WIDEATTN_DTYPE_BF16), "src_token_stride") &&
                    v.stride(p->src_head_stride, dtype_size(WIDEATTN_DTYPE_BF16), "src_head_stride") &&
                    v.multiple(p->cache_block_stride, kCacheVecBytes, "cache_block_stride") &&
                    v.multiple(p->cache_slot_stride, kCacheVecBytes, "cache_slot_stride") &&
                    v.multiple(p->cache_head_stride, kCacheVecBytes, "cache_head_stride") &&
                    v.multiple(p->head_dim, kCacheVecBytes, "head_dim");
    if (!ok) return WIDEATTN_ERROR_INVALID_ARGUMENT;
    const int64_t slots = int64_t{p->num_blocks} * p->block_size;
    if (!p->slot_mapping && p->tokens > slots) {
        s << "tokens=" << p->tokens << " exceed num_blocks * block_size = " << slots
          << " slots with slot_mapping NULL (slot = token)";
        *message = s.str();
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    return WIDEATTN_OK;
}

wideattn_status validate_scale_params(const wideattn_scale_params* p, std::string* message) {
    Validator v(message);
    if (!p) {
        *message = "params is NULL";
        return WIDEATTN_ERROR_INVALID_ARGUMENT;
    }
    constexpr int32_t kSrcVecElems = 8;  // the kernel loads 8 bf16 per thread and token
    if (p->src_dtype != WIDEATTN_DTYPE_BF16) {
        *message = "src_dtype=" + std::to_string(p->src_dtype) + " is not supported (bf16 = " +
                   std::to_string(WIDEATTN_DTYPE_BF16) + ")";
        return WIDEATTN_ERROR_UNSUPPORTED;
    }
    const bool ok = v.not_null(p->src, "src") && v.not_null(p->scale, "scale") &&
                    v.aligned(p->src, kTensorAlignment, "src") && v.aligned(p->scale, sizeof(float), "scale") &&
                    (!p->slot_mapping || v.aligned(p->slot_mapping, sizeof(int64_t), "slot_mapping")) &&
                    (!p->nonfinite_count || v.aligned(p->nonfinite_count, sizeof(int32_t), "nonfinite_count")) &&
                    v.at_least(p->tokens, 0, "tokens") && v.at_least(p->heads, 1, "heads") &&
                    v.at_least(p->head_dim, 1, "head_dim") &&
                    v.stride(p->src_token_stride, dtype_size(WIDEATTN_DTYPE_BF16), "src_token_stride") &&
                    v.stride(p->src_head_stride, dtype_size(WIDEATTN_DTYPE_BF16), "src_head_stride") &&
                    v.multiple(p->head_dim, kSrcVecElems, "head_dim");
    return ok ? WIDEATTN_OK : WIDEATTN_ERROR_INVALID_ARGUMENT;
}

namespace {

// Blocks along grid.y of an element-wise fp8 kernel: heads * head_dim elements, threads *
// tile.keys (elements per thread) per block.
int64_t elementwise_grid_y(const ManifestKernel& k, int32_t heads, int32_t head_dim) {
    const int64_t elements_per_block = int64_t{k.threads} * k.tile_keys;
    return (int64_t{heads} * head_dim + elements_per_block - 1) / elements_per_block;
}

// Selection shared by the element-wise fp8 kernels (quantise, amax): the closest cubin of
// `kind` for src_dtype whose head dims and grid fit; `what` names the kernel in the message.
wideattn_status select_elementwise_kernel(const std::vector<ManifestKernel>& kernels, const char* kind,
                                          const char* what, int32_t src_dtype, int32_t heads, int32_t head_dim,
                                          int32_t cc_major, int32_t cc_minor, int32_t* index, std::string* message) {
    int32_t best = -1;
    std::string miss;
    for (size_t i = 0; i < kernels.size(); ++i) {
        const ManifestKernel& k = kernels[i];
        if (k.kind != kind || k.q_dtype != src_dtype) continue;
        if (!arch_runs_on(k, cc_major, cc_minor)) {
            if (miss.empty()) miss = k.name + " (" + k.arch + ") does not run on sm_" + std::to_string(cc_major) +
                                     std::to_string(cc_minor);
            continue;
        }
        if (head_dim < k.head_dim_min || head_dim > k.head_dim_max) {
            miss = k.name + " serves head_dim " + std::to_string(k.head_dim_min) + ".." + std::to_string(k.head_dim_max) +
                   ", not head_dim=" + std::to_string(head_dim);
            continue;
        }
        if (elementwise_grid_y(k, heads, head_dim) > kMaxGridY) {
            miss = k.name + " would need " + std::to_string(elementwise_grid_y(k, heads, head_dim)) +
                   " blocks in grid.y for heads=" + std::to_string(heads) + " x head_dim=" + std::to_string(head_dim) +
                   " (limit " + std::to_string(kMaxGridY) + ")";
            continue;
        }
        keep_closest_cubin(kernels, static_cast<int32_t>(i), &best);
    }
    if (best >= 0) {
        *index = best;
        return WIDEATTN_OK;
    }
    *message = std::string("no ") + what + " in the bundle for sm_" + std::to_string(cc_major) +
               std::to_string(cc_minor) + (miss.empty() ? std::string(": the bundle has none") : ": " + miss);
    return WIDEATTN_ERROR_UNSUPPORTED;
}

}  // namespace

wideattn_status select_quantize_kernel(const std::vector<ManifestKernel>& kernels, const wideattn_quantize_params& p,
                                       int32_t cc_major, int32_t cc_minor, int32_t* index, std::string* message) {
    return select_elementwise_kernel(kernels, kKindQuantizeE4m3, "e4m3 quantise kernel", p.src_dtype, p.heads,
                                     p.head_dim, cc_major, cc_minor, index, message);
}

wideattn_status select_scale_kernel(const std::vector<ManifestKernel>& kernels, const wideattn_scale_params& p,
                                    int32_t cc_major, int32_t cc_minor, int32_t* index, std::string* message) {
    return select_elementwise_kernel(kernels, kKindAmaxE4m3, "e4m3 amax kernel", p.src_dtype, p.heads, p.head_dim,
                                     cc_major, cc_minor, index, message);
}

LaunchGeometry quantize_launch_geometry(const ManifestKernel& k, const wideattn_quantize_params& p) {
    LaunchGeometry g;
    g.grid_x = static_cast<uint32_t>(p.tokens);
    g.grid_y = static_cast<uint32_t>(elementwise_grid_y(k, p.heads, p.head_dim));
    g.block_x = static_cast<uint32_t>(k.threads);
    g.dynamic_smem = static_cast<uint32_t>(k.dynamic_smem);
    return g;
}

LaunchGeometry scale_launch_geometry(const ManifestKernel& k, const wideattn_scale_params& p) {
    LaunchGeometry g;
    g.grid_x = static_cast<uint32_t>(ceil_div(p.tokens, k.tile_tokens));  // tile.tokens = tokens per block
    g.grid_y = static_cast<uint32_t>(elementwise_grid_y(k, p.heads, p.head_dim));
    g.block_x = static_cast<uint32_t>(k.threads);
    g.dynamic_smem = static_cast<uint32_t>(k.dynamic_smem);
    return g;
}

}  // namespace wideattn
