// test_gpu_k_from_v.cpp - K rebuilt from V (WIDEATTN_FLAG_K_FROM_V) on the GPU: the fp64 reference
// kernel in that mode against the CPU reference (accuracy/reference_cpu.cpp) on varlen, paged,
// shuffled shapes up to a few thousand keys and one sequence whose keys reach position 131071,
// and against its own K+V call on keys rebuilt from V on the host (tools/harness/problem.h,
// rebuild_k_from_v): the same kernel on the same keys except where the host's and the device's fp32
// cos / sin round to different bf16 values (glibc's cosf and CUDA's may differ in the last fp32
// bit). Such a key element is rare, but it moves the score of its key for every query row of the
// sequence, so most outputs of that sequence differ slightly (measured on an H200, 2026-12-02: up
// to 98% of the outputs, max abs 7.9e-4, rel L2 1e-5 at 3000 keys): the check is on the size of
// the difference, not on how many outputs differ. A caller's inv_freq table (device for the kernel,
// the same values on the host for the references) is checked the same way.
// A cos / sin table (wideattn_k_from_v.cos_sin): the fp64 kernel with one of another theta over
// part of the keys and over all of them against the CPU reference with the same table (over all:
// the same keys, so the fp64 bound and its own K+V call bit for bit).
// The kernels that serve only K-from-V calls (decode_e4m3kfv_d512 and decode_bf16kfv_d512:
// single-token decode over an e4m3 or a BF16 V-only cache) run against the fp64 kernel in the same
// mode on the (exactly dequantised) V of their dtype:
// batches of key counts no multiple of 16 on shuffled pages, keys up to position 131071, every dim
// rotated or Gemma 4's 128, Gemma-like inputs, k_norm weights in fp32 and bf16 values, a caller's
// inv_freq table, a cos / sin table of another theta over part of the keys, and block-table entries
// and key counts outside what the tensors hold (both kernels read such pages as zeros); and with
// wideattn_k_from_v_cos_sin's table over every key they give the bits of the same call without one.
#include <doctest/doctest.h>

#include <algorithm>
#include <utility>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "accuracy/error_stats.h"
#include "accuracy/reference_cpu.h"
#include "kernels/common/kernel_desc.h"
#include "tests/gpu/gpu_fixture.h"
#include "tools/harness/checks.h"

using namespace wideattn;
using wideattn::test::gpu;

