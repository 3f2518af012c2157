// test_gpu_split.cpp - split-KV decode on the GPU (docs/design.md "Split-KV"). Every bf16 and
// e4m3 prefill kernel of the bundle with the "split_kv" feature, forced by name, against the fp64
// kernel on fresh random inputs (shuffled block tables; outputs and workspace poisoned before
// each run; each data set and its reference made once per shape for every family and kernel that
// reads it) for forced split counts and the library's own choice: the kernel's error bound, LSE,
// bit-identical reruns, the workspace sizes the library reports, refusals of a too-small
// workspace, and the unsplit fallback without one; the merge launched as a programmatic dependent
// launch (WIDEATTN_PDL=1) and plainly (WIDEATTN_PDL=0) in one process, bit for bit. The "sanitizer"
// case is small enough for compute-sanitizer (tools/gpu/gpu_suite.sh runs it under memcheck and
// racecheck).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <memory>
#include <string>
#include <vector>

#include "dispatch/dependent_launch.h"
#include "dispatch/split_plan.h"
#include "kernels/common/kernel_desc.h"
#include "kernels/common/v_transposed.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/test_helpers.h"
#include "tools/harness/checks.h"

using namespace wideattn;
using wideattn::test::gpu;
using wideattn::test::KernelRestriction;

