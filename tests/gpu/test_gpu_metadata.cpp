// test_gpu_metadata.cpp - corrupted device metadata on the GPU (docs/design.md section 2,
// "Metadata the kernels distrust"). Every prefill kernel of the bundle that runs here, pinned by name (those
// with a split entry also with num_splits forced to 2..7 and a workspace, so the merge kernel
// runs), is launched with non-monotonic or out-of-range cu_seqlens_q, block-table entries
// outside [0, num_blocks) and seq_lens_k below q_len, negative or beyond the table, outputs and
// workspace poisoned first. The stream must synchronise with success; the output must match the
// fp64 CPU reference of the sanitised equivalent (tests/gpu/metadata_model.h) on the rows the
// clamped metadata owns (zeros and LSE -inf on owned rows that see no key) within the kernel's
// usual bound; and a valid launch right after must match its reference (the context lives). The
// "sanitizer" case is the small set tools/gpu/gpu_suite.sh runs under compute-sanitizer memcheck.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <map>
#include <memory>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "dispatch/split_plan.h"
#include "kernels/common/kernel_desc.h"
#include "tests/gpu/gpu_fixture.h"
#include "tests/gpu/metadata_model.h"
#include "tools/harness/checks.h"

using namespace wideattn;
using namespace wideattn::test;