namespace {

constexpr uint64_t kSeed = 20261202;
// The two GPU runs differ only where a key's bf16 cos / sin differ between host and device: by
// at most kRebuiltMaxAbs in any output and kRebuiltRelL2 over all of them.
constexpr double kRebuiltRelL2 = 1e-4;
constexpr double kRebuiltMaxAbs = 2e-3;

// Runs `p` on the problem's device buffers (poisoned outputs first) and downloads o densely.
std::string run_params(DeviceProblem* dp, const HostProblem& h, const wideattn_prefill_params& p,
                       std::vector<double>* out) {
    const wideattn_prefill_params kept = dp->params;
    dp->params = p;
    std::string err = dp->run(*gpu().device, gpu().ctx);
    dp->params = kept;
    if (err.empty()) err = dp->download_output(h, out);
    return err;
}

// `inv_freq`: the caller's frequency table (host values, uploaded for the kernel; the CPU reference
// and the host rebuild read the same values), or empty for the NULL path (from rope_theta).
// `cos_sin`: a cos / sin table (k_from_v_cos_sin_table's entries for Gemma 4's 128 rotated dims; the
// same host values for the references), or empty for none. Where it holds every key no cos / sin is
// evaluated, so host and device rebuild the same keys: the fp64 kernel then matches the CPU
// reference to the fp64 kernels' bound and its own K+V call bit for bit.
void check_k_from_v_case(const ProblemSpec& spec, bool with_cpu_reference, const std::vector<float>& inv_freq = {},
                         const std::vector<uint32_t>& cos_sin = {}) {
    CAPTURE(spec.describe());
    CAPTURE(inv_freq.size());
    CAPTURE(cos_sin.size());
    HostProblem h;
    REQUIRE(make_problem(spec, &h).empty());
    const std::vector<float> w = random_k_norm_weights(spec.head_dim, spec.seed + 1);
    DeviceProblem dp;
    REQUIRE_MESSAGE(dp.create(*gpu().device, h, WIDEATTN_DTYPE_F64).empty(), "upload");
    DeviceBuffer scale;
    REQUIRE(scale.allocate(*gpu().device, w.size() * sizeof(float)).empty());
    REQUIRE(scale.upload(w.data(), w.size() * sizeof(float)).empty());
    wideattn_k_from_v device_kfv = gemma4_k_from_v(static_cast<const float*>(scale.get()));
    wideattn_k_from_v host_kfv = gemma4_k_from_v(w.data());
    DeviceBuffer table;
    if (!inv_freq.empty()) {
        REQUIRE(table.allocate(*gpu().device, inv_freq.size() * sizeof(float)).empty());
        REQUIRE(table.upload(inv_freq.data(), inv_freq.size() * sizeof(float)).empty());
        device_kfv.inv_freq = static_cast<const float*>(table.get());
        host_kfv.inv_freq = inv_freq.data();
    }
    DeviceBuffer cos_sin_table;
    bool table_holds_every_key = false;
    if (!cos_sin.empty()) {
        REQUIRE(attach_host_cos_sin(cos_sin, &host_kfv).empty());
        REQUIRE(attach_device_cos_sin(*gpu().device, cos_sin, &cos_sin_table, &device_kfv).empty());
        const int32_t longest = *std::max_element(h.seq_lens_k.begin(), h.seq_lens_k.end());
        table_holds_every_key = longest <= host_kfv.cos_sin_positions;
    }

    wideattn_prefill_params from_v = dp.params;
    from_v.k_cache = nullptr;
    from_v.flags |= WIDEATTN_FLAG_K_FROM_V;
    from_v.k_from_v = &device_kfv;
    std::vector<double> got;
    REQUIRE_MESSAGE(run_params(&dp, h, from_v, &got).empty(), "K-from-V launch");
    const int64_t n = static_cast<int64_t>(got.size());

    if (with_cpu_reference) {
        std::vector<double> want(static_cast<size_t>(h.out_elements()), NAN);
        std::vector<double> want_lse(static_cast<size_t>(h.lse_elements()), NAN);
        wideattn_prefill_params host = h.params(h.q.data(), nullptr, h.v.data(), want.data(), want_lse.data(),
                                                h.cu_seqlens_q.data(), h.seq_lens_k.data(), h.block_table.data(),
                                                WIDEATTN_DTYPE_F64);
        host.flags = WIDEATTN_FLAG_K_FROM_V;
        host.k_from_v = &host_kfv;
        REQUIRE(accuracy::reference_attention_cpu(host, want.data(), want_lse.data()).empty());
        const std::vector<double> dense_want = dense_rows(h, want);
        const accuracy::ErrorStats stats =
            accuracy::compute_error_stats(dense_want.data(), got.data(), accuracy::OutputType::kF64, n);
        std::printf("  k_from_v vs CPU  %-60s %s\n", spec.describe().c_str(), accuracy::format_error_stats(stats).c_str());
        INFO(accuracy::format_error_stats(stats));
        CHECK(stats.nonfinite == 0);
        // The keys match where host and device round cos / sin alike; elsewhere a key element
        // moves by one bf16 ulp, far inside the bf16 kernels' bound.
        CHECK(stats.rel_l2 <= kBf16RelL2 * 1e-2);
        if (table_holds_every_key) CHECK(stats.rel_l2 <= kFp64RelL2);
    }

    // The K+V call on keys rebuilt on the host.
    rebuild_k_from_v(host_kfv, &h);
    REQUIRE(dp.k.upload(h.k.data(), h.k.size() * sizeof(uint16_t)).empty());
    std::vector<double> with_k;
    REQUIRE_MESSAGE(run_params(&dp, h, dp.params, &with_k).empty(), "K+V launch");
    const accuracy::ErrorStats rebuilt =
        accuracy::compute_error_stats(with_k.data(), got.data(), accuracy::OutputType::kF64, n);
    int64_t differing = 0;
    for (int64_t i = 0; i < n; ++i) differing += std::memcmp(&got[i], &with_k[i], sizeof(double)) != 0;
    std::printf("  k_from_v vs K+V  %-60s %lld of %lld outputs differ, %s\n", spec.describe().c_str(),
                static_cast<long long>(differing), static_cast<long long>(n),
                accuracy::format_error_stats(rebuilt).c_str());
    INFO(accuracy::format_error_stats(rebuilt));
    CHECK(rebuilt.nonfinite == 0);
    CHECK(rebuilt.rel_l2 <= kRebuiltRelL2);
    // kRebuiltMaxAbs is the largest single-output move measured for the table-less shapes here;
    // with a partial table of another theta (kSeed + 30) one host / device cos / sin flip in the
    // formula's keys moved an output by 4.6e-3 on the H200 (2026-12-04): a one-ulp key change
    // moves a peaked row's output by up to ulp(K) |q| |v|, so such cases are held to rel_l2.
    if (cos_sin.empty()) CHECK(rebuilt.max_abs <= kRebuiltMaxAbs);
    if (table_holds_every_key) CHECK(differing == 0);
}

// A cos / sin table of `positions` rows for Gemma 4's description with rope_theta `theta` (a
// deliberately different theta gives keys far from the description's own).
std::vector<uint32_t> gemma4_cos_sin_table(float theta, int32_t positions) {
    wideattn_k_from_v kfv = gemma4_k_from_v(nullptr);
    kfv.rope_theta = theta;
    std::vector<uint32_t> table;
    REQUIRE(k_from_v_cos_sin_table(kfv, ProblemSpec{}.head_dim, positions, &table).empty());
    return table;
}

// A theta far from Gemma 4's 1e6, for tables whose keys must differ from the description's.
constexpr float kOtherTheta = 1.0e4f;

}  // namespace

