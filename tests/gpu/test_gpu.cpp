// test_gpu.cpp - the GPU suite (run on a GPU machine; exits 77 = skipped where there is none).
// The fp64 GPU kernel against the CPU fp64 reference on small varlen / paged / context
// shapes, its bad-input and empty-batch behaviour, and every fast kernel of the bundle
// against the fp64 kernel on the shape lists and the Gemma-like inputs: each problem is made
// and its fp64 reference computed once, then every kernel of the list runs on it.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "kernels/common/kernel_desc.h"
#include "tests/gpu/gpu_fixture.h"
#include "tools/harness/checks.h"

using namespace wideattn;
using wideattn::test::gpu;
using wideattn::test::KernelRestriction;
using wideattn::test::TestStream;

namespace {


uint64_t fresh_seed() {
    static uint64_t seed = static_cast<uint64_t>(std::time(nullptr));
    return ++seed;
}

void check_reference_case(const ProblemSpec& spec) {
    CAPTURE(spec.describe());
    const CaseResult r = run_case(*gpu().device, gpu().ctx, spec, WIDEATTN_DTYPE_F64, ReferenceKind::kCpu);
    REQUIRE_MESSAGE(r.error.empty(), r.error);
    INFO(accuracy::format_error_stats(r.stats));
    CHECK(r.kernel == "reference_f64");
    CHECK(r.stats.nonfinite == 0);
    CHECK(r.stats.rel_l2 <= kFp64RelL2);
    CHECK(r.lse_nonfinite == 0);
    CHECK(r.lse_max_abs <= kFp64LseAbs);
    CHECK(r.deterministic);
}

bool bundle_has_prefill_kernel(int32_t kv_dtype, int32_t q_dtype = WIDEATTN_DTYPE_BF16) {
    for (int i = 0; i < wideattn_kernel_count(gpu().ctx); ++i) {
        wideattn_kernel_info k{};
        wideattn_get_kernel_info(gpu().ctx, i, &k);
        if (std::string(k.kind) == "prefill" && k.o_dtype == WIDEATTN_DTYPE_BF16 && k.kv_dtype == kv_dtype &&
            k.q_dtype == q_dtype)
            return true;
    }
    return false;
}

// Names of the bf16-output prefill kernels for these input dtypes that run on this GPU (every
// tier, e.g. wgmma_bf16_d512 and mma_bf16_d512 on an sm_90 device), in manifest order; a kernel
// that serves only K-from-V calls is left out, named (test_gpu_k_from_v.cpp runs it).
std::vector<std::string> runnable_prefill_kernels(int32_t kv_dtype, int32_t q_dtype) {
    std::vector<std::string> names;
    for (const RunnableKernel& k :
         runnable_kernels(gpu().ctx, gpu().device->cc_major(), gpu().device->cc_minor())) {
        if (k.kind != kKindPrefill || k.o_dtype != WIDEATTN_DTYPE_BF16 || k.kv_dtype != kv_dtype ||
            k.q_dtype != q_dtype)
            continue;
        if (k.k_from_v_only)
            std::printf("  %s: serves only K-from-V calls, not part of the K+V cases\n", k.name.c_str());
        else
            names.push_back(k.name);
    }
    return names;
}

// A bf16-output kernel's result against the fp64 kernel: finite, deterministic, within
// `rel_l2_bound`; the LSE too when `check_lse` (e4m3 kernels round the scores, see kE4m3RelL2).
void check_fast_result(const ProblemSpec& spec, const CaseResult& r, double rel_l2_bound, bool check_lse) {
    std::printf("  %-16s %-60s %s\n", r.kernel.c_str(), spec.describe().c_str(),
                accuracy::format_error_stats(r.stats).c_str());
    INFO(accuracy::format_error_stats(r.stats));
    CHECK(r.stats.nonfinite == 0);
    CHECK(r.stats.rel_l2 <= rel_l2_bound);
    CHECK(r.lse_nonfinite == 0);
    if (check_lse) CHECK(r.lse_max_abs <= kFp32LseAbs);
    CHECK(r.deterministic);
}

// check_fast_result for the kernel the suite's context selects, on a problem of its own.
void check_fast_case(const ProblemSpec& spec, double rel_l2_bound, bool check_lse) {
    CAPTURE(spec.describe());
    const CaseResult r = run_case(*gpu().device, gpu().ctx, spec, WIDEATTN_DTYPE_BF16, ReferenceKind::kGpuF64);
    REQUIRE_MESSAGE(r.error.empty(), r.error);
    check_fast_result(spec, r, rel_l2_bound, check_lse);
}

// Makes `spec`'s problem and its fp64 GPU reference once, runs every kernel of `kernels` on it
// (each pinned by name; a kernel that reads V only transposed gets the same inputs in that layout)
// and hands each result, with the spec it ran, to check(spec, result).
template <typename Check>
void check_kernels_on(const ProblemSpec& spec, const std::vector<std::string>& kernels, Check check) {
    CAPTURE(spec.describe());
    HostProblem host, transposed;
    Reference ref;
    std::string err = make_problem(spec, &host);
    if (err.empty()) err = compute_reference(*gpu().device, gpu().ctx, host, ReferenceKind::kGpuF64, &ref);
    REQUIRE_MESSAGE(err.empty(), err);
    for (const std::string& name : kernels) {
        CAPTURE(name);
        const bool reads_transposed = kernel_reads_transposed_v(gpu().ctx, name);
        if (reads_transposed && !transposed.spec.v_transposed) {
            transposed = host;
            const std::string moved = transpose_v_codes(&transposed);
            REQUIRE_MESSAGE(moved.empty(), moved);
        }
        const HostProblem& inputs = reads_transposed ? transposed : host;
        const KernelRestriction only(name);
        const CaseResult r = run_against_reference(*gpu().device, gpu().ctx, inputs, WIDEATTN_DTYPE_BF16, ref);
        REQUIRE_MESSAGE(r.error.empty(), r.error);
        CHECK(r.kernel == name);
        check(inputs.spec, r);
    }
}

}  // namespace

