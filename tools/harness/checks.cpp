// checks.cpp - see checks.h.
#include "tools/harness/checks.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "accuracy/bf16.h"
#include "accuracy/reference_cpu.h"
#include "dispatch/manifest.h"
#include "dispatch/selection.h"
#include "kernels/common/k_from_v.h"
#include "kernels/common/kernel_desc.h"
#include "kernels/common/v_transposed.h"

namespace wideattn {
namespace {

std::string reference_on_cpu(const HostProblem& h, std::vector<double>* dense, std::vector<double>* lse) {
    std::vector<double> strided(static_cast<size_t>(h.out_elements()), 0.0);
    lse->assign(h.spec.want_lse ? static_cast<size_t>(h.lse_elements()) : 0, 0.0);
    const wideattn_prefill_params p =
        h.params(h.q.data(), h.k.data(), h.v.data(), strided.data(), lse->empty() ? nullptr : lse->data(),
                 h.cu_seqlens_q.data(), h.seq_lens_k.data(), h.block_table.data(), WIDEATTN_DTYPE_F64);
    std::string err = accuracy::reference_attention_cpu(p, strided.data(), lse->empty() ? nullptr : lse->data());
    *dense = dense_rows(h, strided);
    return err;
}

// Makes `p` a K-from-V call with the description `kfv` (k_cache absent); nothing when kfv is NULL.
void ask_k_from_v(wideattn_prefill_params* p, const wideattn_k_from_v* kfv) {
    if (!kfv) return;
    p->k_cache = nullptr;
    p->k_scale = nullptr;  // a V-only e4m3 cache has no K scale (dispatch/validation.cpp, check_scales)
    p->flags |= WIDEATTN_FLAG_K_FROM_V;
    p->k_from_v = kfv;
}

std::string reference_on_gpu(const GpuDevice& gpu, wideattn_context* ctx, const HostProblem& h,
                             std::vector<double>* dense, std::vector<double>* lse,
                             const wideattn_k_from_v* kfv = nullptr) {
    DeviceProblem ref;
    std::string err = ref.create(gpu, h, WIDEATTN_DTYPE_F64);
    ask_k_from_v(&ref.params, kfv);
    if (err.empty()) err = ref.run(gpu, ctx);
    if (err.empty()) err = ref.download_output(h, dense);
    if (err.empty()) err = ref.download_lse(h, lse);
    return err.empty() ? err : "fp64 GPU reference: " + err;
}

// Whether a kernel's comma-separated feature list names `feature`.
bool lists_feature(const char* features, const char* feature) {
    const std::string list = std::string(",") + (features ? features : "") + ",";
    return list.find(std::string(",") + feature + ",") != std::string::npos;
}

// Mean |bf16(x) - x| over the finite reference values.
double rounding_floor(const std::vector<double>& reference) {
    double sum = 0.0;
    int64_t count = 0;
    for (double x : reference) {
        if (!std::isfinite(x)) continue;
        sum += std::fabs(static_cast<double>(bf16_to_float(float_to_bf16(static_cast<float>(x)))) - x);
        ++count;
    }
    return count ? sum / static_cast<double>(count) : 0.0;
}

}  // namespace

double floor_ratio(const CaseResult& r) {
    if (r.floor_mean_abs > 0.0) return r.stats.mean_abs / r.floor_mean_abs;
    return r.stats.mean_abs == 0.0 ? 1.0 : INFINITY;
}

bool find_kernel_info(const wideattn_context* ctx, const std::string& name, wideattn_kernel_info* info) {
    for (int i = 0; i < wideattn_kernel_count(ctx); ++i) {
        wideattn_kernel_info k{};
        wideattn_get_kernel_info(ctx, i, &k);
        if (name == k.name) {
            *info = k;
            return true;
        }
    }
    return false;
}

bool kernel_has_feature(const wideattn_context* ctx, const std::string& name, const char* feature) {
    wideattn_kernel_info k{};
    return find_kernel_info(ctx, name, &k) && lists_feature(k.features, feature);
}

bool kernel_reads_transposed_v(const wideattn_context* ctx, const std::string& name) {
    return kernel_has_feature(ctx, name, kFeatureVTransposed);
}

bool kernel_k_from_v_only(const wideattn_context* ctx, const std::string& name) {
    return kernel_has_feature(ctx, name, kFeatureKFromVOnly);
}

int32_t kernel_alone_tokens_per_seq(const wideattn_context* ctx, const std::string& name) {
    return alone_tokens_per_seq(kernel_has_feature(ctx, name, kFeatureSingleToken),
                                kernel_has_feature(ctx, name, kFeatureFewTokens));
}

bool kernel_serves_alone(const wideattn_context* ctx, const std::string& name, int64_t total_q, int64_t num_seqs) {
    return within_alone_limit(kernel_alone_tokens_per_seq(ctx, name), total_q, num_seqs);
}

std::vector<RunnableKernel> runnable_kernels(const wideattn_context* ctx, int cc_major, int cc_minor) {
    std::vector<RunnableKernel> kernels;
    for (int i = 0; i < wideattn_kernel_count(ctx); ++i) {
        wideattn_kernel_info k{};
        wideattn_get_kernel_info(ctx, i, &k);
        ManifestKernel probe;
        if (!parse_arch(k.arch, &probe.arch_major, &probe.arch_minor, &probe.arch_specific) ||
            !arch_runs_on(probe, cc_major, cc_minor))
            continue;
        const bool listed = std::any_of(kernels.begin(), kernels.end(),
                                        [&](const RunnableKernel& r) { return r.name == k.name; });
        if (!listed)
            kernels.push_back(RunnableKernel{k.name, k.kind, k.q_dtype, k.kv_dtype, k.o_dtype,
                                             kernel_reads_transposed_v(ctx, k.name),
                                             kernel_k_from_v_only(ctx, k.name)});
    }
    return kernels;
}

std::string compute_reference(const GpuDevice& gpu, wideattn_context* ctx, const HostProblem& h,
                              ReferenceKind reference, Reference* out) {
    const std::string err = reference == ReferenceKind::kCpu ? reference_on_cpu(h, &out->out, &out->lse)
                                                             : reference_on_gpu(gpu, ctx, h, &out->out, &out->lse);
    if (err.empty()) out->floor_mean_abs = rounding_floor(out->out);
    return err;
}

CaseResult run_against_reference(const GpuDevice& gpu, wideattn_context* ctx, const HostProblem& h, int32_t o_dtype,
                                 const Reference& ref, const wideattn_k_from_v* kfv, const PrepareCandidate& prepare) {
    CaseResult result;
    result.flops = h.flops();
    DeviceProblem cand;
    if ((result.error = cand.create(gpu, h, o_dtype)).size()) return result;
    ask_k_from_v(&cand.params, kfv);
    if (prepare && (result.error = prepare(&cand)).size()) return result;
    int32_t index = -1;
    if (wideattn_is_supported(ctx, &cand.params, gpu.cc_major(), gpu.cc_minor(), &index) != WIDEATTN_OK) {
        result.error = std::string("not supported: ") + wideattn_last_error();
        return result;
    }
    wideattn_kernel_info info{};
    wideattn_get_kernel_info(ctx, index, &info);
    result.kernel = info.name;

    std::vector<double> out, lse;
    std::vector<unsigned char> first_raw, second_raw;
    if ((result.error = cand.run(gpu, ctx)).size() || (result.error = cand.download_raw(&first_raw)).size() ||
        (result.error = cand.download_lse(h, &lse)).size())
        return result;
    cand.dense_output(h, first_raw, &out);
    if ((result.error = cand.run(gpu, ctx)).size() || (result.error = cand.download_raw(&second_raw)).size())
        return result;
    result.deterministic = first_raw == second_raw;
    if (out.size() != ref.out.size() || lse.size() != ref.lse.size()) {
        result.error = "the reference is of another problem (" + std::to_string(ref.out.size()) + " output values, " +
                       std::to_string(out.size()) + " here)";
        return result;
    }
    result.stats = accuracy::compute_error_stats(ref.out.data(), out.data(), accuracy::OutputType::kF64,
                                                 static_cast<int64_t>(ref.out.size()));
    result.floor_mean_abs = ref.floor_mean_abs;
    for (size_t i = 0; i < lse.size(); ++i) {
        if (std::isnan(lse[i]) || (std::isinf(lse[i]) && lse[i] != ref.lse[i])) {
            ++result.lse_nonfinite;
            continue;
        }
        if (std::isinf(ref.lse[i])) continue;
        result.lse_max_abs = std::fmax(result.lse_max_abs, std::fabs(lse[i] - ref.lse[i]));
    }
    return result;
}

CaseResult run_case(const GpuDevice& gpu, wideattn_context* ctx, const ProblemSpec& spec, int32_t o_dtype,
                    ReferenceKind reference) {
    CaseResult result;
    HostProblem h;
    Reference ref;
    if ((result.error = make_problem(spec, &h)).size() ||
        (result.error = compute_reference(gpu, ctx, h, reference, &ref)).size())
        return result;
    return run_against_reference(gpu, ctx, h, o_dtype, ref);
}

wideattn_k_from_v k_from_v_check_description(const float* k_norm_scale, int32_t rotary_dims) {
    wideattn_k_from_v kfv = gemma4_k_from_v(k_norm_scale);
    kfv.rotary_dims = rotary_dims;
    return kfv;
}

CaseResult run_k_from_v_case(const GpuDevice& gpu, wideattn_context* ctx, const ProblemSpec& spec, int32_t o_dtype,
                             int32_t rotary_dims, KNormWeights kind) {
    HostProblem h;
    CaseResult result;
    if ((result.error = make_problem(spec, &h)).size()) return result;
    return run_k_from_v_problem(gpu, ctx, h, o_dtype, rotary_dims, {}, kind);
}

double k_from_v_decode_rel_l2(int32_t kv_dtype) {
    return kv_dtype == WIDEATTN_DTYPE_E4M3 ? kE4m3KFromVDecodeRelL2 : kBf16KFromVDecodeRelL2;
}

CaseResult run_k_from_v_problem(const GpuDevice& gpu, wideattn_context* ctx, const HostProblem& h, int32_t o_dtype,
                                int32_t rotary_dims, const std::vector<float>& inv_freq, KNormWeights kind,
                                const std::vector<uint32_t>& cos_sin) {
    CaseResult result;
    const std::vector<float> w = random_k_norm_weights(h.spec.head_dim, h.spec.seed + 1, kind);
    DeviceBuffer weights, table, cos_sin_table;
    if ((result.error = weights.allocate(gpu, w.size() * sizeof(float))).size() ||
        (result.error = weights.upload(w.data(), w.size() * sizeof(float))).size())
        return result;
    wideattn_k_from_v kfv = k_from_v_check_description(static_cast<const float*>(weights.get()), rotary_dims);
    if (!inv_freq.empty()) {
        if ((result.error = table.allocate(gpu, inv_freq.size() * sizeof(float))).size() ||
            (result.error = table.upload(inv_freq.data(), inv_freq.size() * sizeof(float))).size())
            return result;
        kfv.inv_freq = static_cast<const float*>(table.get());
    }
    if (!cos_sin.empty() && (result.error = attach_device_cos_sin(gpu, cos_sin, &cos_sin_table, &kfv)).size())
        return result;
    Reference ref;
    if ((result.error = reference_on_gpu(gpu, ctx, h, &ref.out, &ref.lse, &kfv)).size()) return result;
    ref.floor_mean_abs = rounding_floor(ref.out);
    return run_against_reference(gpu, ctx, h, o_dtype, ref, &kfv);
}

// Rebuilds the keys of the K-from-V call *p into `scratch` (poisoned first; the problem's table
// width in pages a sequence) and turns *p into the K + V call on it.
std::string rebuild_into_scratch(const GpuDevice& gpu, wideattn_context* ctx, const HostProblem& h,
                                 RebuildScratch* scratch, wideattn_prefill_params* p) {
    std::string err = scratch->create(gpu, h, h.table_stride);
    if (err.empty()) err = scratch->k.fill(kPoisonByte);
    if (err.empty()) err = scratch->v.fill(kPoisonByte);
    if (!err.empty()) return err;
    if (wideattn_k_from_v_rebuild(ctx, p, &scratch->out, nullptr) != WIDEATTN_OK)
        return std::string("wideattn_k_from_v_rebuild: ") + wideattn_last_error();
    if ((err = gpu.check(gpu.driver().cuCtxSynchronize(), "rebuild (cuCtxSynchronize)")).size()) return err;
    *p = k_and_v_call(*p, scratch->out);
    return {};
}

CaseResult run_k_from_v_rebuild_case(const GpuDevice& gpu, wideattn_context* ctx, const ProblemSpec& spec,
                                     int32_t rotary_dims, KNormWeights kind) {
    CaseResult result;
    HostProblem h;
    if ((result.error = make_problem(spec, &h)).size()) return result;
    const std::vector<float> w = random_k_norm_weights(h.spec.head_dim, h.spec.seed + 1, kind);
    DeviceBuffer weights;
    if ((result.error = weights.allocate(gpu, w.size() * sizeof(float))).size() ||
        (result.error = weights.upload(w.data(), w.size() * sizeof(float))).size())
        return result;
    const wideattn_k_from_v kfv = k_from_v_check_description(static_cast<const float*>(weights.get()), rotary_dims);
    Reference ref;
    if ((result.error = reference_on_gpu(gpu, ctx, h, &ref.out, &ref.lse, &kfv)).size()) return result;
    ref.floor_mean_abs = rounding_floor(ref.out);
    RebuildScratch scratch;
    result = run_against_reference(gpu, ctx, h, WIDEATTN_DTYPE_BF16, ref, &kfv, [&](DeviceProblem* cand) {
        return rebuild_into_scratch(gpu, ctx, h, &scratch, &cand->params);
    });
    if (result.error.empty()) result.kernel = "k_from_v_rebuild+" + result.kernel;
    return result;
}

}  // namespace wideattn