TEST_CASE("gpu fp64 kernel, K from V: matches the CPU reference and its own K+V call, varlen paged shapes") {
    check_k_from_v_case(problem_spec({65}, {0}, 8, 1, 16, kSeed), true);
    check_k_from_v_case(problem_spec({1, 7, 0, 63, 64}, {0, 777, 5, 1, 33}, 16, 2, 32, kSeed + 1), true);
    check_k_from_v_case(problem_spec({129, 3}, {3000, 1500}, 32, 4, 64, kSeed + 2), true);
    ProblemSpec padded = problem_spec({33, 17}, {16, 2000}, 12, 3, 16, kSeed + 3);  // group 4, padded rows
    padded.q_token_pad = 16;
    check_k_from_v_case(padded, true);
}

TEST_CASE("gpu fp64 kernel, K from V: keys up to position 131071 (one long sequence) and a decode batch") {
    check_k_from_v_case(problem_spec({2}, {131070}, 8, 1, 64, kSeed + 4), true);
    check_k_from_v_case(problem_spec({1, 1, 1, 1}, {100000, 4095, 70000, 16}, 32, 4, 16, kSeed + 5), false);
}

TEST_CASE("gpu fp64 kernel, K from V: the caller's inv_freq table (one entry one fp32 ulp off the formula's)") {
    constexpr size_t kPerturbed = 1;
    std::vector<float> table = formula_inv_freq(gemma4_k_from_v(nullptr), ProblemSpec{}.head_dim);
    REQUIRE(table.size() > kPerturbed);
    table[kPerturbed] = std::nextafter(table[kPerturbed], 1.0f);
    check_k_from_v_case(problem_spec({2}, {131000}, 8, 1, 64, kSeed + 6), true, table);
    check_k_from_v_case(problem_spec({1, 7, 0, 63, 64}, {0, 777, 5, 1, 33}, 16, 2, 32, kSeed + 7), true, table);
}

TEST_CASE("gpu fp64 kernel, K from V: a cos / sin table of another theta over part of the keys, and over all") {
    // 1001 and 37 rows (no multiple of 16: a page boundary inside the table), keys up to 3000 and
    // 131070 past them; then tables of every key, where the kernel evaluates no cos / sin.
    const ProblemSpec varlen = problem_spec({129, 3, 1}, {3000, 1500, 40}, 32, 4, 64, kSeed + 30);
    check_k_from_v_case(varlen, true, {}, gemma4_cos_sin_table(kOtherTheta, 1001));
    const ProblemSpec long_sequence = problem_spec({2}, {131070}, 8, 1, 64, kSeed + 31);
    check_k_from_v_case(long_sequence, true, {}, gemma4_cos_sin_table(kOtherTheta, 37));
    check_k_from_v_case(varlen, true, {}, gemma4_cos_sin_table(kOtherTheta, 3129));
    check_k_from_v_case(long_sequence, true, {}, gemma4_cos_sin_table(kGemma4GlobalRopeTheta, 131072));
}