// Gemma-like inputs at softmax scale 1.0 (GemmaInputs): QK-normed Q with RMS 0.3 .. 1.0, K
// outlier channels x20 .. x60, V with a large common offset, long contexts.
std::vector<ProblemSpec> gemma_specs(uint64_t seed) {
    struct Shape {
        std::vector<int32_t> q_lens, contexts;
        int32_t q_heads, kv_heads, block_size;
        float q_rms;
        int32_t outlier_channels;
        float outlier_gain, v_offset;
    };
    const Shape shapes[] = {
        {{2048}, {0}, 32, 4, 16, 0.3f, 0, 1.0f, 0.0f},
        {{160}, {16000}, 32, 4, 16, 0.5f, 0, 1.0f, 0.0f},           // long context
        {{1, 5, 300}, {20000, 3000, 0}, 32, 4, 64, 0.7f, 1, 40.0f, 4.0f},  // decode, verify, prompt
        {{999}, {1234}, 8, 1, 32, 1.0f, 2, 60.0f, 0.0f},             // TP=4 rank
        {{700}, {0}, 32, 4, 16, 0.5f, 1, 20.0f, 8.0f},
    };
    std::vector<ProblemSpec> specs;
    for (const Shape& shape : shapes) {
        ProblemSpec s = problem_spec(shape.q_lens, shape.contexts, shape.q_heads, shape.kv_heads, shape.block_size,
                                     seed + specs.size());
        s.gemma.q_rms = shape.q_rms;
        s.gemma.k_outlier_channels = shape.outlier_channels;
        s.gemma.k_outlier_gain = shape.outlier_gain;
        s.gemma.v_offset_rms = shape.v_offset;
        specs.push_back(s);
    }
    return specs;
}

TEST_CASE("gpu bf16 kernels: Gemma-like peaked inputs within the rounding-floor bound") {
    const uint64_t seed = fresh_seed();
    const std::vector<std::string> kernels = runnable_prefill_kernels(WIDEATTN_DTYPE_BF16, WIDEATTN_DTYPE_BF16);
    REQUIRE_FALSE(kernels.empty());
    for (const ProblemSpec& spec : gemma_specs(seed))
        check_kernels_on(spec, kernels, [](const ProblemSpec& ran, const CaseResult& r) {
            std::printf("  %-16s %-72s mean abs %.3e = x%.3f of the rounding floor\n", r.kernel.c_str(),
                        ran.describe().c_str(), r.stats.mean_abs, floor_ratio(r));
            INFO(accuracy::format_error_stats(r.stats));
            CHECK(r.stats.nonfinite == 0);
            CHECK(r.stats.rel_l2 <= kBf16RelL2);
            CHECK(floor_ratio(r) <= kPeakedFloorRatio);
            CHECK(r.lse_max_abs <= kFp32LseAbs);
            CHECK(r.deterministic);
        });
}