namespace {

constexpr int32_t kQHeads = 16;
constexpr int32_t kKvHeads = 2;  // group 8, what the fast kernels serve
constexpr int32_t kBlockSize = 16;
constexpr int32_t kUnsplit = 1;
constexpr int32_t kFirstForcedSplits = 2;
constexpr int32_t kLastForcedSplits = 7;
constexpr int32_t kSanitizerSplits = 7;  // the split count of the sanitizer case, beside unsplit
constexpr int kSanitizerShape = 0;

uint64_t fresh_seed() {
    static uint64_t seed = static_cast<uint64_t>(std::time(nullptr)) * 7;
    return ++seed;
}

// The shapes: q_len 1..70 in 3 and 4 sequences, up to 601 keys (tables of 38 and 37 pages).
std::vector<ProblemSpec> shape_specs() {
    static const uint64_t seed = fresh_seed() * 1000;
    return {problem_spec({40, 1, 14}, {0, 600, 200}, kQHeads, kKvHeads, kBlockSize, seed),
            problem_spec({1, 70, 7, 33}, {17, 300, 0, 550}, kQHeads, kKvHeads, kBlockSize, seed + 1)};
}

// A kernel's error bounds against the fp64 reference (those of its other GPU tests): e4m3 kernels
// round the scores, so their LSE is held to finiteness only (kE4m3RelL2).
struct Tolerance {
    double rel_l2;
    double lse_abs;
    bool check_lse_bound;
};

struct PrefillKernel {
    std::string name;
    int32_t q_dtype, kv_dtype, o_dtype;
    bool split;
    Tolerance tolerance;
    bool v_transposed;  // reads V only in the transposed layout
};

bool has_feature(const wideattn_kernel_info& k, const char* feature) {
    const std::string list = std::string(",") + (k.features ? k.features : "") + ",";
    return list.find(std::string(",") + feature + ",") != std::string::npos;
}

std::string kernel_name(int32_t index) {
    wideattn_kernel_info k{};
    if (wideattn_get_kernel_info(gpu().ctx, index, &k) != WIDEATTN_OK)
        return "(no kernel " + std::to_string(index) + ")";
    return k.name;
}

std::string kernel_kind(int32_t index) {
    wideattn_kernel_info k{};
    if (wideattn_get_kernel_info(gpu().ctx, index, &k) != WIDEATTN_OK) return "";
    return k.kind;
}

bool tolerance_of(const RunnableKernel& k, Tolerance* t) {
    const bool bf16_in = k.q_dtype == WIDEATTN_DTYPE_BF16 && k.kv_dtype == WIDEATTN_DTYPE_BF16;
    if (k.o_dtype == WIDEATTN_DTYPE_F64 && bf16_in) *t = {kFp64RelL2, kFp64LseAbs, true};
    else if (k.o_dtype == WIDEATTN_DTYPE_BF16 && bf16_in) *t = {kBf16RelL2, kFp32LseAbs, true};
    else if (k.o_dtype == WIDEATTN_DTYPE_BF16 && k.kv_dtype == WIDEATTN_DTYPE_E4M3 &&
             (k.q_dtype == WIDEATTN_DTYPE_BF16 || k.q_dtype == WIDEATTN_DTYPE_E4M3))
        *t = {kE4m3RelL2, 0.0, false};
    else
        return false;
    return true;
}

// The prefill kernels of the bundle that run on this GPU, in manifest order (reference_f64 too).
std::vector<PrefillKernel> prefill_kernels() {
    std::vector<PrefillKernel> kernels;
    for (const RunnableKernel& r : runnable_kernels(gpu().ctx, gpu().device->cc_major(), gpu().device->cc_minor())) {
        if (r.kind != kKindPrefill) continue;
        if (r.k_from_v_only) {
            std::printf("  %s: serves only K-from-V calls, not part of the K+V metadata cases\n", r.name.c_str());
            continue;
        }
        PrefillKernel k{r.name, r.q_dtype, r.kv_dtype, r.o_dtype, false, {}, r.v_transposed};
        if (!tolerance_of(r, &k.tolerance)) {
            FAIL_CHECK("no error bound known for " << r.name << " (q_dtype " << r.q_dtype << ", kv_dtype "
                                                   << r.kv_dtype << ", o_dtype " << r.o_dtype << ")");
            continue;
        }
        for (int32_t i = 0; i < wideattn_kernel_count(gpu().ctx); ++i) {
            wideattn_kernel_info info{};
            wideattn_get_kernel_info(gpu().ctx, i, &info);
            if (r.name == info.name && has_feature(info, kFeatureSplitKv)) k.split = true;
        }
        kernels.push_back(k);
    }
    REQUIRE_MESSAGE(!kernels.empty(), "no prefill kernel of the bundle runs on this GPU");
    return kernels;
}

// One shape with the inputs of one (q_dtype, kv_dtype) pair: the host problem, the expected
// outputs of its valid metadata and (on first use) of each corruption, and its device copies
// by output dtype and V layout (the kernels that read V transposed read the same values, so they
// share the expected outputs). Kept for the process: the subcases re-enter the test cases once each.
struct Inputs {
    HostProblem host;  // V in the engine layout
    Expected valid;
    std::map<std::string, Expected> corrupted;
    std::map<std::pair<int32_t, bool>, std::unique_ptr<DeviceProblem>> device;
};

Inputs& inputs(int shape, const PrefillKernel& k) {
    GpuDevice& dev = *gpu().device;  // the fixture first, so it outlives the cache below
    static std::map<std::tuple<int, int32_t, int32_t>, std::unique_ptr<Inputs>> cache;
    std::unique_ptr<Inputs>& slot = cache[{shape, k.q_dtype, k.kv_dtype}];
    if (!slot) {
        auto made = std::make_unique<Inputs>();
        ProblemSpec spec = shape_specs()[shape];
        spec.e4m3_kv = k.kv_dtype == WIDEATTN_DTYPE_E4M3;
        spec.e4m3_q = k.q_dtype == WIDEATTN_DTYPE_E4M3;
        std::string err = make_problem(spec, &made->host);
        if (err.empty()) err = expected_outputs(made->host, metadata_of(made->host), &made->valid);
        REQUIRE_MESSAGE(err.empty(), spec.describe() << ": " << err);
        slot = std::move(made);
    }
    std::unique_ptr<DeviceProblem>& d = slot->device[{k.o_dtype, k.v_transposed}];
    if (!d) {
        HostProblem transposed;
        if (k.v_transposed) {
            transposed = slot->host;
            const std::string err = transpose_v_codes(&transposed);
            REQUIRE_MESSAGE(err.empty(), err);
        }
        auto made = std::make_unique<DeviceProblem>();
        const std::string err = made->create(dev, k.v_transposed ? transposed : slot->host, k.o_dtype);
        REQUIRE_MESSAGE(err.empty(), err);
        d = std::move(made);
    }
    return *slot;
}

const Expected& expected_for(Inputs& in, const Corruption& c, const Metadata& m) {
    auto found = in.corrupted.find(c.name);
    if (found != in.corrupted.end()) return found->second;
    Expected e;
    const std::string err = expected_outputs(in.host, m, &e);
    REQUIRE_MESSAGE(err.empty(), err);
    return in.corrupted.emplace(c.name, std::move(e)).first->second;
}

// Corrupted metadata uploaded beside the problem's own.
struct DeviceMetadata {
    DeviceBuffer cu_seqlens_q, seq_lens_k, block_table;
    std::string upload(const Metadata& m) {
        const GpuDevice& dev = *gpu().device;
        struct Array {
            DeviceBuffer* buffer;
            const std::vector<int32_t>* values;
        } arrays[] = {{&cu_seqlens_q, &m.cu_seqlens_q}, {&seq_lens_k, &m.seq_lens_k}, {&block_table, &m.block_table}};
        for (const Array& a : arrays) {
            const size_t bytes = a.values->size() * sizeof(int32_t);
            std::string err = a.buffer->allocate(dev, bytes);
            if (err.empty()) err = a.buffer->upload(a.values->data(), bytes);
            if (!err.empty()) return err;
        }
        return {};
    }
    wideattn_prefill_params params(wideattn_prefill_params p) const {
        p.cu_seqlens_q = static_cast<const int32_t*>(cu_seqlens_q.get());
        p.seq_lens_k = static_cast<const int32_t*>(seq_lens_k.get());
        p.block_table = static_cast<const int32_t*>(block_table.get());
        return p;
    }
};

// One launch: o, lse and the workspace poisoned, wideattn_prefill on `stream`,
// cuStreamSynchronize, the output and LSE downloaded. `error` names the step that failed.
struct LaunchResult {
    std::string error;
    std::vector<double> out, lse;
};

LaunchResult launch(DeviceProblem* d, const HostProblem& h, const wideattn_prefill_params& params,
                    DeviceBuffer* workspace, CUstream stream) {
    LaunchResult r;
    const GpuDevice& dev = *gpu().device;
    if ((r.error = d->poison_outputs()).size()) return r;
    if (params.workspace && (r.error = workspace->fill(kPoisonByte)).size()) return r;
    const wideattn_status status = wideattn_prefill(gpu().ctx, &params, stream);
    if (status != WIDEATTN_OK) {
        r.error = std::string("wideattn_prefill: ") + wideattn_status_string(status) + ": " + wideattn_last_error();
        return r;
    }
    if ((r.error = dev.check(dev.driver().cuStreamSynchronize(stream), "cuStreamSynchronize after the launch")).size())
        return r;
    if ((r.error = d->download_output(h, &r.out)).empty()) r.error = d->download_lse(h, &r.lse);
    return r;
}

// The launch's output against `e` within the kernel's bounds; returns the relative L2 error.
double check_outputs(const HostProblem& h, const Expected& e, const LaunchResult& r, const Tolerance& t) {
    const Comparison c = compare_outputs(h, e, r.out, r.lse);
    INFO(accuracy::format_error_stats(c.stats));
    INFO("owned rows " << e.owned_rows << ", rows seeing no key " << e.no_key_rows);
    CHECK(c.stats.nonfinite == 0);
    CHECK(c.stats.rel_l2 <= t.rel_l2);
    CHECK(c.no_key_nonzero == 0);
    CHECK(c.no_key_lse_wrong == 0);
    CHECK(c.lse_nonfinite == 0);
    if (t.check_lse_bound) CHECK(c.lse_max_abs <= t.lse_abs);
    return c.stats.rel_l2;
}

// The plan of one setting: the pinned kernel, the forced split count and, when split, the merge.
void check_plan(const wideattn_prefill_params& params, const std::string& name, int32_t splits) {
    const GpuDevice& dev = *gpu().device;
    wideattn_launch_plan plan{};
    REQUIRE_MESSAGE(wideattn_plan_launch(gpu().ctx, &params, dev.cc_major(), dev.cc_minor(), dev.multiprocessors(),
                                         &plan) == WIDEATTN_OK,
                    wideattn_last_error());
    CHECK(kernel_name(plan.kernel_index) == name);
    CHECK(plan.num_splits == splits);
    if (splits > kUnsplit) CHECK(kernel_kind(plan.merge_kernel_index) == kKindMergeSplits);
}

// The worst relative L2 errors of one kernel on one corruption: corrupted launches, valid ones after.
struct Worst {
    double corrupted = 0.0, valid = 0.0;
};

// One split setting: the corrupted launch, then the valid one on the same context.
void check_setting(Inputs& in, const PrefillKernel& k, const Expected& expected, const DeviceMetadata& bad,
                   int32_t splits, CUstream stream, Worst* worst) {
    CAPTURE(splits);
    DeviceProblem& d = *in.device.at({k.o_dtype, k.v_transposed});
    wideattn_prefill_params valid = d.params;
    valid.num_splits = splits;
    DeviceBuffer workspace;
    if (splits > kUnsplit) {
        const int64_t bytes = workspace_layout(valid, splits).bytes;
        REQUIRE(workspace.allocate(*gpu().device, static_cast<size_t>(bytes)).empty());
        valid.workspace = workspace.get();
        valid.workspace_bytes = bytes;
    }
    check_plan(valid, k.name, splits);
    const LaunchResult corrupted = launch(&d, in.host, bad.params(valid), &workspace, stream);
    REQUIRE_MESSAGE(corrupted.error.empty(), "corrupted launch: " << corrupted.error);
    {
        INFO("corrupted launch");
        worst->corrupted = std::fmax(worst->corrupted, check_outputs(in.host, expected, corrupted, k.tolerance));
    }
    const LaunchResult after = launch(&d, in.host, valid, &workspace, stream);
    REQUIRE_MESSAGE(after.error.empty(), "valid launch after the corrupted one: " << after.error);
    INFO("valid launch after the corrupted one");
    worst->valid = std::fmax(worst->valid, check_outputs(in.host, in.valid, after, k.tolerance));
}

// The split settings of a kernel: unsplit, then (with a split entry) the forced counts.
std::vector<int32_t> split_settings(const PrefillKernel& k, bool sanitizer) {
    std::vector<int32_t> settings{kUnsplit};
    if (!k.split) return settings;
    if (sanitizer) {
        settings.push_back(kSanitizerSplits);
        return settings;
    }
    for (int32_t s = kFirstForcedSplits; s <= kLastForcedSplits; ++s) settings.push_back(s);
    return settings;
}

// One corruption on one shape for every prefill kernel; one line of output per kernel.
void check_corruption(const Corruption& c, int shape, bool sanitizer) {
    TestStream stream;
    REQUIRE_MESSAGE(stream.error.empty(), stream.error);
    for (const PrefillKernel& k : prefill_kernels()) {
        CAPTURE(k.name);
        Inputs& in = inputs(shape, k);
        CAPTURE(in.host.spec.describe());
        CAPTURE(in.host.spec.seed);
        CAPTURE(k.v_transposed);
        REQUIRE(in.host.spec.q_lens.size() >= static_cast<size_t>(kMinCorruptionSeqs));
        Metadata m = metadata_of(in.host);
        c.apply(in.host, &m);
        const Expected& expected = expected_for(in, c, m);
        DeviceMetadata bad;
        const std::string err = bad.upload(m);
        REQUIRE_MESSAGE(err.empty(), err);
        const KernelRestriction only(k.name);
        Worst worst;
        const std::vector<int32_t> settings = split_settings(k, sanitizer);
        std::string listed;
        for (const int32_t splits : settings) {
            check_setting(in, k, expected, bad, splits, stream.stream, &worst);
            listed += (listed.empty() ? "" : ",") + std::to_string(splits);
        }
        std::printf("  %-18s shape %d, splits %-14s %3lld owned, %3lld no-key rows: rel L2 %.3e, valid after %.3e\n",
                    k.name.c_str(), shape, listed.c_str(), static_cast<long long>(expected.owned_rows),
                    static_cast<long long>(expected.no_key_rows), worst.corrupted, worst.valid);
    }
}

// Each corruption of the list as its own subcase, on every shape.
void check_corruptions(const std::vector<Corruption>& list) {
    for (const Corruption& c : list) {
        SUBCASE(c.name) {
            std::printf("%s\n", c.name);
            for (int shape = 0; shape < static_cast<int>(shape_specs().size()); ++shape)
                check_corruption(c, shape, false);
        }
    }
}

}  // namespace

TEST_CASE("gpu metadata: cu_seqlens_q non-monotonic, below 0, past total_q, last entry off total_q") {
    check_corruptions(corruptions(CorruptionClass::kCuSeqlensQ));
}

TEST_CASE("gpu metadata: block_table entries -1, INT32_MIN, num_blocks, 2^30, INT32_MAX in the used prefix") {
    check_corruptions(corruptions(CorruptionClass::kBlockTable));
}

TEST_CASE("gpu metadata: seq_lens_k below q_len, negative, beyond the table") {
    check_corruptions(corruptions(CorruptionClass::kSeqLensK));
}

TEST_CASE("gpu metadata sanitizer: every kernel and split entry, one corruption of each class, one shape") {
    // Small for compute-sanitizer memcheck (tools/gpu/gpu_suite.sh): unsplit and 7 splits.
    for (const Corruption& c : sanitizer_corruptions()) {
        SUBCASE(c.name) {
            std::printf("%s\n", c.name);
            check_corruption(c, kSanitizerShape, true);
        }
    }
}