namespace {

constexpr int32_t kEveryDim = 512;  // rotary_dims of a description that rotates every dim

// The kernels of the bundle that serve only K-from-V calls and run on this GPU.
std::vector<RunnableKernel> k_from_v_only_kernels() {
    std::vector<RunnableKernel> kernels;
    for (const RunnableKernel& r : runnable_kernels(gpu().ctx, gpu().device->cc_major(), gpu().device->cc_minor()))
        if (r.kind == kKindPrefill && r.k_from_v_only) kernels.push_back(r);
    return kernels;
}

// One K-from-V decode problem through `kernel` (pinned when `pinned`, else selected; the
// problem's V of its K/V dtype): the kernel ran, outputs finite and bit-identical across two runs,
// within k_from_v_decode_rel_l2 of the fp64 kernel in the same mode.
void check_k_from_v_decode(const RunnableKernel& kernel, const HostProblem& h, int32_t rotary_dims, bool pinned,
                           const std::vector<float>& inv_freq = {}, KNormWeights weights = KNormWeights::kFp32) {
    const std::string& name = kernel.name;
    const bool bf16_weights = weights == KNormWeights::kBf16;
    CAPTURE(name);
    CAPTURE(h.spec.describe());
    CAPTURE(rotary_dims);
    CAPTURE(bf16_weights);
    if (pinned) REQUIRE(wideattn_set_prefill_kernel(gpu().ctx, name.c_str()) == WIDEATTN_OK);
    const CaseResult r =
        run_k_from_v_problem(*gpu().device, gpu().ctx, h, WIDEATTN_DTYPE_BF16, rotary_dims, inv_freq, weights);
    wideattn_set_prefill_kernel(gpu().ctx, nullptr);
    REQUIRE_MESSAGE(r.error.empty(), r.error);
    std::printf("  %-20s %-64s rotary %3d%s%s %s\n", r.kernel.c_str(), h.spec.describe().c_str(), rotary_dims,
                inv_freq.empty() ? "" : " table", bf16_weights ? " bf16 w" : "",
                accuracy::format_error_stats(r.stats).c_str());
    INFO(accuracy::format_error_stats(r.stats));
    CHECK(r.kernel == name);
    CHECK(r.stats.nonfinite == 0);
    CHECK(r.lse_nonfinite == 0);
    CHECK(r.deterministic);
    CHECK(r.stats.rel_l2 <= k_from_v_decode_rel_l2(kernel.kv_dtype));
}

// check_k_from_v_decode of a spec (its K/V dtype set here to the kernel's).
void check_k_from_v_decode_spec(const RunnableKernel& kernel, ProblemSpec spec, int32_t rotary_dims, bool pinned,
                                KNormWeights weights = KNormWeights::kFp32) {
    spec.e4m3_kv = kernel.kv_dtype == WIDEATTN_DTYPE_E4M3;
    HostProblem h;
    REQUIRE(make_problem(spec, &h).empty());
    check_k_from_v_decode(kernel, h, rotary_dims, pinned, {}, weights);
}

// The raw bf16 output of one K-from-V call of `h` through `kernel` (pinned; the problem's V of its
// dtype) with Gemma 4's description of `rotary_dims`, the k_norm weights of run_k_from_v_problem
// (`weights`), the frequency table `inv_freq` (host values, uploaded) when not empty and the cos /
// sin table `cos_sin` (uploaded, `cos_sin_word_offset` 4-byte words into its allocation) when not
// empty.
std::vector<unsigned char> k_from_v_raw_output(const RunnableKernel& kernel, const HostProblem& h, int32_t rotary_dims,
                                               KNormWeights weights, const std::vector<float>& inv_freq,
                                               const std::vector<uint32_t>& cos_sin, int32_t cos_sin_word_offset = 0) {
    const std::vector<float> w = random_k_norm_weights(h.spec.head_dim, h.spec.seed + 1, weights);
    DeviceProblem dp;
    REQUIRE(dp.create(*gpu().device, h, WIDEATTN_DTYPE_BF16).empty());
    DeviceBuffer scale, frequencies, table;
    REQUIRE(scale.allocate(*gpu().device, w.size() * sizeof(float)).empty());
    REQUIRE(scale.upload(w.data(), w.size() * sizeof(float)).empty());
    wideattn_k_from_v kfv = k_from_v_check_description(static_cast<const float*>(scale.get()), rotary_dims);
    if (!inv_freq.empty()) {
        REQUIRE(frequencies.allocate(*gpu().device, inv_freq.size() * sizeof(float)).empty());
        REQUIRE(frequencies.upload(inv_freq.data(), inv_freq.size() * sizeof(float)).empty());
        kfv.inv_freq = static_cast<const float*>(frequencies.get());
    }
    if (!cos_sin.empty())
        REQUIRE(attach_device_cos_sin(*gpu().device, cos_sin, &table, &kfv, cos_sin_word_offset).empty());
    dp.params.k_cache = nullptr;
    dp.params.k_scale = nullptr;
    dp.params.flags |= WIDEATTN_FLAG_K_FROM_V;
    dp.params.k_from_v = &kfv;
    const test::KernelRestriction pinned(kernel.name);
    int32_t index = -1;
    REQUIRE_MESSAGE(wideattn_is_supported(gpu().ctx, &dp.params, gpu().device->cc_major(), gpu().device->cc_minor(),
                                          &index) == WIDEATTN_OK,
                    wideattn_last_error());
    wideattn_kernel_info info{};
    REQUIRE(wideattn_get_kernel_info(gpu().ctx, index, &info) == WIDEATTN_OK);
    CHECK(kernel.name == info.name);
    const std::string err = dp.run(*gpu().device, gpu().ctx);
    REQUIRE_MESSAGE(err.empty(), err);
    std::vector<unsigned char> raw;
    REQUIRE(dp.download_raw(&raw).empty());
    return raw;
}

// `kernel` on the problem of `spec` (its K/V dtype set here to the kernel's) with the cos / sin
// table wideattn_k_from_v_cos_sin fills for every key (from the same inv_freq or theta): the same
// output bits as without a table.
void check_cos_sin_table_changes_nothing(const RunnableKernel& kernel, ProblemSpec spec, int32_t rotary_dims,
                                         KNormWeights weights, const std::vector<float>& inv_freq = {}) {
    spec.e4m3_kv = kernel.kv_dtype == WIDEATTN_DTYPE_E4M3;
    CAPTURE(kernel.name);
    CAPTURE(spec.describe());
    CAPTURE(rotary_dims);
    CAPTURE(inv_freq.size());
    HostProblem h;
    REQUIRE(make_problem(spec, &h).empty());
    wideattn_k_from_v host_kfv = k_from_v_check_description(nullptr, rotary_dims);
    if (!inv_freq.empty()) host_kfv.inv_freq = inv_freq.data();
    const int32_t positions = *std::max_element(h.seq_lens_k.begin(), h.seq_lens_k.end());
    std::vector<uint32_t> table;
    REQUIRE(k_from_v_cos_sin_table(host_kfv, spec.head_dim, positions, &table).empty());
    const std::vector<unsigned char> without = k_from_v_raw_output(kernel, h, rotary_dims, weights, inv_freq, {});
    const std::vector<unsigned char> with = k_from_v_raw_output(kernel, h, rotary_dims, weights, inv_freq, table);
    std::printf("  %-20s %-64s rotary %3d%s, a table of %d positions: %s\n", kernel.name.c_str(),
                spec.describe().c_str(), rotary_dims, inv_freq.empty() ? "" : " inv_freq", positions,
                with == without ? "bit-identical" : "DIFFERENT");
    CHECK(with == without);
}

}  // namespace