TEST_CASE("gpu fp64 kernel: matches the CPU reference on varlen, paged, context shapes") {
    const uint64_t seed = fresh_seed();
    check_reference_case(problem_spec({65}, {0}, 8, 1, 16, seed));
    check_reference_case(problem_spec({1, 7, 0, 63, 64}, {0, 777, 5, 1, 33}, 16, 2, 32, seed + 1));
    ProblemSpec outlier = problem_spec({129}, {300}, 8, 1, 128, seed + 2);
    outlier.k_outlier = 10.0f;
    check_reference_case(outlier);
    ProblemSpec padded = problem_spec({33, 17}, {16, 0}, 12, 3, 16, seed + 3);  // group 4, padded rows
    padded.q_token_pad = 16;
    padded.shuffle_blocks = false;
    check_reference_case(padded);
    ProblemSpec wide_group = problem_spec({20}, {5}, 16, 1, 48, seed + 4);  // group 16: two blocks per KV head
    wide_group.head_dim = 256;
    check_reference_case(wide_group);
    ProblemSpec no_lse = problem_spec({9}, {1}, 8, 1, 16, seed + 5);
    no_lse.want_lse = false;
    check_reference_case(no_lse);
}

TEST_CASE("gpu: an empty batch launches nothing and succeeds") {
    HostProblem h;
    REQUIRE(make_problem(problem_spec({0, 0}, {3, 0}, 8, 1, 16, 1), &h).empty());
    DeviceProblem d;
    REQUIRE(d.create(*gpu().device, h, WIDEATTN_DTYPE_F64).empty());
    CHECK(wideattn_prefill(gpu().ctx, &d.params, nullptr) == WIDEATTN_OK);
}

TEST_CASE("gpu: bad input on a GPU gets the same clear errors") {
    HostProblem h;
    REQUIRE(make_problem(problem_spec({4}, {0}, 8, 1, 16, 2), &h).empty());
    DeviceProblem d;
    REQUIRE(d.create(*gpu().device, h, WIDEATTN_DTYPE_F64).empty());
    wideattn_prefill_params p = d.params;
    p.block_size = 40;
    CHECK(wideattn_prefill(gpu().ctx, &p, nullptr) == WIDEATTN_ERROR_INVALID_ARGUMENT);
    CHECK(std::string(wideattn_last_error()) == "block_size=40 is not a positive multiple of 16");
    HostProblem wide;
    ProblemSpec wide_spec = problem_spec({4}, {0}, 8, 1, 16, 3);
    wide_spec.head_dim = 576;  // no kernel serves it
    REQUIRE(make_problem(wide_spec, &wide).empty());
    DeviceProblem wide_device;
    REQUIRE(wide_device.create(*gpu().device, wide, WIDEATTN_DTYPE_F64).empty());
    CHECK(wideattn_prefill(gpu().ctx, &wide_device.params, nullptr) == WIDEATTN_ERROR_UNSUPPORTED);
    CHECK(std::string(wideattn_last_error()).find("head_dim=576") != std::string::npos);
    p = d.params;
    p.o_dtype = WIDEATTN_DTYPE_F32;
    CHECK(wideattn_prefill(gpu().ctx, &p, nullptr) == WIDEATTN_ERROR_UNSUPPORTED);
    // The process and the context keep working after refusals.
    CHECK(d.run(*gpu().device, gpu().ctx).empty());
}

