// selection.cpp - kernel selection and launch geometry (see selection.h).
#include "dispatch/selection.h"

#include <algorithm>
#include <sstream>

#include "dispatch/kv_tensor_maps.h"
#include "dispatch/manifest_format.h"
#include "kernels/common/k_from_v.h"
#include "kernels/common/kernel_desc.h"
#include "kernels/common/v_transposed.h"
#include "kernels/k_from_v_rebuild/traits.h"

namespace wideattn {
namespace {

constexpr int32_t kMaxGridY = 65535;       // CUDA's grid.y limit
constexpr int64_t kMaxGridX = 2147483647;  // CUDA's grid.x limit
constexpr int32_t kMaxCcMinor = 9;         // sm_XY names a one-digit minor

}  // namespace

std::string device_arch_text(int32_t cc_major, int32_t cc_minor) {
    const std::string numbers = std::to_string(cc_major) + "." + std::to_string(cc_minor);
    if (cc_major < 0 || cc_minor < 0 || cc_minor > kMaxCcMinor) return "compute capability " + numbers + " (not valid)";
    return "sm_" + std::to_string(cc_major) + std::to_string(cc_minor);
}

bool arch_runs_on(const ManifestKernel& k, int32_t cc_major, int32_t cc_minor) {
    if (k.arch_specific) return k.arch_major == cc_major && k.arch_minor == cc_minor;
    return k.arch_major == cc_major && k.arch_minor <= cc_minor;
}

namespace {

// Whether cubin `a` is a closer build of the same kernel for the device than cubin `b`: the
// highest compatible minor, then arch-specific over generic.
bool closer_cubin(const ManifestKernel& a, const ManifestKernel& b) {
    return a.arch_minor > b.arch_minor || (a.arch_minor == b.arch_minor && a.arch_specific && !b.arch_specific);
}

// Of the fitting cubins (indices into `kernels`), each kernel's closest one stands for it with
// that cubin's priority (a kernel's priority may differ per arch); of those, `preferred` when it is
// among them (a tuning file's choice), else the one of highest priority (equal priorities: the
// smaller name, so the manifest's order never decides). -1 when `fitting` is empty.
int32_t pick_fitting(const std::vector<ManifestKernel>& kernels, const std::vector<int32_t>& fitting,
                     const std::string& preferred = std::string()) {
    std::vector<int32_t> closest;  // one cubin per kernel name
    for (const int32_t index : fitting) {
        auto same = std::find_if(closest.begin(), closest.end(),
                                 [&](int32_t c) { return kernels[c].name == kernels[index].name; });
        if (same == closest.end())
            closest.push_back(index);
        else if (closer_cubin(kernels[index], kernels[*same]))
            *same = index;
    }
    int32_t best = -1;
    for (const int32_t index : closest) {
        const ManifestKernel& k = kernels[index];
        if (!preferred.empty() && k.name == preferred) return index;
        if (best < 0) {
            best = index;
            continue;
        }
        const ManifestKernel& b = kernels[best];
        if (k.priority > b.priority || (k.priority == b.priority && k.name < b.name)) best = index;
    }
    return best;
}

}  // namespace

bool has_prefill_kernel(const std::vector<ManifestKernel>& kernels, const std::string& name) {
    for (const ManifestKernel& k : kernels)
        if (k.kind == kKindPrefill && k.name == name) return true;
    return false;
}

namespace {

// Whether prefill kernel k (of the call's dtypes) serves p on a cc_major.cc_minor device; when it
// does not and `why` is not NULL, *why says why (built only then: the launch path asks without).
// `pinned`: selection is restricted to k by name, which lifts the token-count rules (single_token,
// few_tokens, many_tokens).
bool kernel_fits(const ManifestKernel& k, const wideattn_prefill_params& p, int32_t cc_major, int32_t cc_minor,
                 bool pinned, bool* arch_miss, std::string* why) {
    const int32_t group = p.num_q_heads / p.num_kv_heads;
    *arch_miss = !arch_runs_on(k, cc_major, cc_minor);
    if (*arch_miss) {
        if (why) *why = k.name + " (" + k.arch + ") does not run on " + device_arch_text(cc_major, cc_minor);
        return false;
    }
    if (p.head_dim < k.head_dim_min || p.head_dim > k.head_dim_max ||
        (p.head_dim - k.head_dim_min) % k.head_dim_step != 0) {
        if (why) {
            std::ostringstream miss;
            miss << k.name << " serves head_dim " << k.head_dim_min << ".." << k.head_dim_max << " step "
                 << k.head_dim_step << ", not head_dim=" << p.head_dim;
            *why = miss.str();
        }
        return false;
    }
    if (group < k.group_min || group > k.group_max) {
        if (why) {
            std::ostringstream miss;
            miss << k.name << " serves group " << k.group_min << ".." << k.group_max
                 << ", not num_q_heads/num_kv_heads=" << group;
            *why = miss.str();
        }
        return false;
    }
    const int32_t alone_limit =
        alone_tokens_per_seq(k.has_feature(kFeatureSingleToken), k.has_feature(kFeatureFewTokens));
    if (!pinned && !within_alone_limit(alone_limit, p.total_q, p.num_seqs)) {
        if (why) {
            std::ostringstream miss;
            miss << k.name << " runs on its own only for ";
            if (alone_limit == 1)
                miss << "one query token per sequence (decode)";
            else
                miss << "at most " << alone_limit
                     << " query tokens per sequence on average (decode and verification steps)";
            miss << ", not total_q=" << p.total_q << " over num_seqs=" << p.num_seqs
                 << " (pin it by name to run it anyway)";
            *why = miss.str();
        }
        return false;
    }
    if (!pinned && k.has_feature(kFeatureManyTokens) && !many_tokens_call(p.total_q, p.num_seqs, p.max_seqlen_q)) {
        if (why) {
            std::ostringstream miss;
            miss << k.name << " runs on its own only where every sequence has more than " << kFewTokensPerSeq
                 << " query tokens, which total_q=" << p.total_q << " over num_seqs=" << p.num_seqs
                 << " with max_seqlen_q=" << p.max_seqlen_q << " does not bound (pin it by name to run it anyway)";
            *why = miss.str();
        }
        return false;
    }
    if (p.lse && !k.has_feature("lse")) {
        if (why) *why = k.name + " cannot write lse";
        return false;
    }
    if ((p.flags & WIDEATTN_FLAG_V_TRANSPOSED) && !k.has_feature(kFeatureVTransposed)) {
        if (why)
            *why = k.name + " reads V in the engine layout v_cache[block][slot][kv_head][d], not the transposed "
                            "layout of WIDEATTN_FLAG_V_TRANSPOSED";
        return false;
    }
    if (!(p.flags & WIDEATTN_FLAG_V_TRANSPOSED) && k.has_feature(kFeatureVTransposed)) {
        if (why)
            *why = k.name + " reads V only in the transposed layout (flags WIDEATTN_FLAG_V_TRANSPOSED, "
                            "v_cache[block][kv_head][d][slot] as wideattn_quantize_to_cache writes it with that "
                            "flag), not the engine layout";
        return false;
    }
    if (k_from_v_call(p.flags) && !k.has_feature(kFeatureKFromV)) {
        if (why)
            *why = k.name + " reads K from k_cache and cannot rebuild it from V (WIDEATTN_FLAG_K_FROM_V needs a "
                            "kernel with the k_from_v feature: reference_f64 (o_dtype=f64) and, for single-token "
                            "decode over an e4m3 or a bf16 V-only cache, decode_e4m3kfvb_d512 (decode_e4m3kfv_d512 by name) or "
                            "decode_bf16kfv_d512)";
        return false;
    }
    if (!k_from_v_call(p.flags) && k.has_feature(kFeatureKFromVOnly)) {
        if (why)
            *why = k.name + " rebuilds K from V and serves only calls with WIDEATTN_FLAG_K_FROM_V (it never reads "
                            "k_cache)";
        return false;
    }
    if (k.has_feature(kFeatureTmaKv)) {
        if (const std::string tma_why = kv_map_unsupported(p); !tma_why.empty()) {
            if (why) *why = k.name + " loads K/V with TMA, which cannot address this cache: " + tma_why;
            return false;
        }
    }
    if (p.num_q_heads / heads_per_block(group, k.heads_per_block_max) > kMaxGridY) {
        if (why) {
            std::ostringstream miss;
            miss << k.name << " would need " << p.num_q_heads / heads_per_block(group, k.heads_per_block_max)
                 << " blocks in grid.y for num_q_heads=" << p.num_q_heads << " (limit " << kMaxGridY << ")";
            *why = miss.str();
        }
        return false;
    }
    return true;
}

}  // namespace

wideattn_status select_kernel(const std::vector<ManifestKernel>& kernels, const wideattn_prefill_params& p,
                              int32_t cc_major, int32_t cc_minor, int32_t* index, std::string* message,
                              const std::string& only_name, const std::string& preferred) {
    const int32_t group = p.num_q_heads / p.num_kv_heads;
    // The restriction applies to the dtypes the named kernel takes; other calls (e.g. the fp64
    // reference next to a restricted bf16 kernel) select as usual.
    const bool restricted =
        !only_name.empty() && std::any_of(kernels.begin(), kernels.end(), [&](const ManifestKernel& k) {
            return k.kind == kKindPrefill && k.name == only_name && k.q_dtype == p.q_dtype &&
                   k.kv_dtype == p.kv_dtype && k.o_dtype == p.o_dtype;
        });
    const auto candidate = [&](const ManifestKernel& k) {
        return k.kind == kKindPrefill && (!restricted || k.name == only_name) && k.q_dtype == p.q_dtype &&
               k.kv_dtype == p.kv_dtype && k.o_dtype == p.o_dtype;
    };
    std::vector<int32_t> fitting;
    bool arch_miss = false;
    for (size_t i = 0; i < kernels.size(); ++i)
        if (candidate(kernels[i]) && kernel_fits(kernels[i], p, cc_major, cc_minor, restricted, &arch_miss, nullptr))
            fitting.push_back(static_cast<int32_t>(i));
    if (!fitting.empty()) {
        *index = pick_fitting(kernels, fitting, restricted ? std::string() : preferred);
        return WIDEATTN_OK;
    }
    // Nothing fits: one reason per kernel name, in manifest order; an arch mismatch is replaced by
    // the reason a cubin of the right arch was refused, which says more.
    std::vector<std::pair<std::string, std::string>> misses;  // (name, reason)
    std::vector<bool> miss_is_arch;
    for (const ManifestKernel& k : kernels) {
        if (!candidate(k)) continue;
        std::string why;
        kernel_fits(k, p, cc_major, cc_minor, restricted, &arch_miss, &why);
        size_t slot = 0;
        while (slot < misses.size() && misses[slot].first != k.name) ++slot;
        if (slot == misses.size()) {
            misses.emplace_back(k.name, why);
            miss_is_arch.push_back(arch_miss);
        } else if (miss_is_arch[slot] && !arch_miss) {
            misses[slot].second = why;
            miss_is_arch[slot] = false;
        }
    }
    std::ostringstream s;
    s << "no kernel in the bundle for q_dtype=" << dtype_name(p.q_dtype) << " kv_dtype=" << dtype_name(p.kv_dtype)
      << " o_dtype=" << dtype_name(p.o_dtype) << " head_dim=" << p.head_dim << " group=" << group
      << (p.lse ? " with lse" : "") << " on " << device_arch_text(cc_major, cc_minor);
    if (restricted) s << " (selection restricted to kernel " << only_name << " by wideattn_set_prefill_kernel)";
    if (misses.empty()) s << ": no kernel has these dtypes";
    for (size_t i = 0; i < misses.size(); ++i) s << (i ? "; " : ": ") << misses[i].second;
    if (k_from_v_call(p.flags))
        s << ". For several query tokens per sequence over a V-only cache (prefill, verify, mixed batches), "
             "rebuild K and V into a bf16 scratch with wideattn_k_from_v_rebuild and call wideattn_prefill on "
             "it without WIDEATTN_FLAG_K_FROM_V (docs/integration.md section 7)";
    *message = s.str();
    return WIDEATTN_ERROR_UNSUPPORTED;
}

LaunchGeometry launch_geometry(const ManifestKernel& k, const wideattn_prefill_params& p) {
    LaunchGeometry g;
    const int32_t group = p.num_q_heads / p.num_kv_heads;
    const int64_t tiles = token_tile_count(p.total_q, p.num_seqs, k.tile_tokens);
    g.grid_x = static_cast<uint32_t>(k.ctas_per_tile() * tiles);
    g.grid_y = static_cast<uint32_t>(p.num_q_heads / heads_per_block(group, k.heads_per_block_max));
    g.block_x = static_cast<uint32_t>(k.threads);
    g.dynamic_smem = static_cast<uint32_t>(k.dynamic_smem);
    return g;
}

namespace {

// Blocks along grid.y of an element-wise fp8 kernel: heads * head_dim elements, threads *
// tile.keys (elements per thread) per block.
int64_t elementwise_grid_y(const ManifestKernel& k, int32_t heads, int32_t head_dim) {
    const int64_t elements_per_block = int64_t{k.threads} * k.tile_keys;
    return (int64_t{heads} * head_dim + elements_per_block - 1) / elements_per_block;
}

// The closest cubin of `kind` (and of q_dtype `dtype`, unless kAnyDtype) that runs on the device,
// serves head_dim and that `fits` accepts (it returns "" or why not, naming the kernel); `what`
// names the kernel in the refusal. A kernel of the kind whose feature list has `variant` (when
// not null) other than `with_variant` says is another call's and passed over in silence (the
// amax kernels: power_of_two). Shared by the element-wise fp8 kernels and the K-from-V rebuild.
constexpr int32_t kAnyDtype = -1;
template <typename Fits>
wideattn_status select_closest_of_kind(const std::vector<ManifestKernel>& kernels, const char* kind, const char* what,
                                       int32_t dtype, int32_t head_dim, int32_t cc_major, int32_t cc_minor, Fits fits,
                                       int32_t* index, std::string* message, const char* variant = nullptr,
                                       bool with_variant = false) {
    std::vector<int32_t> fitting;
    std::string miss;
    for (size_t i = 0; i < kernels.size(); ++i) {
        const ManifestKernel& k = kernels[i];
        if (k.kind != kind || (dtype != kAnyDtype && k.q_dtype != dtype)) continue;
        if (variant && k.has_feature(variant) != with_variant) continue;
        if (!arch_runs_on(k, cc_major, cc_minor)) {
            if (miss.empty()) miss = k.name + " (" + k.arch + ") does not run on " + device_arch_text(cc_major, cc_minor);
            continue;
        }
        if (head_dim < k.head_dim_min || head_dim > k.head_dim_max) {
            miss = k.name + " serves head_dim " + std::to_string(k.head_dim_min) + ".." + std::to_string(k.head_dim_max) +
                   ", not head_dim=" + std::to_string(head_dim);
            continue;
        }
        if (std::string why = fits(k); !why.empty()) {
            miss = std::move(why);
            continue;
        }
        fitting.push_back(static_cast<int32_t>(i));
    }
    if (!fitting.empty()) {
        *index = pick_fitting(kernels, fitting);
        return WIDEATTN_OK;
    }
    *message = std::string("no ") + what + " in the bundle for " + device_arch_text(cc_major, cc_minor) +
               (miss.empty() ? std::string(": the bundle has none") : ": " + miss);
    return WIDEATTN_ERROR_UNSUPPORTED;
}

// Selection shared by the element-wise fp8 kernels (quantise, amax): the closest cubin of `kind`
// for src_dtype whose head dims and grid fit; `what` names the kernel in the message.
wideattn_status select_elementwise_kernel(const std::vector<ManifestKernel>& kernels, const char* kind,
                                          const char* what, int32_t src_dtype, int32_t heads, int32_t head_dim,
                                          int32_t cc_major, int32_t cc_minor, int32_t* index, std::string* message,
                                          const char* variant = nullptr, bool with_variant = false) {
    const auto grid_fits = [&](const ManifestKernel& k) {
        if (elementwise_grid_y(k, heads, head_dim) <= kMaxGridY) return std::string();
        return k.name + " would need " + std::to_string(elementwise_grid_y(k, heads, head_dim)) +
               " blocks in grid.y for heads=" + std::to_string(heads) + " x head_dim=" + std::to_string(head_dim) +
               " (limit " + std::to_string(kMaxGridY) + ")";
    };
    return select_closest_of_kind(kernels, kind, what, src_dtype, head_dim, cc_major, cc_minor, grid_fits, index,
                                  message, variant, with_variant);
}

// check_quantize_grid / check_scale_grid for kernels of `kind`.
wideattn_status check_elementwise_grid(const std::vector<ManifestKernel>& kernels, const char* kind,
                                       int32_t src_dtype, int32_t heads, int32_t head_dim, std::string* message) {
    const ManifestKernel* widest = nullptr;  // of the kernels serving head_dim, the most elements per block
    for (const ManifestKernel& k : kernels) {
        if (k.kind != kind || k.q_dtype != src_dtype || head_dim < k.head_dim_min || head_dim > k.head_dim_max ||
            k.threads < 1 || k.tile_keys < 1)
            continue;
        if (elementwise_grid_y(k, heads, head_dim) <= kMaxGridY) return WIDEATTN_OK;
        if (!widest || int64_t{k.threads} * k.tile_keys > int64_t{widest->threads} * widest->tile_keys) widest = &k;
    }
    if (!widest) return WIDEATTN_OK;
    const int64_t per_block = int64_t{widest->threads} * widest->tile_keys;
    std::ostringstream s;
    s << "heads=" << heads << " x head_dim=" << head_dim << " needs " << elementwise_grid_y(*widest, heads, head_dim)
      << " blocks in grid.y of " << widest->name << " (" << per_block << " elements per block, limit " << kMaxGridY
      << "): at most " << kMaxGridY * per_block / head_dim << " heads of head_dim=" << head_dim;
    *message = s.str();
    return WIDEATTN_ERROR_INVALID_ARGUMENT;
}

}  // namespace

wideattn_status check_quantize_grid(const std::vector<ManifestKernel>& kernels, const wideattn_quantize_params& p,
                                    std::string* message) {
    return check_elementwise_grid(kernels, kKindQuantizeE4m3, p.src_dtype, p.heads, p.head_dim, message);
}

wideattn_status check_scale_grid(const std::vector<ManifestKernel>& kernels, const wideattn_scale_params& p,
                                 std::string* message) {
    return check_elementwise_grid(kernels, kKindAmaxE4m3, p.src_dtype, p.heads, p.head_dim, message);
}

wideattn_status select_quantize_kernel(const std::vector<ManifestKernel>& kernels, const wideattn_quantize_params& p,
                                       int32_t cc_major, int32_t cc_minor, int32_t* index, std::string* message) {
    return select_elementwise_kernel(kernels, kKindQuantizeE4m3, "e4m3 quantise kernel", p.src_dtype, p.heads,
                                     p.head_dim, cc_major, cc_minor, index, message);
}

wideattn_status select_scale_kernel(const std::vector<ManifestKernel>& kernels, const wideattn_scale_params& p,
                                    int32_t cc_major, int32_t cc_minor, int32_t* index, std::string* message) {
    return select_elementwise_kernel(kernels, kKindAmaxE4m3, "e4m3 amax kernel", p.src_dtype, p.heads, p.head_dim,
                                     cc_major, cc_minor, index, message, kFeaturePowerOfTwo, false);
}

wideattn_status select_scale_pow2_kernel(const std::vector<ManifestKernel>& kernels, const wideattn_scale_params& p,
                                         int32_t cc_major, int32_t cc_minor, int32_t* index, std::string* message) {
    return select_elementwise_kernel(kernels, kKindAmaxE4m3, "power-of-two e4m3 amax kernel", p.src_dtype, p.heads,
                                     p.head_dim, cc_major, cc_minor, index, message, kFeaturePowerOfTwo, true);
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

wideattn_status select_k_from_v_rebuild_kernel(const std::vector<ManifestKernel>& kernels,
                                               const wideattn_prefill_params& p, int32_t cc_major, int32_t cc_minor,
                                               int32_t* index, std::string* message) {
    // Its grid walks pages grid-stride (k_from_v_rebuild_launch_geometry): any call fits.
    const auto any_call = [](const ManifestKernel&) { return std::string(); };
    return select_closest_of_kind(kernels, kKindKFromVRebuild, "K-from-V rebuild kernel", kAnyDtype, p.head_dim,
                                  cc_major, cc_minor, any_call, index, message);
}

LaunchGeometry k_from_v_rebuild_launch_geometry(const ManifestKernel& k, const wideattn_prefill_params& p,
                                                const wideattn_k_from_v_rebuild_out& out) {
    const int64_t pages_per_row = std::min(p.block_table_stride, out.block_table_stride);
    const int64_t pairs = int64_t{p.num_seqs} * pages_per_row;
    LaunchGeometry g;
    g.grid_x = static_cast<uint32_t>(std::min<int64_t>(pairs, KFromVRebuildTraits::kMaxGridX));
    g.grid_y = 1;  // a block takes every KV head of its page
    g.block_x = static_cast<uint32_t>(k.threads);
    g.dynamic_smem = static_cast<uint32_t>(k.dynamic_smem);
    return g;
}

namespace {

int64_t merge_blocks(const ManifestKernel& k, const wideattn_prefill_params& p) {
    return (int64_t{p.total_q} * p.num_q_heads + k.tile_tokens - 1) / k.tile_tokens;
}

}  // namespace

wideattn_status select_merge_kernel(const std::vector<ManifestKernel>& kernels, const wideattn_prefill_params& p,
                                    int32_t cc_major, int32_t cc_minor, int32_t* index, std::string* message) {
    std::vector<int32_t> fitting;
    std::string miss;
    for (size_t i = 0; i < kernels.size(); ++i) {
        const ManifestKernel& k = kernels[i];
        if (k.kind != kKindMergeSplits || k.o_dtype != p.o_dtype || !arch_runs_on(k, cc_major, cc_minor)) continue;
        if (p.head_dim < k.head_dim_min || p.head_dim > k.head_dim_max || k.tile_tokens < 1) {
            miss = k.name + " serves head_dim " + std::to_string(k.head_dim_min) + ".." +
                   std::to_string(k.head_dim_max) + ", not head_dim=" + std::to_string(p.head_dim);
            continue;
        }
        if (merge_blocks(k, p) > kMaxGridX) {
            miss = k.name + " would need " + std::to_string(merge_blocks(k, p)) + " blocks for total_q=" +
                   std::to_string(p.total_q) + " x num_q_heads=" + std::to_string(p.num_q_heads);
            continue;
        }
        fitting.push_back(static_cast<int32_t>(i));
    }
    if (!fitting.empty()) {
        *index = pick_fitting(kernels, fitting);
        return WIDEATTN_OK;
    }
    *message = std::string("no split-KV merge kernel in the bundle for o_dtype=") + dtype_name(p.o_dtype) + " on " +
               device_arch_text(cc_major, cc_minor) + (miss.empty() ? std::string() : ": " + miss);
    return WIDEATTN_ERROR_UNSUPPORTED;
}

LaunchGeometry merge_launch_geometry(const ManifestKernel& k, const wideattn_prefill_params& p) {
    LaunchGeometry g;
    g.grid_x = static_cast<uint32_t>(merge_blocks(k, p));
    g.grid_y = 1;
    g.block_x = static_cast<uint32_t>(k.threads);
    g.dynamic_smem = static_cast<uint32_t>(k.dynamic_smem);
    return g;
}

}  // namespace wideattn