TEST_CASE("gpu K-from-V decode kernels: wideattn_k_from_v_cos_sin's table over every key changes no output bit") {
    const std::vector<RunnableKernel> kernels = k_from_v_only_kernels();
    if (kernels.empty()) {
        MESSAGE("no kernel of the bundle that serves only K-from-V calls runs on this GPU");
        return;
    }
    std::vector<float> perturbed = formula_inv_freq(gemma4_k_from_v(nullptr), ProblemSpec{}.head_dim);
    perturbed[1] = std::nextafter(perturbed[1], 1.0f);
    for (const RunnableKernel& kernel : kernels) {
        const ProblemSpec batch = problem_spec({1, 1, 1, 1, 1}, {777, 36, 4109, 0, 1000}, 32, 4, 16, kSeed + 32);
        check_cos_sin_table_changes_nothing(kernel, batch, kGemma4GlobalRotaryDims, KNormWeights::kBf16);
        check_cos_sin_table_changes_nothing(kernel, batch, kGemma4GlobalRotaryDims, KNormWeights::kFp32);
        check_cos_sin_table_changes_nothing(kernel, problem_spec({1, 1}, {1000, 5000}, 32, 4, 32, kSeed + 33),
                                            kEveryDim, KNormWeights::kBf16);
        check_cos_sin_table_changes_nothing(kernel, problem_spec({1, 1}, {131000, 4000}, 32, 4, 64, kSeed + 34),
                                            kGemma4GlobalRotaryDims, KNormWeights::kBf16);
        check_cos_sin_table_changes_nothing(kernel, problem_spec({1, 1}, {131000, 4000}, 32, 4, 64, kSeed + 35),
                                            kGemma4GlobalRotaryDims, KNormWeights::kBf16, perturbed);
    }
}

TEST_CASE("gpu K-from-V decode kernels: a cos / sin table of another theta over part of the keys, against fp64") {
    // Tables of 2021 and 70001 rows (no multiple of 16: the rows end inside a 16-key sub-tile), whole
    // sequences inside them and sequences past them, and one of 1 row; the fp64 kernel reads the
    // same device table.
    const std::vector<RunnableKernel> kernels = k_from_v_only_kernels();
    if (kernels.empty()) {
        MESSAGE("no kernel of the bundle that serves only K-from-V calls runs on this GPU");
        return;
    }
    struct PartialTable {
        ProblemSpec spec;
        int32_t rows;
    };
    const PartialTable cases[] = {
        {problem_spec({1, 1, 1, 1, 1}, {777, 36, 4109, 0, 1000}, 32, 4, 16, kSeed + 36), 2021},
        {problem_spec({1, 1}, {131000, 60000}, 32, 4, 64, kSeed + 37), 70001},
        {problem_spec({1, 1, 1}, {300, 0, 17}, 32, 4, 16, kSeed + 38), 1},
    };
    for (const RunnableKernel& kernel : kernels)
        for (const PartialTable& c : cases)
            for (const KNormWeights weights : {KNormWeights::kBf16, KNormWeights::kFp32}) {
                ProblemSpec spec = c.spec;
                spec.e4m3_kv = kernel.kv_dtype == WIDEATTN_DTYPE_E4M3;
                HostProblem h;
                REQUIRE(make_problem(spec, &h).empty());
                CAPTURE(kernel.name);
                CAPTURE(spec.describe());
                CAPTURE(c.rows);
                const test::KernelRestriction pinned(kernel.name);
                const CaseResult r = run_k_from_v_problem(*gpu().device, gpu().ctx, h, WIDEATTN_DTYPE_BF16,
                                                          kGemma4GlobalRotaryDims, {}, weights,
                                                          gemma4_cos_sin_table(kOtherTheta, c.rows));
                REQUIRE_MESSAGE(r.error.empty(), r.error);
                std::printf("  %-20s %-64s a table of %d rows (theta %g)%s %s\n", r.kernel.c_str(),
                            spec.describe().c_str(), c.rows, static_cast<double>(kOtherTheta),
                            weights == KNormWeights::kBf16 ? " bf16 w" : "",
                            accuracy::format_error_stats(r.stats).c_str());
                INFO(accuracy::format_error_stats(r.stats));
                CHECK(r.kernel == kernel.name);
                CHECK(r.stats.nonfinite == 0);
                CHECK(r.lse_nonfinite == 0);
                CHECK(r.deterministic);
                CHECK(r.stats.rel_l2 <= k_from_v_decode_rel_l2(kernel.kv_dtype));
            }
}