namespace {

// The shape lists' page sizes, cycled through case by case.
constexpr int32_t kShapeListBlockSizes[] = {16, 32, 128};
constexpr int kBlockSizeCount = sizeof(kShapeListBlockSizes) / sizeof(kShapeListBlockSizes[0]);
constexpr int kTp4Period = 4;     // every fourth case (from the second) at TP=4 heads
constexpr int kOutlierPeriod = 5;  // every fifth case (from the third) with a K outlier
constexpr float kKOutlier = 12.0f;

// The shape lists' one-sequence cases, q_lens x contexts in order, each with the next seed
// after *seed: Gemma 4 global heads at TP=1 (32 query / 4 KV) or TP=4 (8 / 1), some with a
// large K outlier channel, page sizes cycling through kShapeListBlockSizes.
std::vector<ProblemSpec> shape_list_cases(std::initializer_list<int32_t> q_lens,
                                          std::initializer_list<int32_t> contexts, uint64_t* seed) {
    std::vector<ProblemSpec> specs;
    int variant = 0;
    for (int32_t q_len : q_lens)
        for (int32_t context : contexts) {
            ProblemSpec s = problem_spec({q_len}, {context}, 32, 4, kShapeListBlockSizes[variant % kBlockSizeCount],
                                         ++*seed);
            if (variant % kTp4Period == 1) s.num_q_heads = 8, s.num_kv_heads = 1;
            if (variant % kOutlierPeriod == 2) s.k_outlier = kKOutlier;
            ++variant;
            specs.push_back(s);
        }
    return specs;
}

// The shape lists' mixed batch: one decode token after a long context, a long prompt, an
// empty sequence, short ones and one past 4096 tokens, in one call.
ProblemSpec shape_list_batch(uint64_t seed) {
    return problem_spec({1, 1000, 0, 65, 4109}, {8192, 0, 777, 1, 13}, 32, 4, 32, seed);
}

// The bf16 shape list: the one-sequence cases, the mixed batch with padded rows, a TP=4 batch
// with a K outlier, and last pages partly filled (keys 21, 79, 33, 1 and 50 of pages of 32 or
// 16) with NaN in every slot no sequence uses: a kernel that lets them reach O (0 x NaN in P V)
// fails there.
std::vector<ProblemSpec> bf16_shape_list(uint64_t seed) {
    std::vector<ProblemSpec> specs = shape_list_cases({1, 7, 63, 64, 65, 1000, 4096 + 13}, {0, 1, 777, 8192}, &seed);
    ProblemSpec batch = shape_list_batch(++seed);
    batch.q_token_pad = 8;
    specs.push_back(batch);
    ProblemSpec tp4 = problem_spec({63, 64}, {777, 8192}, 8, 1, 128, ++seed);
    tp4.k_outlier = kKOutlier;
    specs.push_back(tp4);
    for (const int32_t block_size : {32, 16}) {
        ProblemSpec unused = problem_spec({1, 70, 33, 1, 45}, {20, 9, 0, 0, 5}, 32, 4, block_size, ++seed);
        unused.nan_unused_slots = true;
        specs.push_back(unused);
    }
    return specs;
}

// The 8-bit kernels' shape list, checked against the fp64 kernel on the exactly dequantised
// inputs: K/V in e4m3, and Q too when `e4m3_q` (rows then padded by a whole 16 bytes).
std::vector<ProblemSpec> e4m3_shape_list(uint64_t seed, std::initializer_list<int32_t> q_lens, bool e4m3_q) {
    std::vector<ProblemSpec> specs = shape_list_cases(q_lens, {0, 777, 8192}, &seed);
    specs.push_back(shape_list_batch(++seed));
    if (e4m3_q) specs.back().q_token_pad = kE4m3QPadMultiple;
    for (ProblemSpec& s : specs) {
        s.e4m3_kv = true;
        s.e4m3_q = e4m3_q;
    }
    return specs;
}

// The runnable kernels of these input dtypes (REQUIREd to exist) on every spec of a shape list.
void check_shape_list(int32_t kv_dtype, int32_t q_dtype, const char* none_runs, const std::vector<ProblemSpec>& specs,
                      double rel_l2_bound, bool check_lse) {
    const std::vector<std::string> kernels = runnable_prefill_kernels(kv_dtype, q_dtype);
    REQUIRE_MESSAGE(!kernels.empty(), none_runs);
    for (const ProblemSpec& spec : specs)
        check_kernels_on(spec, kernels, [&](const ProblemSpec& ran, const CaseResult& r) {
            check_fast_result(ran, r, rel_l2_bound, check_lse);
        });
}

}  // namespace

TEST_CASE("gpu bf16 kernels: the bf16 shape list against the fp64 kernel, every tier") {
    if (!bundle_has_prefill_kernel(WIDEATTN_DTYPE_BF16)) {
        MESSAGE("no bf16-output kernel in the bundle yet");
        return;
    }
    check_shape_list(WIDEATTN_DTYPE_BF16, WIDEATTN_DTYPE_BF16, "no bf16 kernel of the bundle runs on this GPU",
                     bf16_shape_list(fresh_seed() * 1000), kBf16RelL2, true);
}

TEST_CASE("gpu e4m3 kernels: the shape list against the fp64 kernel on the dequantised K/V, every tier") {
    if (!bundle_has_prefill_kernel(WIDEATTN_DTYPE_E4M3)) {
        MESSAGE("no e4m3-KV kernel in the bundle yet");
        return;
    }
    check_shape_list(WIDEATTN_DTYPE_E4M3, WIDEATTN_DTYPE_BF16, "no e4m3-KV kernel of the bundle runs on this GPU",
                     e4m3_shape_list(fresh_seed() * 1000 + 500, {1, 7, 64, 65, 1000, 4096 + 13}, false), kE4m3RelL2,
                     false);
}