namespace {

constexpr int32_t kAutoSplits = 0;                       // num_splits 0: the library chooses
constexpr int32_t kSplitSettings[] = {1, 2, 7, 33, 128, kAutoSplits};
constexpr int32_t kSanitizerSplitSettings[] = {1, 2, 7, kAutoSplits};
constexpr int32_t kDecodeContexts[] = {1, 17, 100, 4095, 20000};
constexpr int32_t kMaxDecodeQLen = 8;
constexpr int32_t kLongContext = 128 * 1024;
constexpr int32_t kBlockSizes[] = {16, 48};
constexpr int32_t kKvHeadCounts[] = {4, 1};
constexpr int32_t kGroup = 8;                            // Gemma 4's global layers
constexpr int64_t kWorkspaceRounding = 256;              // docs/design.md: each region rounded up to 256 bytes
constexpr unsigned char kRerunWorkspaceFill = 0x00;      // the rerun finds other garbage there

uint64_t fresh_seed() {
    static uint64_t seed = static_cast<uint64_t>(std::time(nullptr)) * 7919;
    return ++seed;
}

// The input dtypes of a kernel family, the error bound its existing tests use, whether its
// LSE is held to kFp32LseAbs (e4m3 kernels round the scores: finiteness only, see kE4m3RelL2),
// and whether its kernels read V in the transposed layout (WIDEATTN_FLAG_V_TRANSPOSED) only.
struct Family {
    const char* label;
    int32_t q_dtype, kv_dtype;
    double rel_l2;
    bool check_lse_bound;
    bool v_transposed = false;
};
// The families that differ only in V's layout read the same values and stand side by side, so
// that FamilyInputs makes their data once.
constexpr Family kFamilies[] = {
    {"bf16", WIDEATTN_DTYPE_BF16, WIDEATTN_DTYPE_BF16, kBf16RelL2, true},
    {"e4m3 K/V", WIDEATTN_DTYPE_BF16, WIDEATTN_DTYPE_E4M3, kE4m3RelL2, false},
    {"e4m3 K/V, transposed V", WIDEATTN_DTYPE_BF16, WIDEATTN_DTYPE_E4M3, kE4m3RelL2, false, true},
    {"e4m3 Q+K/V", WIDEATTN_DTYPE_E4M3, WIDEATTN_DTYPE_E4M3, kE4m3RelL2, false},
    {"e4m3 Q+K/V, transposed V", WIDEATTN_DTYPE_E4M3, WIDEATTN_DTYPE_E4M3, kE4m3RelL2, false, true},
};
constexpr size_t kFamilyCount = sizeof(kFamilies) / sizeof(kFamilies[0]);

bool has_feature(const wideattn_kernel_info& k, const char* feature) {
    const std::string list = std::string(",") + (k.features ? k.features : "") + ",";
    return list.find(std::string(",") + feature + ",") != std::string::npos;
}

std::string kernel_name(int32_t index) {
    wideattn_kernel_info k{};
    if (wideattn_get_kernel_info(gpu().ctx, index, &k) != WIDEATTN_OK) return "(no kernel " + std::to_string(index) + ")";
    return k.name;
}

std::string kernel_kind(int32_t index) {
    wideattn_kernel_info k{};
    if (wideattn_get_kernel_info(gpu().ctx, index, &k) != WIDEATTN_OK) return "";
    return k.kind;
}

// The bf16-output prefill kernels of a family that run on this GPU and have the split path, in
// manifest order; those without it are printed (a forced split count does not apply to them).
std::vector<std::string> split_kernels(const Family& family) {
    std::vector<std::string> names;
    for (const RunnableKernel& r : runnable_kernels(gpu().ctx, gpu().device->cc_major(), gpu().device->cc_minor())) {
        if (r.kind != kKindPrefill || r.o_dtype != WIDEATTN_DTYPE_BF16 || r.q_dtype != family.q_dtype ||
            r.kv_dtype != family.kv_dtype || r.v_transposed != family.v_transposed)
            continue;
        if (r.k_from_v_only) {
            std::printf("  %s: serves only K-from-V calls, not part of the split-KV cases\n", r.name.c_str());
            continue;
        }
        bool split = false;
        for (int32_t i = 0; i < wideattn_kernel_count(gpu().ctx); ++i) {
            wideattn_kernel_info k{};
            wideattn_get_kernel_info(gpu().ctx, i, &k);
            if (r.name == k.name && has_feature(k, kFeatureSplitKv)) split = true;
        }
        if (split)
            names.push_back(r.name);
        else
            std::printf("  %s: no %s feature, not part of the split-KV cases\n", r.name.c_str(), kFeatureSplitKv);
    }
    return names;
}

// split_kernels of every family, in kFamilies order: REQUIREs one for bf16; a family without
// one is reported and left out.
std::vector<std::vector<std::string>> family_kernels() {
    std::vector<std::vector<std::string>> kernels;
    for (const Family& family : kFamilies) {
        CAPTURE(family.label);
        kernels.push_back(split_kernels(family));
        if (family.kv_dtype == WIDEATTN_DTYPE_BF16)
            REQUIRE_MESSAGE(!kernels.back().empty(), "no bf16 split-KV kernel runs here");
        if (kernels.back().empty()) MESSAGE("no " << family.label << " split-KV kernel runs on this GPU");
    }
    return kernels;
}

int64_t round_up(int64_t bytes) { return (bytes + kWorkspaceRounding - 1) / kWorkspaceRounding * kWorkspaceRounding; }

// The workspace of S splits (docs/design.md "Split-KV"): rows = S x total_q x num_q_heads fp32
// partial O rows of head_dim, then one fp32 LSE per row, each region rounded up to 256 bytes.
int64_t workspace_formula(const HostProblem& h, int32_t splits) {
    const int64_t rows = int64_t{splits} * h.total_q * h.spec.num_q_heads;
    const int64_t f32 = static_cast<int64_t>(sizeof(float));
    return round_up(rows * h.spec.head_dim * f32) + round_up(rows * f32);
}

// The host-side hints a caller has: the largest q_len and seq_lens_k of the batch.
void set_hints(const HostProblem& h, wideattn_prefill_params* p) {
    p->max_seqlen_q = 0;
    p->max_seqlen_k = 0;
    for (size_t s = 0; s < h.seq_lens_k.size(); ++s) {
        p->max_seqlen_q = std::max(p->max_seqlen_q, h.cu_seqlens_q[s + 1] - h.cu_seqlens_q[s]);
        p->max_seqlen_k = std::max(p->max_seqlen_k, h.seq_lens_k[s]);
    }
}

// One problem on the device with its fp64 GPU reference (computed once, unsplit, shared by the
// families that read the same values; none where the unsplit launch is the yardstick).
struct SplitProblem {
    HostProblem host;
    DeviceProblem device;
    std::shared_ptr<const Reference> ref;
};

// Uploads p->host as the bf16-output problem of the split kernels, with the caller's hints.
std::string upload_problem(SplitProblem* p) {
    std::string err = p->device.create(*gpu().device, p->host, WIDEATTN_DTYPE_BF16);
    if (err.empty()) set_hints(p->host, &p->device.params);
    return err;
}

// Adapts a spec to a family: e4m3 K/V (and Q); NaN in unused K/V slots where the K/V are bf16.
ProblemSpec for_family(ProblemSpec spec, const Family& family) {
    spec.e4m3_kv = family.kv_dtype == WIDEATTN_DTYPE_E4M3;
    spec.e4m3_q = family.q_dtype == WIDEATTN_DTYPE_E4M3;
    spec.v_transposed = family.v_transposed;
    spec.nan_unused_slots = !spec.e4m3_kv;
    return spec;
}

// One base spec's problem for each family, its inputs made (and their reference computed) once
// per data set: the families with the same Q and K/V dtypes read the same values, V in either
// layout, so the last data set serves every family after it that has its dtypes (kFamilies puts
// them side by side), the transposed one rearranged from it (transpose_v_codes).
class FamilyInputs {
public:
    FamilyInputs(const ProblemSpec& base, bool with_reference) : base_(base), with_reference_(with_reference) {}
    // The family's problem, uploaded, with the shared reference when asked for; "" or an error.
    std::string make(const Family& family, SplitProblem* p) {
        if (!data_of_ || data_of_->q_dtype != family.q_dtype || data_of_->kv_dtype != family.kv_dtype) {
            ProblemSpec spec = for_family(base_, family);
            spec.v_transposed = false;
            data_of_ = nullptr;
            ref_.reset();
            std::string err = make_problem(spec, &host_);
            if (err.empty() && with_reference_) {
                auto ref = std::make_shared<Reference>();
                err = compute_reference(*gpu().device, gpu().ctx, host_, ReferenceKind::kGpuF64, ref.get());
                ref_ = std::move(ref);
            }
            if (!err.empty()) return spec.describe() + ": " + err;
            data_of_ = &family;
        }
        p->host = host_;
        p->ref = ref_;
        if (family.v_transposed) {
            if (std::string err = transpose_v_codes(&p->host); !err.empty()) return err;
        }
        return upload_problem(p);
    }

private:
    ProblemSpec base_;
    bool with_reference_;
    const Family* data_of_ = nullptr;  // the family whose dtypes made host_; none yet
    HostProblem host_;                 // V in the engine layout
    std::shared_ptr<const Reference> ref_;
};

// Calls body(f, problem) for every family f of kFamilies that has split kernels (`kernels`,
// family_kernels), with the family's problem made by `inputs`.
template <typename Body>
void for_each_family(FamilyInputs& inputs, const std::vector<std::vector<std::string>>& kernels, Body body) {
    for (size_t f = 0; f < kFamilyCount; ++f) {
        if (kernels[f].empty()) continue;
        CAPTURE(kFamilies[f].label);
        SplitProblem p;
        const std::string err = inputs.make(kFamilies[f], &p);
        REQUIRE_MESSAGE(err.empty(), err);
        CAPTURE(p.host.spec.describe());
        body(f, p);
    }
}

// One split setting run twice: the plan, the workspace it ran with, both outputs, and where the
// library's wideattn_workspace_size disagreed with docs/design.md's size (empty when it agreed).
struct SplitRun {
    std::string error;
    std::string sizing_mismatch;
    int64_t workspace_bytes = 0;
    wideattn_launch_plan plan{};
    std::vector<unsigned char> o_raw, lse_raw, o_rerun, lse_rerun;
    std::vector<double> out, lse;
};

std::string download_raw_lse(const DeviceProblem& d, std::vector<unsigned char>* bytes) {
    bytes->resize(d.lse.bytes());
    return d.lse.download(bytes->data(), bytes->size());
}

// The workspace of one setting, asked of wideattn_workspace_size without a workspace attached (as
// a caller sizes it). A forced count takes docs/design.md's size whatever the answer, so the
// kernels' split path is tested even where the answer is wrong; a differing answer or a refusal
// is recorded in r->sizing_mismatch. Automatic: the answer, or r->error when it is refused.
void size_workspace(const SplitProblem& p, const wideattn_prefill_params& params, int32_t splits, SplitRun* r) {
    int64_t asked = -1;
    const wideattn_status status = wideattn_workspace_size(gpu().ctx, &params, &asked);
    const std::string answer = status == WIDEATTN_OK ? std::to_string(asked) + " bytes"
                                                     : std::string(wideattn_status_string(status)) + ": " +
                                                           wideattn_last_error();
    if (splits == kAutoSplits) {
        if (status != WIDEATTN_OK) r->error = "wideattn_workspace_size: " + answer;
        r->workspace_bytes = asked;
        return;
    }
    r->workspace_bytes = splits > 1 ? workspace_formula(p.host, splits) : 0;
    if (status != WIDEATTN_OK || asked != r->workspace_bytes)
        r->sizing_mismatch = "wideattn_workspace_size with num_splits=" + std::to_string(splits) + " and no workspace: " +
                             answer + ", docs/design.md gives " + std::to_string(r->workspace_bytes);
}

// Sizes the workspace (size_workspace), fills it with poison, plans, runs (outputs poisoned),
// downloads; refills the workspace with other bytes and reruns.
SplitRun run_split(SplitProblem* p, int32_t splits, DeviceBuffer* workspace) {
    SplitRun r;
    wideattn_prefill_params& params = p->device.params;
    params.num_splits = splits;
    params.workspace = nullptr;
    params.workspace_bytes = 0;
    size_workspace(*p, params, splits, &r);
    if (!r.error.empty()) return r;
    if (r.workspace_bytes > 0) {
        if ((r.error = workspace->allocate(*gpu().device, static_cast<size_t>(r.workspace_bytes))).size() ||
            (r.error = workspace->fill(kPoisonByte)).size())
            return r;
        params.workspace = workspace->get();
        params.workspace_bytes = r.workspace_bytes;
    }
    const GpuDevice& dev = *gpu().device;
    if (wideattn_plan_launch(gpu().ctx, &params, dev.cc_major(), dev.cc_minor(), dev.multiprocessors(), &r.plan) !=
        WIDEATTN_OK) {
        r.error = std::string("wideattn_plan_launch: ") + wideattn_last_error();
        return r;
    }
    if ((r.error = p->device.run(dev, gpu().ctx)).size() || (r.error = p->device.download_raw(&r.o_raw)).size() ||
        (r.error = download_raw_lse(p->device, &r.lse_raw)).size() ||
        (r.error = p->device.download_lse(p->host, &r.lse)).size())
        return r;
    p->device.dense_output(p->host, r.o_raw, &r.out);
    if (r.workspace_bytes > 0 && (r.error = workspace->fill(kRerunWorkspaceFill)).size()) return r;
    if ((r.error = p->device.run(dev, gpu().ctx)).size() || (r.error = p->device.download_raw(&r.o_rerun)).size() ||
        (r.error = download_raw_lse(p->device, &r.lse_rerun)).size())
        return r;
    return r;
}

// The plan and workspace size of one setting as wideattn.h and docs/design.md state them.
void check_plan(const SplitProblem& p, const std::string& kernel, int32_t splits, const SplitRun& r) {
    CHECK(kernel_name(r.plan.kernel_index) == kernel);
    if (splits == kAutoSplits) {
        CHECK(r.plan.num_splits == r.plan.preferred_splits);
        CHECK(r.plan.workspace_bytes == r.workspace_bytes);
    } else {
        CHECK(r.plan.num_splits == splits);
    }
    CHECK(r.plan.num_splits >= 1);
    CHECK(r.plan.num_splits <= WIDEATTN_MAX_SPLITS);
    if (r.plan.num_splits == 1) {
        CHECK(r.plan.merge_kernel_index == -1);
        CHECK(r.workspace_bytes == 0);
    } else {
        CHECK(kernel_kind(r.plan.merge_kernel_index) == kKindMergeSplits);
        CHECK(r.workspace_bytes == workspace_formula(p.host, r.plan.num_splits));
    }
}

// Output and LSE of one setting against the fp64 reference, and the rerun bit for bit.
double check_against_reference(const SplitProblem& p, const Family& family, const SplitRun& r) {
    REQUIRE(p.ref);
    const Reference& ref = *p.ref;
    REQUIRE(r.out.size() == ref.out.size());
    const accuracy::ErrorStats stats = accuracy::compute_error_stats(
        ref.out.data(), r.out.data(), accuracy::OutputType::kF64, static_cast<int64_t>(ref.out.size()));
    INFO(accuracy::format_error_stats(stats));
    CHECK(stats.nonfinite == 0);
    CHECK(stats.rel_l2 <= family.rel_l2);
    REQUIRE(r.lse.size() == ref.lse.size());
    int64_t lse_nonfinite = 0;
    double lse_max_abs = 0.0;
    for (size_t i = 0; i < r.lse.size(); ++i) {
        if (std::isnan(r.lse[i]) || (std::isinf(r.lse[i]) && r.lse[i] != ref.lse[i])) {
            ++lse_nonfinite;
            continue;
        }
        if (!std::isinf(ref.lse[i])) lse_max_abs = std::fmax(lse_max_abs, std::fabs(r.lse[i] - ref.lse[i]));
    }
    CHECK(lse_nonfinite == 0);
    if (family.check_lse_bound) CHECK(lse_max_abs <= kFp32LseAbs);
    CHECK_MESSAGE(r.o_raw == r.o_rerun, "rerun output differs");
    CHECK_MESSAGE(r.lse_raw == r.lse_rerun, "rerun LSE differs");
    return stats.rel_l2;
}

// wideattn_workspace_size answers that differ from docs/design.md's sizes: how many, and the first.
struct SizingMismatches {
    int count = 0;
    std::string first;
};

// Every setting of `settings` for one kernel (already forced) on one problem; one line of output.
template <size_t N>
void check_split_settings(SplitProblem* p, const Family& family, const std::string& kernel,
                          const int32_t (&settings)[N], SizingMismatches* sizing) {
    double worst = 0.0;
    int32_t auto_splits = 0;
    for (const int32_t splits : settings) {
        CAPTURE(splits);
        DeviceBuffer workspace;
        const SplitRun r = run_split(p, splits, &workspace);
        REQUIRE_MESSAGE(r.error.empty(), r.error);
        if (!r.sizing_mismatch.empty() && sizing->count++ == 0) sizing->first = kernel + ": " + r.sizing_mismatch;
        check_plan(*p, kernel, splits, r);
        worst = std::fmax(worst, check_against_reference(*p, family, r));
        if (splits == kAutoSplits) auto_splits = r.plan.num_splits;
    }
    std::printf("  %-18s %-64s worst rel L2 %.3e, auto %d splits\n", kernel.c_str(), p->host.spec.describe().c_str(),
                worst, auto_splits);
}

// Single decode sequences: q_len 1..8 x kDecodeContexts, KV heads and page sizes cycling so each
// context meets both of each.
std::vector<ProblemSpec> decode_specs(uint64_t seed) {
    std::vector<ProblemSpec> specs;
    int variant = 0;
    for (int32_t q_len = 1; q_len <= kMaxDecodeQLen; ++q_len)
        for (const int32_t context : kDecodeContexts) {
            const int32_t kv_heads = kKvHeadCounts[variant % 2];
            const int32_t block_size = kBlockSizes[(variant / 2) % 2];
            specs.push_back(problem_spec({q_len}, {context}, kv_heads * kGroup, kv_heads, block_size, seed + variant));
            ++variant;
        }
    return specs;
}

// Mixed batches (empty sequences, a long prefill chunk beside decodes) and one 128k-key decode.
std::vector<ProblemSpec> batch_specs(uint64_t seed) {
    return {
        problem_spec({0, 1, 3, 0, 8, 2}, {50, 20000, 4095, 0, 17, 1}, 32, 4, 48, seed),
        problem_spec({1, 1200, 1, 4, 0, 1}, {17000, 2000, 100, 4095, 7, 1}, 32, 4, 16, seed + 1),
        problem_spec({2, 0, 1, 5}, {4095, 100, 20000, 1}, 8, 1, 48, seed + 2),
        problem_spec({1}, {kLongContext}, 8, 1, 48, seed + 3),
    };
}

// Runs `settings` on every spec for every split kernel of every family (family_kernels), spec by
// spec, each data set made once (FamilyInputs).
template <size_t N>
void check_families(const std::vector<ProblemSpec>& specs, const int32_t (&settings)[N]) {
    const std::vector<std::vector<std::string>> kernels = family_kernels();
    SizingMismatches sizing[kFamilyCount];
    for (const ProblemSpec& base : specs) {
        FamilyInputs inputs(base, true);
        for_each_family(inputs, kernels, [&](size_t f, SplitProblem& p) {
            for (const std::string& name : kernels[f]) {
                CAPTURE(name);
                const KernelRestriction only(name);
                check_split_settings(&p, kFamilies[f], name, settings, &sizing[f]);
            }
        });
    }
    // A caller sizes a forced count with wideattn_workspace_size before it has a workspace.
    for (size_t f = 0; f < kFamilyCount; ++f)
        CHECK_MESSAGE(sizing[f].count == 0, kFamilies[f].label << ": " << sizing[f].count
                                                               << " forced settings sized wrongly; first: "
                                                               << sizing[f].first);
}

}  // namespace