TEST_CASE("gpu K-from-V decode kernels: V-only single-token decode against the fp64 kernel in that mode") {
    const std::vector<RunnableKernel> kernels = k_from_v_only_kernels();
    if (kernels.empty()) {
        MESSAGE("no kernel of the bundle that serves only K-from-V calls runs on this GPU");
        return;
    }
    std::vector<int32_t> many_lens(48, 1), many_contexts;
    for (int32_t i = 0; i < 48; ++i) many_contexts.push_back(100 + 37 * i);
    for (const RunnableKernel& kernel : kernels) {
        // Unpinned, a K-from-V decode call over a V-only cache of this kernel's dtype goes to a
        // kernel of the list of that dtype (decode_e4m3kfvb_d512 or decode_bf16kfv_d512 in this
        // bundle; nothing else of their dtypes but the fp64 kernel rebuilds K).
        ProblemSpec spec = problem_spec({1, 1, 1, 1, 1}, {777, 36, 4109, 0, 1000}, 32, 4, 16, kSeed + 10);
        spec.e4m3_kv = kernel.kv_dtype == WIDEATTN_DTYPE_E4M3;
        HostProblem h;
        REQUIRE(make_problem(spec, &h).empty());
        const CaseResult r = run_k_from_v_problem(*gpu().device, gpu().ctx, h, WIDEATTN_DTYPE_BF16,
                                                  kGemma4GlobalRotaryDims, {});
        REQUIRE_MESSAGE(r.error.empty(), r.error);
        CAPTURE(kernel.name);
        const auto same_dtype = [&](const RunnableKernel& k) {
            return k.name == r.kernel && k.kv_dtype == kernel.kv_dtype;
        };
        CHECK_MESSAGE(std::any_of(kernels.begin(), kernels.end(), same_dtype), r.kernel);
        CHECK(r.stats.rel_l2 <= k_from_v_decode_rel_l2(kernel.kv_dtype));
    }
    for (const RunnableKernel& name : kernels) {
        check_k_from_v_decode_spec(name, problem_spec({1, 1, 1, 1, 1}, {777, 36, 4109, 0, 1000}, 32, 4, 16, kSeed + 10),
                                   kGemma4GlobalRotaryDims, true);
        check_k_from_v_decode_spec(name, problem_spec({1, 1}, {1000, 5000}, 32, 4, 32, kSeed + 11), kEveryDim, true);
        check_k_from_v_decode_spec(name, problem_spec({1}, {131070}, 32, 4, 64, kSeed + 12), kEveryDim, true);
        check_k_from_v_decode_spec(name, problem_spec({1}, {131070}, 32, 4, 64, kSeed + 13), kGemma4GlobalRotaryDims,
                                   true);
        check_k_from_v_decode_spec(name, problem_spec(many_lens, many_contexts, 32, 4, 16, kSeed + 14),
                                   kGemma4GlobalRotaryDims, true);
        check_k_from_v_decode_spec(name, problem_spec({1, 1, 1}, {257, 20000, 3}, 8, 1, 128, kSeed + 15), kEveryDim,
                                   true);  // one KV head (tensor parallel), pages of 128
        ProblemSpec gemma = problem_spec({1, 1, 1}, {3700, 300, 20000}, 32, 4, 16, kSeed + 16);
        gemma.gemma.q_rms = 0.5f;
        gemma.gemma.v_offset_rms = 8.0f;
        check_k_from_v_decode_spec(name, gemma, kGemma4GlobalRotaryDims, true);
        ProblemSpec gemma_peaked = problem_spec({1, 1}, {5000, 70000}, 32, 4, 32, kSeed + 17);
        gemma_peaked.gemma.q_rms = 1.0f;
        check_k_from_v_decode_spec(name, gemma_peaked, kGemma4GlobalRotaryDims, true);
        // k_norm weights that are all bf16 values, as Gemma 4's checkpoint holds them (the BF16
        // kernel scales by bf16 products then; the fp32 weights above take its general path).
        const KNormWeights bf16 = KNormWeights::kBf16;
        check_k_from_v_decode_spec(name, problem_spec({1, 1, 1, 1, 1}, {777, 36, 4109, 0, 1000}, 32, 4, 16, kSeed + 18),
                                   kGemma4GlobalRotaryDims, true, bf16);
        check_k_from_v_decode_spec(name, problem_spec({1}, {131070}, 32, 4, 64, kSeed + 19), kEveryDim, true, bf16);
        check_k_from_v_decode_spec(name, problem_spec(many_lens, many_contexts, 32, 4, 16, kSeed + 22),
                                   kGemma4GlobalRotaryDims, true, bf16);
        check_k_from_v_decode_spec(name, gemma, kGemma4GlobalRotaryDims, true, bf16);
        check_k_from_v_decode_spec(name, gemma_peaked, kGemma4GlobalRotaryDims, true, bf16);
    }
}