TEST_CASE("gpu e4m3-Q kernels: Q already e4m3, the shape list against the fp64 kernel, every tier") {
    if (!bundle_has_prefill_kernel(WIDEATTN_DTYPE_E4M3, WIDEATTN_DTYPE_E4M3)) {
        MESSAGE("no e4m3-Q kernel in the bundle yet");
        return;
    }
    check_shape_list(WIDEATTN_DTYPE_E4M3, WIDEATTN_DTYPE_E4M3, "no e4m3-Q kernel of the bundle runs on this GPU",
                     e4m3_shape_list(fresh_seed() * 1000 + 800, {1, 7, 65, 1000, 4096 + 13}, true), kE4m3RelL2,
                     false);
}

TEST_CASE("gpu bf16 kernels: launches in flight on two streams at once give each call its own work") {
    // Everything a call prepares for its launch (the TMA tensor maps of its caches, the
    // params) must belong to that call: state shared between two calls in flight would let one
    // read the other's cache or skip work (outputs left NaN). Each problem is run alone first,
    // then both are queued on two streams several times over; every output must equal its solo
    // run bit for bit (the kernels are deterministic).
    if (!bundle_has_prefill_kernel(WIDEATTN_DTYPE_BF16)) {
        MESSAGE("no bf16-output kernel in the bundle yet");
        return;
    }
    constexpr int kRounds = 3;
    const uint64_t seed = fresh_seed() * 1000;
    const ProblemSpec specs[2] = {problem_spec({1000, 65}, {777, 0}, 32, 4, 16, seed),
                                  problem_spec({4109}, {13}, 32, 4, 32, seed + 1)};
    const std::vector<std::string> kernels = runnable_prefill_kernels(WIDEATTN_DTYPE_BF16, WIDEATTN_DTYPE_BF16);
    REQUIRE_MESSAGE(!kernels.empty(), "no bf16 kernel of the bundle runs on this GPU");
    HostProblem hosts[2];
    DeviceProblem devices[2];
    for (int i = 0; i < 2; ++i) {
        REQUIRE(make_problem(specs[i], &hosts[i]).empty());
        REQUIRE(devices[i].create(*gpu().device, hosts[i], WIDEATTN_DTYPE_BF16).empty());
    }
    TestStream streams[2];
    for (const TestStream& s : streams) REQUIRE_MESSAGE(s.error.empty(), s.error);
    for (const std::string& name : kernels) {
        CAPTURE(name);
        const KernelRestriction only(name);
        std::vector<unsigned char> solo[2];
        for (int i = 0; i < 2; ++i) {
            const std::string err = devices[i].run(*gpu().device, gpu().ctx);
            REQUIRE_MESSAGE(err.empty(), err);
            REQUIRE(devices[i].download_raw(&solo[i]).empty());
        }
        for (int round = 0; round < kRounds; ++round) {
            CAPTURE(round);
            for (DeviceProblem& d : devices) REQUIRE(d.poison_outputs().empty());
            for (int i = 0; i < 2; ++i)
                REQUIRE_MESSAGE(wideattn_prefill(gpu().ctx, &devices[i].params, streams[i].stream) == WIDEATTN_OK,
                                wideattn_last_error());
            REQUIRE(gpu().device->check(gpu().device->driver().cuCtxSynchronize(), "cuCtxSynchronize").empty());
            for (int i = 0; i < 2; ++i) {
                std::vector<unsigned char> both;
                REQUIRE(devices[i].download_raw(&both).empty());
                CHECK_MESSAGE(both == solo[i], specs[i].describe());
            }
        }
    }
}

namespace {

constexpr const char* kFp8PvKernel = "wgmma_e4m3pv_d512";
// The kernels of the transposed V layout with both products by FP8 wgmma.
constexpr const char* kFp8AltKernel = "wgmma_e4m3alt_d512";
constexpr const char* kFp8Alt64Kernel = "wgmma_e4m3alt64_d512";  // 64-key tiles
constexpr const char* kFp8PvKernels[] = {kFp8PvKernel, kFp8AltKernel, kFp8Alt64Kernel};
// Their forms for bf16 Q (quantised in the kernel per 64-row block).
constexpr const char* kFp8PvBf16QKernels[] = {"wgmma_e4m3pvkv_d512", "wgmma_e4m3altkv_d512", "wgmma_e4m3alt64kv_d512"};
// The single-token decode kernels over the same layout (pinned, so they also run the multi-token
// shapes: one block per query token), for e4m3 Q and for bf16 Q.
constexpr const char* kVtDecodeKernel = "decode_e4m3vt_d512";
constexpr const char* kVtDecodeQKernel = "decode_e4m3vtq_d512";
constexpr int32_t kLongQLen = 64;
// At 128k keys a P V accumulates 4096 FP8 wgmmas into one fp32 accumulator; the tensor cores keep
// fewer accumulation bits for FP8 than fp32 does, which the mma-tier e4m3 kernel avoids by adding
// each tile's P V in true fp32 (two-level). Its error comes from the same e4m3 P, so the FP8
// P V kernel may exceed it by this much before the accumulation shows.
constexpr double kLongContextErrorRatio = 1.5;

// Whether the bundle has kernel `name` (e4m3 K/V, Q of q_dtype) for this GPU.
bool runs_here(const std::string& name, wideattn_dtype q_dtype = WIDEATTN_DTYPE_E4M3) {
    for (const std::string& k : runnable_prefill_kernels(WIDEATTN_DTYPE_E4M3, q_dtype))
        if (k == name) return true;
    return false;
}


}  // namespace