TEST_CASE("gpu split-KV: decode q_len 1..8 x contexts 1..20000, forced and automatic splits, every kernel") {
    const uint64_t seed = fresh_seed() * 1000;
    check_families(decode_specs(seed), kSplitSettings);
}

TEST_CASE("gpu split-KV: mixed batches with empty sequences and a prefill chunk, and a 128k context") {
    const uint64_t seed = fresh_seed() * 1000 + 500;
    check_families(batch_specs(seed), kSplitSettings);
}

TEST_CASE("gpu split-KV sanitizer: small split decode cases") {
    // Small enough for compute-sanitizer's racecheck (about 300x slower on shared memory).
    const uint64_t seed = fresh_seed() * 1000 + 900;
    const std::vector<ProblemSpec> specs = {problem_spec({1, 3, 0}, {100, 40, 17}, 8, 1, 16, seed),
                                            problem_spec({2}, {300}, 32, 4, 48, seed + 1)};
    check_families(specs, kSanitizerSplitSettings);
}

namespace {

// The first bf16 split kernel and one decode problem for the refusal cases.
struct RefusalSetup {
    std::string kernel;
    SplitProblem problem;
};

void make_refusal_setup(RefusalSetup* s, const ProblemSpec& spec) {
    const std::vector<std::string> kernels = split_kernels(kFamilies[0]);
    REQUIRE_MESSAGE(!kernels.empty(), "no bf16 split-KV kernel runs here");
    s->kernel = kernels.front();
    const std::string err = FamilyInputs(spec, true).make(kFamilies[0], &s->problem);
    REQUIRE_MESSAGE(err.empty(), err);
}

// Launches params as given (outputs poisoned first); the status, and the message on failure.
wideattn_status launch(SplitProblem* p, const wideattn_prefill_params& params, std::string* message) {
    REQUIRE(p->device.poison_outputs().empty());
    const wideattn_status status = wideattn_prefill(gpu().ctx, &params, nullptr);
    *message = status == WIDEATTN_OK ? "" : wideattn_last_error();
    REQUIRE(gpu().device->check(gpu().device->driver().cuCtxSynchronize(), "cuCtxSynchronize").empty());
    return status;
}

constexpr int32_t kRefusalSplits = 7;
constexpr int64_t kMisalignment = 8;   // bytes: a workspace 8 past a 16-byte boundary

}  // namespace