TEST_CASE("gpu K-from-V decode kernels: the caller's inv_freq table, and metadata outside the tensors") {
    const std::vector<RunnableKernel> kernels = k_from_v_only_kernels();
    if (kernels.empty()) {
        MESSAGE("no kernel of the bundle that serves only K-from-V calls runs on this GPU");
        return;
    }
    for (const RunnableKernel& name : kernels) {
        ProblemSpec spec = problem_spec({1, 1}, {131000, 4000}, 32, 4, 64, kSeed + 20);
        spec.e4m3_kv = name.kv_dtype == WIDEATTN_DTYPE_E4M3;
        HostProblem h;
        REQUIRE(make_problem(spec, &h).empty());
        std::vector<float> table = formula_inv_freq(gemma4_k_from_v(nullptr), spec.head_dim);
        table[1] = std::nextafter(table[1], 1.0f);
        check_k_from_v_decode(name, h, kGemma4GlobalRotaryDims, true, table);

        // Block-table entries outside the cache (negative, num_blocks, INT32_MAX) and key counts
        // past the table row: both kernels read such pages as zeros and clamp the keys to the row.
        ProblemSpec bad = problem_spec({1, 1, 1}, {700, 40, 3000}, 32, 4, 16, kSeed + 21);
        bad.e4m3_kv = name.kv_dtype == WIDEATTN_DTYPE_E4M3;
        REQUIRE(make_problem(bad, &h).empty());
        const int32_t outside[] = {-1, h.num_blocks, INT32_MAX};
        for (size_t i = 0; i < std::size(outside); ++i) h.block_table[i * h.table_stride + 2 + i] = outside[i];
        h.seq_lens_k[1] = INT32_MAX;
        check_k_from_v_decode(name, h, kEveryDim, true);
    }
}


namespace {

constexpr const char* kE4m3KfvKernel = "decode_e4m3kfv_d512";
constexpr const char* kE4m3KfvBf16KeysKernel = "decode_e4m3kfvb_d512";  // the default of the two (sm_90a)
constexpr uint8_t kE4m3NaNCode = 0x7f;

// Bf16 outputs (raw bytes) of two kernels equal bit for bit, NaN for NaN (payloads aside); the
// number of elements that are not.
size_t bf16_mismatches(const std::vector<unsigned char>& a, const std::vector<unsigned char>& b) {
    if (a.size() != b.size()) return std::max(a.size(), b.size());
    size_t mismatches = 0;
    for (size_t i = 0; i + 1 < a.size(); i += 2) {
        const uint16_t x = static_cast<uint16_t>(a[i] | (a[i + 1] << 8));
        const uint16_t y = static_cast<uint16_t>(b[i] | (b[i + 1] << 8));
        const auto nan = [](uint16_t v) { return (v & 0x7f80u) == 0x7f80u && (v & 0x007fu) != 0; };
        if (x != y && !(nan(x) && nan(y))) ++mismatches;
    }
    return mismatches;
}

// The kernel of `kernels` named `name`, or nullptr.
const RunnableKernel* kernel_named(const std::vector<RunnableKernel>& kernels, const char* name) {
    const auto it = std::find_if(kernels.begin(), kernels.end(), [&](const RunnableKernel& k) { return k.name == name; });
    return it == kernels.end() ? nullptr : &*it;
}

// decode_e4m3kfvb_d512 against decode_e4m3kfv_d512 on one problem: the same output bits.
void check_same_bits(const RunnableKernel& base, const RunnableKernel& bf16_keys, const HostProblem& h,
                     int32_t rotary_dims, KNormWeights weights, const char* what,
                     const std::vector<uint32_t>& cos_sin = {}, int32_t cos_sin_word_offset = 0) {
    CAPTURE(h.spec.describe());
    CAPTURE(what);
    const std::vector<unsigned char> a =
        k_from_v_raw_output(base, h, rotary_dims, weights, {}, cos_sin, cos_sin_word_offset);
    const std::vector<unsigned char> b =
        k_from_v_raw_output(bf16_keys, h, rotary_dims, weights, {}, cos_sin, cos_sin_word_offset);
    const size_t mismatches = bf16_mismatches(a, b);
    std::printf("  %-20s %-64s %s: %s\n", bf16_keys.name.c_str(), h.spec.describe().c_str(), what,
                mismatches ? (std::to_string(mismatches) + " outputs differ").c_str() : "bit-identical");
    CHECK(mismatches == 0);
}

}  // namespace