TEST_CASE("gpu wgmma_e4m3pv_d512 and wgmma_e4m3alt_d512: transposed V, NaN in unused slots, the Gemma-like inputs") {
    // Every kernel that reads the transposed V layout: the FP8 P V prefill kernels and the decode kernels.
    std::vector<std::pair<std::string, bool>> kernels;  // name, e4m3 Q
    for (const char* kernel : kFp8PvKernels) kernels.emplace_back(kernel, true);
    for (const char* kernel : kFp8PvBf16QKernels) kernels.emplace_back(kernel, false);
    kernels.emplace_back(kVtDecodeQKernel, true);
    kernels.emplace_back(kVtDecodeKernel, false);
    // Where the tier runs (sm_90a), every one of them must: none is skipped in silence.
    const bool tier_here = runs_here(kFp8PvKernel);
    for (const auto& entry : kernels) {
        const std::string& kernel = entry.first;
        const bool e4m3_q = entry.second;
        CAPTURE(kernel);
        if (!runs_here(kernel, e4m3_q ? WIDEATTN_DTYPE_E4M3 : WIDEATTN_DTYPE_BF16)) {
            CHECK_MESSAGE(!tier_here, kernel << " is missing where " << kFp8PvKernel << " runs");
            MESSAGE(kernel << " does not run on this GPU");
            continue;
        }
        const KernelRestriction only(kernel);
        uint64_t seed = fresh_seed() * 1000 + 900;
        // Last pages partly filled (keys 21, 79, 33, 1 and 50 of pages of 32 or 16) with NaN codes
        // in every slot no sequence uses: the kernel zeroes the keys past kv_end in its last V tile.
        for (const int32_t block_size : {32, 16, 128}) {
            ProblemSpec unused = problem_spec({1, 70, 33, 1, 45}, {20, 9, 0, 0, 5}, 32, 4, block_size, ++seed);
            unused.e4m3_kv = unused.v_transposed = true;
            unused.e4m3_q = e4m3_q;
            unused.nan_unused_slots = true;
            check_fast_case(unused, kE4m3RelL2, false);
        }
        // Key tiles of every parity and run length (the alternating kernels' rounds; from 900 keys
        // the 64-key tiles' runs of four full rounds, followed by 1, 2, 3 or 0 more: 15, 17, 18,
        // 20, 23 and 29 tiles).
        for (const int32_t context : {31, 64, 97, 160, 223, 300, 511, 900, 1023, 1100, 1250, 1420, 1790}) {
            ProblemSpec spec = problem_spec({9, 1}, {context, context + 40}, 16, 2, 16, ++seed);
            spec.e4m3_kv = spec.v_transposed = true;
            spec.e4m3_q = e4m3_q;
            spec.nan_unused_slots = true;
            check_fast_case(spec, kE4m3RelL2, false);
        }
        for (ProblemSpec spec : gemma_specs(++seed)) {
            spec.e4m3_kv = spec.v_transposed = true;
            spec.e4m3_q = e4m3_q;
            check_fast_case(spec, kE4m3RelL2, false);
        }
    }
}