TEST_CASE("gpu split-KV: a too-small or misaligned workspace with forced splits is refused, the context keeps working") {
    RefusalSetup s;
    make_refusal_setup(&s, problem_spec({1}, {4095}, 32, 4, 16, fresh_seed()));
    const KernelRestriction only(s.kernel);
    SplitProblem& p = s.problem;
    DeviceBuffer workspace;
    const SplitRun good = run_split(&p, kRefusalSplits, &workspace);   // leaves params on `workspace`
    REQUIRE_MESSAGE(good.error.empty(), good.error);
    REQUIRE(good.plan.num_splits == kRefusalSplits);
    const wideattn_prefill_params valid = p.device.params;
    std::string message;

    wideattn_prefill_params small = valid;
    small.workspace_bytes = good.workspace_bytes - kWorkspaceRounding;
    CHECK(launch(&p, small, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK_MESSAGE(message.find("workspace_bytes") != std::string::npos, message);

    wideattn_prefill_params none = valid;
    none.workspace = nullptr;
    none.workspace_bytes = 0;
    CHECK(launch(&p, none, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK_MESSAGE(message.find("workspace") != std::string::npos, message);

    // Large enough, but 8 bytes past a 16-byte boundary.
    DeviceBuffer roomy;
    REQUIRE(roomy.allocate(*gpu().device, static_cast<size_t>(good.workspace_bytes + kWorkspaceRounding)).empty());
    wideattn_prefill_params misaligned = valid;
    misaligned.workspace = static_cast<unsigned char*>(roomy.get()) + kMisalignment;
    CHECK(launch(&p, misaligned, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK_MESSAGE(message.find("workspace") != std::string::npos, message);

    wideattn_prefill_params too_many = valid;
    too_many.num_splits = WIDEATTN_MAX_SPLITS + 1;
    CHECK(launch(&p, too_many, &message) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK_MESSAGE(message.find("num_splits=" + std::to_string(WIDEATTN_MAX_SPLITS + 1)) != std::string::npos, message);

    // The context keeps working: a good run after the refusals gives the bits of the one before.
    REQUIRE(launch(&p, valid, &message) == WIDEATTN_OK);
    std::vector<unsigned char> after, lse_after;
    REQUIRE(p.device.download_raw(&after).empty());
    REQUIRE(download_raw_lse(p.device, &lse_after).empty());
    CHECK(after == good.o_raw);
    CHECK(lse_after == good.lse_raw);
}

TEST_CASE("gpu split-KV: automatic splits without a workspace run unsplit, with a partial one use what fits") {
    RefusalSetup s;
    make_refusal_setup(&s, problem_spec({1}, {20000}, 8, 1, 16, fresh_seed()));
    const KernelRestriction only(s.kernel);
    SplitProblem& p = s.problem;
    const GpuDevice& dev = *gpu().device;

    DeviceBuffer unused;
    const SplitRun unsplit = run_split(&p, 1, &unused);
    REQUIRE_MESSAGE(unsplit.error.empty(), unsplit.error);

    // One (token tile, KV head) block on the whole GPU: the library wants to split it.
    wideattn_prefill_params automatic = p.device.params;
    automatic.num_splits = kAutoSplits;
    automatic.workspace = nullptr;
    automatic.workspace_bytes = 0;
    wideattn_launch_plan plan{};
    REQUIRE(wideattn_plan_launch(gpu().ctx, &automatic, dev.cc_major(), dev.cc_minor(), dev.multiprocessors(),
                                 &plan) == WIDEATTN_OK);
    CHECK(plan.num_splits == 1);
    CHECK(plan.merge_kernel_index == -1);
    CHECK(plan.preferred_splits > 1);
    CHECK(plan.workspace_bytes == workspace_formula(p.host, plan.preferred_splits));
    int64_t current_device_bytes = -1;
    REQUIRE(wideattn_workspace_size(gpu().ctx, &automatic, &current_device_bytes) == WIDEATTN_OK);
    CHECK(current_device_bytes == plan.workspace_bytes);

    std::string message;
    REQUIRE(launch(&p, automatic, &message) == WIDEATTN_OK);
    std::vector<unsigned char> out, lse;
    REQUIRE(p.device.download_raw(&out).empty());
    REQUIRE(download_raw_lse(p.device, &lse).empty());
    CHECK_MESSAGE(out == unsplit.o_raw, "auto without a workspace differs from num_splits = 1");
    CHECK(lse == unsplit.lse_raw);

    // A workspace for exactly two splits: the library takes the most that fit.
    if (plan.preferred_splits > 2) {
        constexpr int32_t kFittingSplits = 2;
        DeviceBuffer partial;
        const int64_t bytes = workspace_formula(p.host, kFittingSplits);
        REQUIRE(partial.allocate(dev, static_cast<size_t>(bytes)).empty());
        REQUIRE(partial.fill(kPoisonByte).empty());
        automatic.workspace = partial.get();
        automatic.workspace_bytes = bytes;
        REQUIRE(wideattn_plan_launch(gpu().ctx, &automatic, dev.cc_major(), dev.cc_minor(), dev.multiprocessors(),
                                     &plan) == WIDEATTN_OK);
        CHECK(plan.num_splits == kFittingSplits);
        CHECK(kernel_kind(plan.merge_kernel_index) == kKindMergeSplits);
        REQUIRE(launch(&p, automatic, &message) == WIDEATTN_OK);
        std::vector<double> dense;
        REQUIRE(p.device.download_output(p.host, &dense).empty());
        REQUIRE(dense.size() == p.ref->out.size());
        const accuracy::ErrorStats stats = accuracy::compute_error_stats(
            p.ref->out.data(), dense.data(), accuracy::OutputType::kF64, static_cast<int64_t>(dense.size()));
        INFO(accuracy::format_error_stats(stats));
        CHECK(stats.nonfinite == 0);
        CHECK(stats.rel_l2 <= kBf16RelL2);
    }
}

// Non-finite inputs (docs/design.md "Non-finite inputs"): one NaN or +-inf in Q, K or V of one
// sequence of a two-sequence decode batch. Every split setting must give NaN in exactly the
// output elements and LSE entries where the unsplit launch of the same kernel has it, the finite
// elements within the kernel's error of the unsplit result, and the other sequence's rows the bits
// of a clean run with the same setting.
namespace {

constexpr uint16_t kBf16NaN = 0x7fc0;
constexpr uint16_t kBf16PosInf = 0x7f80;
constexpr uint16_t kBf16NegInf = 0xff80;
constexpr uint16_t kBf16PlusHalf = 0x3f00;
constexpr uint16_t kBf16MinusHalf = 0xbf00;
constexpr uint8_t kE4m3NaN = 0x7f;  // e4m3 (the fn variant) has NaN codes but no infinities
constexpr int32_t kNonFiniteQLens[] = {1, 5};
constexpr int32_t kNonFiniteContexts[] = {6000, 3000};
constexpr int32_t kNonFiniteSplitSettings[] = {2, 7, kAutoSplits};
constexpr int32_t kCorruptSeq = 0;
constexpr int32_t kCleanSeq = 1;
constexpr int32_t kCorruptQHead = 3;   // query head of the NaN in Q (of KV head 0)
constexpr int32_t kCorruptKvHead = 1;  // KV head of the corrupted key or value
constexpr int32_t kCorruptKey = 4321;  // a cached key of sequence 0, past the first split's range
constexpr int32_t kCorruptDim = 77;

enum class Corruption { kQNaN, kKNaN, kKPosInf, kKNegInf, kVNaN };
struct CorruptionCase {
    Corruption what;
    const char* label;
    bool needs_bf16_kv;  // an infinity has no e4m3 code
};
constexpr CorruptionCase kCorruptions[] = {
    {Corruption::kQNaN, "NaN in Q", false},       {Corruption::kKNaN, "NaN in K", false},
    {Corruption::kKPosInf, "+inf in K", true},    {Corruption::kKNegInf, "-inf in K", true},
    {Corruption::kVNaN, "NaN in V", false},
};

// Element of (key of sequence seq, KV head, dim) in the paged cache ([block][slot][KV head][d]).
int64_t cache_element(const HostProblem& h, int32_t seq, int32_t key, int32_t kv_head, int32_t dim) {
    const int32_t block = h.block_table[static_cast<size_t>(seq) * h.table_stride + key / h.spec.block_size];
    const int64_t slot = int64_t{block} * h.spec.block_size + key % h.spec.block_size;
    return (slot * h.spec.num_kv_heads + kv_head) * h.spec.head_dim + dim;
}

// The same element in the transposed V layout of HostProblem::use_transposed_v.
int64_t transposed_value_element(const HostProblem& h, int32_t seq, int32_t key, int32_t kv_head, int32_t dim) {
    const int32_t block = h.block_table[static_cast<size_t>(seq) * h.table_stride + key / h.spec.block_size];
    const int64_t head_stride = int64_t{h.spec.head_dim} * h.spec.block_size;
    return v_transposed_offset(block, key % h.spec.block_size, kv_head, dim, head_stride * h.spec.num_kv_heads,
                               head_stride, h.spec.block_size);
}

// Writes the corruption into the inputs the kernel reads (the e4m3 codes where it reads codes).
void corrupt(HostProblem* h, Corruption what) {
    if (what == Corruption::kQNaN) {
        const int64_t at = int64_t{h->cu_seqlens_q[kCorruptSeq]} * h->q_token_stride() +
                           int64_t{kCorruptQHead} * h->spec.head_dim + kCorruptDim;
        if (h->spec.e4m3_q)
            h->q_e4m3[at] = kE4m3NaN;
        else
            h->q[at] = kBf16NaN;
        return;
    }
    const int64_t at = cache_element(*h, kCorruptSeq, kCorruptKey, kCorruptKvHead, kCorruptDim);
    const bool value = what == Corruption::kVNaN;
    if (h->spec.e4m3_kv) {
        const bool transposed = value && h->spec.v_transposed;
        (value ? h->v_e4m3 : h->k_e4m3)[transposed ? transposed_value_element(*h, kCorruptSeq, kCorruptKey,
                                                                               kCorruptKvHead, kCorruptDim)
                                                    : at] = kE4m3NaN;
        return;
    }
    const uint16_t bits = what == Corruption::kKPosInf ? kBf16PosInf : what == Corruption::kKNegInf ? kBf16NegInf : kBf16NaN;
    (value ? h->v : h->k)[at] = bits;
    if (what == Corruption::kKPosInf || what == Corruption::kKNegInf) {
        // Scores +inf (NaN out) for one head and -inf (finite out) for another, whatever the data.
        const int32_t first_head = kCorruptKvHead * (h->spec.num_q_heads / h->spec.num_kv_heads);
        for (int32_t t = h->cu_seqlens_q[kCorruptSeq]; t < h->cu_seqlens_q[kCorruptSeq + 1]; ++t) {
            const int64_t row = int64_t{t} * h->q_token_stride() + kCorruptDim;
            h->q[row + int64_t{first_head} * h->spec.head_dim] = kBf16PlusHalf;
            h->q[row + int64_t{first_head + 1} * h->spec.head_dim] = kBf16MinusHalf;
        }
    }
}

// One problem on the device without a reference (the unsplit launch is the yardstick here).
std::string make_device_problem(const HostProblem& host, SplitProblem* p) {
    p->host = host;
    return upload_problem(p);
}

// The bytes of sequence seq's output rows in a raw o download (bf16, token stride of the problem).
std::vector<unsigned char> sequence_rows(const HostProblem& h, const std::vector<unsigned char>& raw, int32_t seq) {
    const size_t row_bytes = static_cast<size_t>(h.q_token_stride()) * sizeof(uint16_t);
    return {raw.begin() + h.cu_seqlens_q[seq] * row_bytes, raw.begin() + h.cu_seqlens_q[seq + 1] * row_bytes};
}

// Sequence seq's LSE entries ([head][token]).
std::vector<double> sequence_lse(const HostProblem& h, const std::vector<double>& lse, int32_t seq) {
    std::vector<double> entries;
    for (int32_t head = 0; head < h.spec.num_q_heads; ++head)
        for (int32_t t = h.cu_seqlens_q[seq]; t < h.cu_seqlens_q[seq + 1]; ++t)
            entries.push_back(lse[static_cast<size_t>(head) * h.total_q + t]);
    return entries;
}

// The NaN pattern of `split` against `unsplit`; returns how many output elements are NaN.
int64_t check_nonfinite_agreement(const Family& family, const SplitRun& unsplit, const SplitRun& split) {
    REQUIRE(split.out.size() == unsplit.out.size());
    int64_t nan_elements = 0, pattern_mismatches = 0;
    double diff2 = 0.0, ref2 = 0.0;
    for (size_t i = 0; i < unsplit.out.size(); ++i) {
        const double u = unsplit.out[i], s = split.out[i];
        if (std::isnan(u)) ++nan_elements;
        if (std::isnan(u) != std::isnan(s) || std::isinf(u) != std::isinf(s)) {
            ++pattern_mismatches;
        } else if (std::isfinite(u)) {
            diff2 += (s - u) * (s - u);
            ref2 += u * u;
        }
    }
    CHECK_MESSAGE(pattern_mismatches == 0,
                  pattern_mismatches << " output elements NaN / inf / finite where the unsplit launch is not");
    const double rel_l2 = ref2 > 0.0 ? std::sqrt(diff2 / ref2) : 0.0;
    CHECK_MESSAGE(rel_l2 <= family.rel_l2, "finite elements: rel L2 " << rel_l2 << " from the unsplit result");
    REQUIRE(split.lse.size() == unsplit.lse.size());
    int64_t lse_mismatches = 0;
    for (size_t i = 0; i < unsplit.lse.size(); ++i)
        if (std::isnan(unsplit.lse[i]) != std::isnan(split.lse[i]) ||
            std::isinf(unsplit.lse[i]) != std::isinf(split.lse[i]))
            ++lse_mismatches;
    CHECK_MESSAGE(lse_mismatches == 0, lse_mismatches << " LSE entries NaN / inf / finite where the unsplit launch is not");
    return nan_elements;
}

// The corruptions of kCorruptions a problem can hold, each on the device beside the clean one.
struct CorruptedProblems {
    std::vector<const CorruptionCase*> cases;
    std::vector<std::unique_ptr<SplitProblem>> problems;
};

CorruptedProblems corrupted_problems(const HostProblem& clean) {
    CorruptedProblems c;
    for (const CorruptionCase& corruption : kCorruptions) {
        if (corruption.needs_bf16_kv && clean.spec.e4m3_kv) continue;
        CAPTURE(corruption.label);
        HostProblem host = clean;
        corrupt(&host, corruption.what);
        auto p = std::make_unique<SplitProblem>();
        const std::string err = make_device_problem(host, p.get());
        REQUIRE_MESSAGE(err.empty(), err);
        c.cases.push_back(&corruption);
        c.problems.push_back(std::move(p));
    }
    return c;
}

// One corruption through one kernel (already forced): the unsplit launch, then each split
// setting against it and, for the other sequence, against `clean_runs` (the clean problem's
// runs of kNonFiniteSplitSettings); returns the unsplit launch's NaN output elements.
int64_t check_corruption(const Family& family, SplitProblem* bad, const std::vector<SplitRun>& clean_runs,
                         DeviceBuffer* workspace) {
    const SplitRun unsplit = run_split(bad, 1, workspace);
    REQUIRE_MESSAGE(unsplit.error.empty(), unsplit.error);
    REQUIRE(unsplit.plan.num_splits == 1);
    int64_t nan_elements = 0;
    for (size_t i = 0; i < clean_runs.size(); ++i) {
        const int32_t splits = kNonFiniteSplitSettings[i];
        CAPTURE(splits);
        const SplitRun split = run_split(bad, splits, workspace);
        REQUIRE_MESSAGE(split.error.empty(), split.error);
        REQUIRE(split.plan.num_splits > 1);
        nan_elements = check_nonfinite_agreement(family, unsplit, split);
        const SplitRun& reference = clean_runs[i];
        REQUIRE(reference.plan.num_splits == split.plan.num_splits);
        const HostProblem& host = bad->host;
        CHECK_MESSAGE(sequence_rows(host, split.o_raw, kCleanSeq) == sequence_rows(host, reference.o_raw, kCleanSeq),
                      "the other sequence's rows differ from a clean run");
        const std::vector<double> lse = sequence_lse(host, split.lse, kCleanSeq);
        const std::vector<double> clean_lse = sequence_lse(host, reference.lse, kCleanSeq);
        CHECK_MESSAGE(std::equal(lse.begin(), lse.end(), clean_lse.begin(), clean_lse.end()),
                      "the other sequence's LSE differs from a clean run");
    }
    return nan_elements;
}

}  // namespace

TEST_CASE("gpu split-KV: a NaN or inf in Q, K or V comes out where the unsplit launch has it, for every split kernel") {
    uint64_t seed = fresh_seed() * 1000 + 700;
    const std::vector<std::vector<std::string>> kernels = family_kernels();
    for (const int32_t q_len : kNonFiniteQLens) {
        FamilyInputs inputs(
            problem_spec({q_len, q_len}, {kNonFiniteContexts[0], kNonFiniteContexts[1]}, 32, 4, 16, ++seed), false);
        for_each_family(inputs, kernels, [&](size_t f, SplitProblem& clean) {
            CorruptedProblems bad = corrupted_problems(clean.host);
            for (const std::string& name : kernels[f]) {
                CAPTURE(name);
                const KernelRestriction only(name);
                DeviceBuffer workspace;
                // The clean problem's runs: the other sequence's yardstick for every corruption.
                std::vector<SplitRun> clean_runs;
                for (const int32_t splits : kNonFiniteSplitSettings) {
                    clean_runs.push_back(run_split(&clean, splits, &workspace));
                    REQUIRE_MESSAGE(clean_runs.back().error.empty(), clean_runs.back().error);
                }
                for (size_t c = 0; c < bad.problems.size(); ++c) {
                    CAPTURE(bad.cases[c]->label);
                    const int64_t nan_elements =
                        check_corruption(kFamilies[f], bad.problems[c].get(), clean_runs, &workspace);
                    // A corruption that never reaches the output would prove nothing.
                    CHECK_MESSAGE(nan_elements > 0, "the unsplit launch has no NaN: the corruption missed");
                    std::printf("  %-18s q_len %d %-10s %6lld NaN output elements, split %d/%d/auto agree\n",
                                name.c_str(), q_len, bad.cases[c]->label, static_cast<long long>(nan_elements),
                                kNonFiniteSplitSettings[0], kNonFiniteSplitSettings[1]);
                }
            }
        });
    }
}

// Programmatic dependent launch of the merge (dispatch/dependent_launch.h): a context opened with
// WIDEATTN_PDL=1 (on sm_90 and later the merge then starts before the split kernel has finished
// and waits for it with griddepcontrol.wait) and one opened with WIDEATTN_PDL=0 (the plain launch
// after it), in the same process, pinned to the same split kernel, must give the same bits: o and
// LSE, each run with the workspace and the outputs poisoned. Then two problems sharing one
// workspace run back to back on one stream without a synchronisation between them, several
// times: a merge reading partials before its split kernel wrote them, or a split kernel
// overwriting them while the previous merge reads, would show as a difference.
namespace {

constexpr int32_t kPdlSplitSettings[] = {2, 7, 33, kAutoSplits};
constexpr int kPdlBackToBackRounds = 4;
constexpr const char* kPdlOn = "1";
constexpr const char* kPdlOff = "0";

// A context on the bundle opened with WIDEATTN_PDL=`value`, pinned to `kernel`; closed with the object.
struct PdlContext {
    wideattn_context* ctx = nullptr;
    PdlContext(const char* value, const std::string& kernel) {
        const test::ScopedEnv env(kPdlEnv, value);
        REQUIRE_MESSAGE(wideattn_open(&ctx, nullptr) == WIDEATTN_OK, wideattn_last_error());
        REQUIRE_MESSAGE(wideattn_set_prefill_kernel(ctx, kernel.c_str()) == WIDEATTN_OK, wideattn_last_error());
    }
    ~PdlContext() { wideattn_close(ctx); }
    PdlContext(const PdlContext&) = delete;
    PdlContext& operator=(const PdlContext&) = delete;
};

// o's and lse's raw bytes of a problem.
struct RawOutputs {
    std::vector<unsigned char> o, lse;
    bool operator==(const RawOutputs& other) const { return o == other.o && lse == other.lse; }
};

RawOutputs download_outputs(const SplitProblem& p) {
    RawOutputs r;
    REQUIRE(p.device.download_raw(&r.o).empty());
    REQUIRE(download_raw_lse(p.device, &r.lse).empty());
    return r;
}

// One run of `p` on `ctx` on the default stream with the workspace and outputs poisoned first.
RawOutputs run_poisoned(SplitProblem* p, wideattn_context* ctx, DeviceBuffer* workspace) {
    if (workspace->get()) REQUIRE(workspace->fill(kPoisonByte).empty());
    const std::string err = p->device.run(*gpu().device, ctx);
    REQUIRE_MESSAGE(err.empty(), err);
    return download_outputs(*p);
}

// The split count `ctx` runs p's params with.
int32_t planned_splits(wideattn_context* ctx, const wideattn_prefill_params& params) {
    const GpuDevice& dev = *gpu().device;
    wideattn_launch_plan plan{};
    REQUIRE_MESSAGE(wideattn_plan_launch(ctx, &params, dev.cc_major(), dev.cc_minor(), dev.multiprocessors(), &plan) ==
                        WIDEATTN_OK,
                    wideattn_last_error());
    return plan.num_splits;
}

// Both problems (same shape, other inputs) with `splits` on one shared workspace, run on the
// context with PDL and on the one without: the same bits, alone and back to back on one stream.
void check_pdl_setting(SplitProblem* const (&problems)[2], const PdlContext& on, const PdlContext& off,
                       int32_t splits) {
    CAPTURE(splits);
    int64_t bytes = 0;
    for (SplitProblem* p : problems) {
        p->device.params.num_splits = splits;
        p->device.params.workspace = nullptr;
        p->device.params.workspace_bytes = 0;
    }
    if (splits == kAutoSplits)
        REQUIRE_MESSAGE(wideattn_workspace_size(on.ctx, &problems[0]->device.params, &bytes) == WIDEATTN_OK,
                        wideattn_last_error());
    else
        bytes = workspace_formula(problems[0]->host, splits);
    DeviceBuffer workspace;
    if (bytes > 0) REQUIRE(workspace.allocate(*gpu().device, static_cast<size_t>(bytes)).empty());
    for (SplitProblem* p : problems) {
        p->device.params.workspace = workspace.get();
        p->device.params.workspace_bytes = bytes;
    }
    const int32_t runs_with = planned_splits(on.ctx, problems[0]->device.params);
    REQUIRE(planned_splits(off.ctx, problems[0]->device.params) == runs_with);
    REQUIRE((runs_with > 1 || splits == kAutoSplits));
    if (runs_with == 1) {
        MESSAGE("the library runs this problem unsplit here: no merge to compare");
        return;
    }

    RawOutputs plain[2];
    for (int i = 0; i < 2; ++i) {
        CAPTURE(i);
        plain[i] = run_poisoned(problems[i], off.ctx, &workspace);
        CHECK_MESSAGE(run_poisoned(problems[i], on.ctx, &workspace) == plain[i],
                      "the programmatic merge launch differs from the plain one");
        CHECK_MESSAGE(run_poisoned(problems[i], off.ctx, &workspace) == plain[i], "the plain rerun differs");
    }
    CHECK_MESSAGE(!(plain[0] == plain[1]), "the two problems' outputs are the same: the back-to-back runs prove nothing");

    const wideattn::test::TestStream s;
    REQUIRE_MESSAGE(s.error.empty(), s.error);
    const Driver& drv = gpu().device->driver();
    for (const PdlContext* c : {&on, &off}) {
        CAPTURE(c == &on ? "WIDEATTN_PDL=1" : "WIDEATTN_PDL=0");
        REQUIRE(workspace.fill(kPoisonByte).empty());
        for (SplitProblem* p : problems) REQUIRE(p->device.poison_outputs().empty());
        for (int round = 0; round < kPdlBackToBackRounds; ++round)
            for (SplitProblem* p : problems)
                REQUIRE_MESSAGE(wideattn_prefill(c->ctx, &p->device.params, s.stream) == WIDEATTN_OK,
                                wideattn_last_error());
        REQUIRE(gpu().device->check(drv.cuStreamSynchronize(s.stream), "cuStreamSynchronize").empty());
        for (int i = 0; i < 2; ++i) CHECK_MESSAGE(download_outputs(*problems[i]) == plain[i], "problem " << i);
    }
}

}  // namespace

TEST_CASE("gpu split-KV: the merge as a programmatic dependent launch gives the bits of the plain launch") {
    const uint64_t seed = fresh_seed() * 1000 + 800;
    const std::vector<ProblemSpec> specs = {problem_spec({1}, {20000}, 32, 4, 16, seed),
                                            problem_spec({1, 3, 0, 8}, {4095, 100, 17, 20000}, 32, 4, 48, seed)};
    if (gpu().device->cc_major() < kPdlMinArchMajor)
        MESSAGE("sm_" << gpu().device->cc_major() << gpu().device->cc_minor()
                      << ": both contexts launch the merge plainly (no programmatic dependent launch before sm_90)");
    const std::vector<std::vector<std::string>> kernels = family_kernels();
    for (const ProblemSpec& base : specs) {
        // Two problems of the base shape with other inputs (seeds base + 1 and base + 2).
        const auto reseeded = [&](uint64_t offset) {
            ProblemSpec spec = base;
            spec.seed += offset;
            return spec;
        };
        FamilyInputs inputs[2] = {FamilyInputs(reseeded(1), false), FamilyInputs(reseeded(2), false)};
        for_each_family(inputs[0], kernels, [&](size_t f, SplitProblem& first) {
            SplitProblem second;
            const std::string err = inputs[1].make(kFamilies[f], &second);
            REQUIRE_MESSAGE(err.empty(), err);
            SplitProblem* const problems[2] = {&first, &second};
            for (const std::string& name : kernels[f]) {
                CAPTURE(name);
                const PdlContext on(kPdlOn, name), off(kPdlOff, name);
                for (const int32_t splits : kPdlSplitSettings) check_pdl_setting(problems, on, off, splits);
                std::printf("  %-18s %-64s PDL on and off: the same bits\n", name.c_str(),
                            first.host.spec.describe().c_str());
            }
        });
    }
}