TEST_CASE("gpu decode_e4m3kfvb_d512: the output bits of decode_e4m3kfv_d512, product path and fp32 path") {
    const std::vector<RunnableKernel> kernels = k_from_v_only_kernels();
    const RunnableKernel* const base_kernel = kernel_named(kernels, kE4m3KfvKernel);
    const RunnableKernel* const bf16_keys_kernel = kernel_named(kernels, kE4m3KfvBf16KeysKernel);
    if (!base_kernel || !bf16_keys_kernel) {
        MESSAGE("decode_e4m3kfvb_d512 or decode_e4m3kfv_d512 is not in this bundle (no sm_90a build) or does not run here");
        return;
    }
    const RunnableKernel& base = *base_kernel;
    const RunnableKernel& bf16_keys = *bf16_keys_kernel;
    const auto problem = [](ProblemSpec spec) {
        spec.e4m3_kv = true;
        HostProblem h;
        REQUIRE(make_problem(spec, &h).empty());
        return h;
    };
    const KNormWeights bf16 = KNormWeights::kBf16, fp32 = KNormWeights::kFp32;
    // The harness's v_scale is a power of two: with bf16 weights the product path of decode_e4m3kfvb_d512.
    HostProblem batch = problem(problem_spec({1, 1, 1, 1, 1}, {777, 36, 4109, 0, 1000}, 32, 4, 16, kSeed + 40));
    check_same_bits(base, bf16_keys, batch, kGemma4GlobalRotaryDims, bf16, "bf16 weights (products)");
    check_same_bits(base, bf16_keys, batch, kEveryDim, bf16, "bf16 weights, every dim rotated");
    check_same_bits(base, bf16_keys, batch, kGemma4GlobalRotaryDims, fp32, "fp32 weights (fp32 path)");
    HostProblem long_one = problem(problem_spec({1, 1}, {131000, 4000}, 32, 4, 64, kSeed + 41));
    check_same_bits(base, bf16_keys, long_one, kGemma4GlobalRotaryDims, bf16, "bf16 weights, keys to 131k");
    wideattn_k_from_v host_kfv = k_from_v_check_description(nullptr, kGemma4GlobalRotaryDims);
    std::vector<uint32_t> table;
    REQUIRE(k_from_v_cos_sin_table(host_kfv, long_one.spec.head_dim, 2021, &table).empty());
    check_same_bits(base, bf16_keys, long_one, kGemma4GlobalRotaryDims, bf16, "bf16 weights, a table of 2021 rows",
                    table);
    // The same table 8 bytes past a 16-byte boundary (the validated alignment is 8 bytes).
    constexpr int32_t kEightBytesIn = 2;
    check_same_bits(base, bf16_keys, long_one, kGemma4GlobalRotaryDims, bf16,
                    "bf16 weights, the 2021-row table 8 bytes off 16-byte alignment", table, kEightBytesIn);
    // A table of 44 frequencies (rotary_dims 88): the second rotated pair block is partly past the
    // table's entries, whose words read as (cos 1, sin 0) there.
    constexpr int32_t kPartialBlockRotaryDims = 88;
    wideattn_k_from_v partial_kfv = k_from_v_check_description(nullptr, kPartialBlockRotaryDims);
    std::vector<uint32_t> partial_table;
    REQUIRE(k_from_v_cos_sin_table(partial_kfv, long_one.spec.head_dim, 5000, &partial_table).empty());
    check_same_bits(base, bf16_keys, long_one, kPartialBlockRotaryDims, bf16,
                    "bf16 weights, rotary_dims 88, a table of 5000 rows", partial_table);
    ProblemSpec gemma_spec = problem_spec({1, 1, 1}, {3700, 300, 20000}, 32, 4, 16, kSeed + 42);
    gemma_spec.gemma.q_rms = 1.0f;
    check_same_bits(base, bf16_keys, problem(gemma_spec), kGemma4GlobalRotaryDims, bf16, "Gemma-like, bf16 weights");
    // A v_scale that is no power of two: the fp32 path.
    HostProblem odd_scale = batch;
    odd_scale.v_scale *= 0.7f;
    check_same_bits(base, bf16_keys, odd_scale, kGemma4GlobalRotaryDims, bf16, "v_scale no power of two");
    // NaN codes in V (a rotated and an unrotated dim of two keys): NaN rows where the base has them.
    HostProblem nan_codes = batch;
    const int64_t row_bytes = int64_t{nan_codes.spec.num_kv_heads} * nan_codes.spec.head_dim;
    nan_codes.v_e4m3[5 * row_bytes + 3] = kE4m3NaNCode;
    nan_codes.v_e4m3[900 * row_bytes + 300] = kE4m3NaNCode | 0x80u;
    check_same_bits(base, bf16_keys, nan_codes, kGemma4GlobalRotaryDims, bf16, "NaN codes in V");
}