TEST_CASE("gpu wgmma_e4m3alt64kv_d512: few-token sequences take P as two e4m3 terms, prefill sequences one") {
    // The 64-key kernels round P to e4m3 for the FP8 P V; a sequence whose new tokens fit one token
    // tile gets a second e4m3 term of P (the residual), which leaves the Q rounding as its error, as
    // in the engine layout's kernel (Q K^T in FP8, P V at f16): its error within
    // kTwoTermErrorRatio of that kernel's. Prefill sequences keep one term, whose P rounding shows
    // above it (the contrast checks that the switch is per sequence and that the check can fail).
    const std::string kTwoTermKernel = "wgmma_e4m3alt64kv_d512";
    const std::string kEngineLayoutKernel = "wgmma_e4m3kv_d512";
    constexpr double kTwoTermErrorRatio = 1.1;
    if (!runs_here(kTwoTermKernel, WIDEATTN_DTYPE_BF16) || !runs_here(kEngineLayoutKernel, WIDEATTN_DTYPE_BF16)) {
        CHECK_MESSAGE(!runs_here(kFp8PvKernel), "the bf16-Q kernels are missing where " << kFp8PvKernel << " runs");
        MESSAGE(kTwoTermKernel << " or " << kEngineLayoutKernel << " does not run on this GPU");
        return;
    }
    const std::vector<std::string> kernels = {kEngineLayoutKernel, kTwoTermKernel};
    uint64_t seed = fresh_seed() * 1000 + 950;
    struct Batch {
        const char* what;
        std::vector<int32_t> q_lens, contexts;
        bool two_terms;
    };
    const Batch batches[] = {
        {"few-token", {5, 5, 1, 8, 3, 7}, {2300, 4001, 1500, 999, 3100, 77}, true},
        {"prefill", {64, 40}, {4000, 1999}, false},
    };
    for (const Batch& batch : batches) {
        CAPTURE(batch.what);
        ProblemSpec spec = problem_spec(batch.q_lens, batch.contexts, 32, 4, 16, ++seed);
        spec.e4m3_kv = true;
        double rel_l2[2] = {-1.0, -1.0};
        check_kernels_on(spec, kernels, [&](const ProblemSpec& ran, const CaseResult& r) {
            check_fast_result(ran, r, kE4m3RelL2, false);
            rel_l2[r.kernel == kTwoTermKernel ? 1 : 0] = r.stats.rel_l2;
        });
        const double ratio = rel_l2[1] / rel_l2[0];
        std::printf("  %s: %s rel L2 %.4g, %s %.4g: ratio %.3f\n", batch.what, kTwoTermKernel.c_str(), rel_l2[1],
                    kEngineLayoutKernel.c_str(), rel_l2[0], ratio);
        if (batch.two_terms)
            CHECK(ratio <= kTwoTermErrorRatio);
        else
            CHECK(ratio > kTwoTermErrorRatio);
    }
}

TEST_CASE("gpu wgmma_e4m3pv_d512 and wgmma_e4m3alt_d512: accuracy at 32k and 128k keys against the fp64 kernel and the other e4m3-Q kernels") {
    if (!runs_here(kFp8PvKernel)) {
        MESSAGE("wgmma_e4m3pv_d512 does not run on this GPU");
        return;
    }
    constexpr int32_t kContexts[] = {32768 - kLongQLen, 131072 - kLongQLen};
    constexpr const char* kMmaE4m3qKernel = "mma_e4m3q_d512";
    std::vector<std::string> kernels = {kFp8PvKernel};
    for (const char* alternating : {kFp8AltKernel, kFp8Alt64Kernel})
        if (runs_here(alternating)) kernels.push_back(alternating);
    for (const char* other : {"wgmma_e4m3q_d512", kMmaE4m3qKernel})
        if (runs_here(other)) kernels.push_back(other);
    for (const int32_t context : kContexts) {
        CAPTURE(context);
        ProblemSpec spec = problem_spec({kLongQLen}, {context}, 32, 4, 64, fresh_seed());
        spec.e4m3_kv = spec.e4m3_q = true;
        std::vector<double> pv_rel_l2;
        double mma_rel_l2 = -1.0;  // the same inputs for every kernel
        check_kernels_on(spec, kernels, [&](const ProblemSpec&, const CaseResult& r) {
            std::printf("  %-18s q %d ctx %-7d %s\n", r.kernel.c_str(), kLongQLen, context,
                        accuracy::format_error_stats(r.stats).c_str());
            if (r.kernel == kFp8PvKernel || r.kernel == kFp8AltKernel || r.kernel == kFp8Alt64Kernel) {
                CHECK(r.stats.nonfinite == 0);
                CHECK(r.stats.rel_l2 <= kE4m3RelL2);
                CHECK(r.deterministic);
                pv_rel_l2.push_back(r.stats.rel_l2);
            }
            if (r.kernel == kMmaE4m3qKernel) mma_rel_l2 = r.stats.rel_l2;
        });
        REQUIRE(!pv_rel_l2.empty());
        if (mma_rel_l2 >= 0.0)
            for (const double rel_l2 : pv_rel_l2)
                CHECK_MESSAGE(rel_l2 <= kLongContextErrorRatio * mma_rel_l2,
                              "the FP8 P V's accumulation loses precision over long key ranges");
    }
}

namespace {

// A form of the two-CTA kernel (`form`) runs the same products, exchange and softmax on the same
// values as wgmma_bf16c2_d512, only issued in another order (kernels/hopper/bf16c2_d512/
// mainloop.cuh), so o and the LSE must be equal bit for bit: a difference would be a barrier or
// ring slot read at the wrong time in one of them. False when the bundle lacks either kernel on
// this GPU (both are candidates since 2026-12-06: -Dcandidate_kernels=wgmma_bf16c2_d512,FORM).
bool check_c2_form_bits(const char* form, uint64_t seed) {
    constexpr const char* kFree = "wgmma_bf16c2_d512";
    const std::vector<std::string> kernels = runnable_prefill_kernels(WIDEATTN_DTYPE_BF16, WIDEATTN_DTYPE_BF16);
    const auto has = [&](const char* name) { return std::find(kernels.begin(), kernels.end(), name) != kernels.end(); };
    if (!has(kFree) || !has(form)) return false;
    const ProblemSpec specs[] = {problem_spec({1000, 65, 1}, {777, 0, 3000}, 32, 4, 16, seed),
                                 problem_spec({4109}, {13}, 32, 4, 32, seed + 1),
                                 problem_spec({1, 5, 300, 0, 17}, {20000, 3000, 0, 50, 31}, 32, 4, 64, seed + 2),
                                 problem_spec({999}, {1234}, 8, 1, 48, seed + 3)};
    for (const ProblemSpec& spec : specs) {
        CAPTURE(spec.describe());
        HostProblem host;
        DeviceProblem device;
        REQUIRE(make_problem(spec, &host).empty());
        REQUIRE(device.create(*gpu().device, host, WIDEATTN_DTYPE_BF16).empty());
        std::vector<unsigned char> o[2];
        std::vector<double> lse[2];
        const char* const names[2] = {kFree, form};
        for (int i = 0; i < 2; ++i) {
            const KernelRestriction only(names[i]);
            const std::string err = device.run(*gpu().device, gpu().ctx);
            REQUIRE_MESSAGE(err.empty(), err);
            REQUIRE(device.download_raw(&o[i]).empty());
            REQUIRE(device.download_lse(host, &lse[i]).empty());
        }
        const bool same = o[0] == o[1] && lse[0] == lse[1];
        std::printf("  %s / %s %-60s %s\n", kFree, form, spec.describe().c_str(), same ? "bit-identical" : "DIFFERENT");
        if (!same) {
            // Where they part: the count of differing output elements, the largest difference and
            // the first differing element's token, head and dim; the largest LSE difference.
            std::vector<double> dense[2];
            for (int i = 0; i < 2; ++i) device.dense_output(host, o[i], &dense[i]);
            const int64_t row = static_cast<int64_t>(spec.num_q_heads) * spec.head_dim;
            int64_t differing = 0, first = -1;
            double largest = 0.0, lse_largest = 0.0;
            for (size_t e = 0; e < dense[0].size(); ++e)
                if (dense[0][e] != dense[1][e]) {
                    ++differing;
                    if (first < 0) first = static_cast<int64_t>(e);
                    largest = std::max(largest, std::fabs(dense[0][e] - dense[1][e]));
                }
            for (size_t e = 0; e < lse[0].size(); ++e) lse_largest = std::max(lse_largest, std::fabs(lse[0][e] - lse[1][e]));
            std::printf("    %lld of %zu elements differ, largest %.3e; first: token %lld head %lld dim %lld; LSE largest %.3e\n",
                        static_cast<long long>(differing), dense[0].size(), largest,
                        static_cast<long long>(first < 0 ? -1 : first / row),
                        static_cast<long long>(first < 0 ? -1 : first % row / spec.head_dim),
                        static_cast<long long>(first < 0 ? -1 : first % spec.head_dim), lse_largest);
        }
        CHECK(o[0] == o[1]);
        CHECK(lse[0] == lse[1]);
    }
    return true;
}

}  // namespace

TEST_CASE("gpu wgmma_bf16c2 forms: wgmma_bf16c2pp_d512 writes the bits of wgmma_bf16c2_d512") {
    const uint64_t seed = fresh_seed() * 1000 + 900;
    for (const char* form : {"wgmma_bf16c2pp_d512"}) {
        CAPTURE(form);
        if (!check_c2_form_bits(form, seed))
            MESSAGE("skipped: the candidates wgmma_bf16c2_d512 and " << form << " are not both in this bundle on this "
                    "GPU (-Dcandidate_kernels=wgmma_bf16c2_d512," << form << ")");
    }
}
