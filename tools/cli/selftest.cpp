// selftest.cpp - `wideattn selftest`: on a GPU, runs every kernel the device supports on
// random inputs (outputs poisoned first) against the fp64 reference and prints error
// statistics; exits non-zero when any case fails.
#include <algorithm>
#include <chrono>
#include <climits>
#include <cstdio>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "kernels/common/kernel_desc.h"
#include "tools/cli/cli_common.h"
#include "tools/harness/checks.h"
#include "tools/harness/quantize_check.h"
#include "tools/harness/scale_check.h"
#include "tools/cli/subcommands.h"

namespace wideattn::cli {
namespace {

constexpr size_t kQuickCases = 2;  // --quick: the two smallest cases per dtype combination
constexpr long long kMaxQuickCases = INT_MAX;
constexpr long long kMaxSeed = LLONG_MAX;

struct NamedSpec {
    const char* label;
    ProblemSpec spec;
};

// Small enough for the CPU reference; not multiples of any tile.
std::vector<NamedSpec> reference_cases(uint64_t seed) {
    std::vector<NamedSpec> cases = {
        {"prompt 65", problem_spec({65}, {0}, 8, 1, 16, seed)},
        {"mixed batch", problem_spec({1, 7, 0, 130, 64}, {0, 777, 5, 1, 33}, 16, 2, 32, seed + 1)},
        {"context+outlier", problem_spec({300}, {200}, 8, 1, 128, seed + 2)},
        {"group 4, D 256", problem_spec({37, 20}, {11, 0}, 8, 2, 16, seed + 3)},
    };
    cases[1].spec.q_token_pad = 8;
    cases[2].spec.k_outlier = 8.0f;
    cases[3].spec.head_dim = 256;
    return cases;
}

std::vector<NamedSpec> gemma_cases(uint64_t seed);

// Larger shapes for the fast kernels, checked against the fp64 GPU kernel.
std::vector<NamedSpec> kernel_cases(uint64_t seed) {
    std::vector<NamedSpec> cases = {
        {"decode-like q=1", problem_spec({1}, {777}, 32, 4, 16, seed)},
        {"prompt 1000", problem_spec({1000}, {0}, 32, 4, 16, seed + 1)},
        {"chunk 65 @ 8192", problem_spec({65}, {8192}, 32, 4, 32, seed + 2)},
        {"mixed batch", problem_spec({1, 7, 0, 63, 64}, {0, 777, 5, 1, 8192}, 32, 4, 128, seed + 3)},
        {"TP=4 rank + outlier", problem_spec({4109}, {1}, 8, 1, 16, seed + 4)},
    };
    cases[3].spec.q_token_pad = 8;
    cases[4].spec.k_outlier = 8.0f;
    for (NamedSpec& c : gemma_cases(seed + 5)) cases.push_back(c);
    return cases;
}

// Inputs as Gemma 4's global layers produce them at softmax scale 1.0 (QK-normed Q/K with Q RMS
// 0.3 .. 1.0, K outlier channels x20 .. x60, V with a large common offset, long contexts); bf16
// kernels must also stay within kPeakedFloorRatio of the output rounding floor on these.
std::vector<NamedSpec> gemma_cases(uint64_t seed) {
    std::vector<NamedSpec> cases = {
        {"gemma q0.3 prompt", problem_spec({1500}, {0}, 32, 4, 16, seed)},
        {"gemma q0.5 chunk", problem_spec({384}, {3700}, 32, 4, 32, seed + 1)},
        {"gemma q1.0 outlier", problem_spec({700, 1}, {0, 5000}, 32, 4, 16, seed + 2)},
        {"gemma outlier+v off", problem_spec({1200}, {300}, 8, 1, 16, seed + 3)},
    };
    cases[0].spec.gemma.q_rms = 0.3f;
    cases[1].spec.gemma.q_rms = 0.5f;
    cases[2].spec.gemma.q_rms = 1.0f;
    cases[2].spec.gemma.k_outlier_channels = 2;
    cases[2].spec.gemma.k_outlier_gain = 60.0f;
    cases[3].spec.gemma.q_rms = 0.5f;
    cases[3].spec.gemma.k_outlier_channels = 1;
    cases[3].spec.gemma.k_outlier_gain = 20.0f;
    cases[3].spec.gemma.v_offset_rms = 8.0f;
    return cases;
}

// Single-token decode cases for a kernel that serves only K-from-V calls (feature k_from_v_only):
// V-only caches of the kernel's K/V dtype (e4m3 when `e4m3_kv`, else bf16), key counts no multiple
// of 16, shuffled pages, with the rotated dims of each case's description (Gemma 4's 128, or every
// dim, whose angles reach the key positions in rad), and one with a cos / sin table of another theta
// (kCosSinOtherTheta) over its first cos_sin_rows positions, the keys past them by the formula.
struct KFromVCase {
    const char* label;
    ProblemSpec spec;
    int32_t rotary_dims;
    KNormWeights weights;
    int32_t cos_sin_rows = 0;  // rows of the case's cos / sin table; 0: none
};
constexpr float kCosSinOtherTheta = 1.0e4f;

std::vector<KFromVCase> k_from_v_cases(uint64_t seed, bool e4m3_kv) {
    constexpr int32_t kEveryDim = 512;
    std::vector<KFromVCase> cases = {
        // bf16 weights (a checkpoint's) first: `--quick 1` runs the model's path.
        {"kfv decode batch", problem_spec({1, 1, 1, 1}, {777, 36, 4109, 0}, 32, 4, 16, seed), kGemma4GlobalRotaryDims,
         KNormWeights::kBf16},
        {"kfv every dim", problem_spec({1, 1}, {1000, 5000}, 32, 4, 32, seed + 1), kEveryDim, KNormWeights::kFp32},
        {"kfv long 100k", problem_spec({1}, {100007}, 32, 4, 64, seed + 2), kEveryDim, KNormWeights::kBf16},
        {"kfv gemma v off", problem_spec({1, 1, 1}, {3700, 300, 20000}, 32, 4, 16, seed + 3), kGemma4GlobalRotaryDims,
         KNormWeights::kFp32},
        {"kfv cos_sin part", problem_spec({1, 1, 1}, {2500, 300, 20000}, 32, 4, 16, seed + 4), kGemma4GlobalRotaryDims,
         KNormWeights::kBf16, 4001},
    };
    cases[3].spec.gemma.q_rms = 0.5f;
    cases[3].spec.gemma.v_offset_rms = 8.0f;
    for (KFromVCase& c : cases) c.spec.e4m3_kv = e4m3_kv;
    return cases;
}

void print_help() {
    std::printf(
        "usage: wideattn selftest [--bundle DIR] [--device N] [--seed S] [--quick [N]] [--kernels LIST]\n"
        "                         [--skip-without-gpu]\n\n"
        "Runs every kernel of the bundle that the device supports on fresh random inputs\n"
        "(outputs poisoned with NaN first; varlen batches, shuffled paged KV, context, odd sizes)\n"
        "and compares against the fp64 reference: the fp64 GPU kernel against the CPU reference\n"
        "(rel L2 <= %.0e), every other kernel against the fp64 GPU kernel (rel L2 <= %.0e, all\n"
        "outputs finite, bit-identical across two runs; on Gemma-like peaked inputs a bf16 kernel's\n"
        "mean abs error <= %.2f x that of the fp64 output rounded to bf16). A kernel that serves only\n"
        "K-from-V calls (WIDEATTN_FLAG_K_FROM_V) runs single-token decode cases in that mode over a\n"
        "V-only cache of its K/V dtype against the fp64 GPU kernel in the same mode (rel L2 <= %.0e\n"
        "over e4m3 V, %.0e over bf16 V), one of them with a cos / sin table (wideattn_k_from_v.cos_sin)\n"
        "of another theta over part of the keys. The K-from-V rebuild (k_from_v_rebuild) runs calls of\n"
        "several query tokens over a bf16 and an e4m3 V-only cache as wideattn_k_from_v_rebuild into a\n"
        "bf16 K + V scratch and the K + V call on it, against the fp64 GPU kernel in K-from-V mode\n"
        "(rel L2 <= %.0e, bit-identical reruns). Prints one line per case and a summary.\n"
        "Exit 0 when all pass, 1 when any fails, 2 on usage or setup errors.\n\n"
        "  --bundle DIR          bundle directory (default: $WIDEATTN_BUNDLE, the build tree's, the installed one)\n"
        "  --device N            CUDA device ordinal (default 0)\n"
        "  --seed S              base seed of the random inputs (default: time-based, printed)\n"
        "  --quick [N]           only the first N (default 2) cases per kernel (for compute-sanitizer runs)\n"
        "  --kernels LIST        only the checks of these kernels of the bundle (comma-separated names; the\n"
        "                        quantise checks with quantize_e4m3, the scale check with amax_e4m3 and\n"
        "                        quantize_e4m3, the rebuild checks with k_from_v_rebuild): a\n"
        "                        compute-sanitizer step on one kernel runs just its cases\n"
        "  --skip-without-gpu    exit 0 with a message when no driver/GPU is present (for scripts)\n",
        kFp64RelL2, kBf16RelL2, kPeakedFloorRatio, kE4m3KFromVDecodeRelL2,
        k_from_v_decode_rel_l2(WIDEATTN_DTYPE_BF16), kBf16RelL2);
}

// The command line of one run.
struct SelftestOptions {
    std::string bundle_flag;
    long long device = 0;
    long long seed = static_cast<long long>(std::chrono::system_clock::now().time_since_epoch().count() % 1000003);
    bool skip_without_gpu = false;
    bool quick = false;
    size_t quick_cases = kQuickCases;
    std::vector<std::string> kernels;  // --kernels: the names whose checks run (empty: every kernel)

    bool runs(const std::string& name) const {
        return kernels.empty() || std::find(kernels.begin(), kernels.end(), name) != kernels.end();
    }
};

constexpr int kContinue = -1;  // parse_options: go on with the run

// Reads the arguments into *o. Returns kContinue, or the exit status: 0 after --help, 2 on a
// usage error (printed).
int parse_options(int argc, char** argv, SelftestOptions* o) {
    ArgReader args("selftest", argc, argv);
    while (args.next()) {
        if (args.is("--help") || args.is("-h")) {
            print_help();
            return 0;
        } else if (args.is("--bundle")) {
            if (!args.value(&o->bundle_flag)) return 2;
        } else if (args.is("--device")) {
            if (!args.int_value(0, kMaxDeviceOrdinal, &o->device)) return 2;
        } else if (args.is("--seed")) {
            if (!args.int_value(0, kMaxSeed, &o->seed)) return 2;
        } else if (args.is("--kernels")) {
            std::string list;
            if (!args.value(&list)) return 2;
            std::stringstream names(list);
            std::string name;
            while (std::getline(names, name, ','))
                if (!name.empty()) o->kernels.push_back(name);
            if (o->kernels.empty()) {
                std::fprintf(stderr, "wideattn selftest: --kernels='%s' names no kernel\n", list.c_str());
                return 2;
            }
        } else if (args.is("--skip-without-gpu")) {
            o->skip_without_gpu = true;
        } else if (args.is("--quick")) {
            o->quick = true;
            if (const char* count_text = args.optional_value()) {
                long long count = 0;
                if (!parse_int("selftest", "--quick", count_text, 1, kMaxQuickCases, &count)) return 2;
                o->quick_cases = static_cast<size_t>(count);
            }
        } else {
            args.report_unknown();
            return 2;
        }
    }
    return kContinue;
}

// Cases that passed and failed.
struct Tally {
    int passed = 0, failed = 0;
    void count(bool ok) { (ok ? passed : failed)++; }
};

// Runs one prefill kernel (already selected by name) on its cases and prints a line each.
void check_prefill_kernel(const GpuDevice& gpu, wideattn_context* ctx, const SelftestOptions& o,
                          const RunnableKernel& combo, Tally* tally) {
    const int32_t q_dtype = combo.q_dtype, kv_dtype = combo.kv_dtype, o_dtype = combo.o_dtype;
    const bool is_reference = o_dtype == WIDEATTN_DTYPE_F64;
    const bool is_e4m3 = kv_dtype == WIDEATTN_DTYPE_E4M3;
    const bool is_e4m3_q = q_dtype == WIDEATTN_DTYPE_E4M3;
    std::vector<NamedSpec> cases = is_reference ? reference_cases(o.seed) : kernel_cases(o.seed);
    for (NamedSpec& c : cases) {
        c.spec.e4m3_kv = is_e4m3;
        c.spec.e4m3_q = is_e4m3_q;
        c.spec.v_transposed = combo.v_transposed;
        if (is_e4m3_q && c.spec.q_token_pad % kE4m3QPadMultiple != 0) c.spec.q_token_pad = kE4m3QPadMultiple;
    }
    if (o.quick) cases.resize(std::min(cases.size(), o.quick_cases));
    for (const NamedSpec& c : cases) {
        const auto start = std::chrono::steady_clock::now();
        const CaseResult r =
            run_case(gpu, ctx, c.spec, o_dtype, is_reference ? ReferenceKind::kCpu : ReferenceKind::kGpuF64);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const bool peaked_check = c.spec.gemma.enabled() && !is_reference && !is_e4m3 && !is_e4m3_q;
        bool ok = r.error.empty();
        if (ok) {
            ok = r.stats.nonfinite == 0 && r.lse_nonfinite == 0 && r.deterministic &&
                 r.stats.rel_l2 <= (is_reference ? kFp64RelL2 : is_e4m3 ? kE4m3RelL2 : kBf16RelL2) &&
                 (is_e4m3 || r.lse_max_abs <= (is_reference ? kFp64LseAbs : kFp32LseAbs)) &&
                 (!peaked_check || floor_ratio(r) <= kPeakedFloorRatio);
        }
        std::printf("%s %-14s %-20s %s\n", ok ? "PASS" : "FAIL", r.kernel.empty() ? "?" : r.kernel.c_str(), c.label,
                    c.spec.describe().c_str());
        if (r.error.empty())
            std::printf("     %s lse_max_abs=%.2e floor=%.3e (x%.3f%s)%s (%.1fs)\n",
                        accuracy::format_error_stats(r.stats).c_str(), r.lse_max_abs, r.floor_mean_abs,
                        floor_ratio(r), peaked_check ? ", bound" : "",
                        r.deterministic ? "" : " NOT bit-identical across runs", seconds);
        else
            std::printf("     error: %s\n", r.error.c_str());
        tally->count(ok);
    }
}

// The second line of a K-from-V case: its error statistics, LSE error and time, or its error.
void print_case_details(const CaseResult& r, double seconds) {
    if (r.error.empty())
        std::printf("     %s lse_max_abs=%.2e%s (%.1fs)\n", accuracy::format_error_stats(r.stats).c_str(), r.lse_max_abs,
                    r.deterministic ? "" : " NOT bit-identical across runs", seconds);
    else
        std::printf("     error: %s\n", r.error.c_str());
}

// One of k_from_v_cases through the kernel ctx selects for o_dtype, against the fp64 GPU kernel in
// the same mode (reading the same cos / sin table when the case has one).
CaseResult run_k_from_v_selftest_case(const GpuDevice& gpu, wideattn_context* ctx, const KFromVCase& c,
                                      int32_t o_dtype) {
    if (!c.cos_sin_rows) return run_k_from_v_case(gpu, ctx, c.spec, o_dtype, c.rotary_dims, c.weights);
    CaseResult result;
    HostProblem h;
    wideattn_k_from_v other = k_from_v_check_description(nullptr, c.rotary_dims);
    other.rope_theta = kCosSinOtherTheta;
    std::vector<uint32_t> table;
    if ((result.error = make_problem(c.spec, &h)).size() ||
        (result.error = k_from_v_cos_sin_table(other, c.spec.head_dim, c.cos_sin_rows, &table)).size())
        return result;
    return run_k_from_v_problem(gpu, ctx, h, o_dtype, c.rotary_dims, {}, c.weights, table);
}

// A kernel that serves only K-from-V calls (already selected by name) on k_from_v_cases: each
// a K-from-V call against the fp64 GPU kernel in the same mode.
void check_k_from_v_kernel(const GpuDevice& gpu, wideattn_context* ctx, const SelftestOptions& o,
                           const RunnableKernel& combo, Tally* tally) {
    std::vector<KFromVCase> cases = k_from_v_cases(o.seed, combo.kv_dtype == WIDEATTN_DTYPE_E4M3);
    if (o.quick) cases.resize(std::min(cases.size(), o.quick_cases));
    for (const KFromVCase& c : cases) {
        const auto start = std::chrono::steady_clock::now();
        const CaseResult r = run_k_from_v_selftest_case(gpu, ctx, c, combo.o_dtype);
        const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
        const bool ok = r.error.empty() && r.kernel == combo.name && r.stats.nonfinite == 0 && r.lse_nonfinite == 0 &&
                        r.deterministic && r.stats.rel_l2 <= k_from_v_decode_rel_l2(combo.kv_dtype);
        const std::string table =
            c.cos_sin_rows ? ", a cos / sin table of " + std::to_string(c.cos_sin_rows) + " rows" : std::string();
        std::printf("%s %-14s %-20s %s, K from V, rotary_dims=%d, %s k_norm weights%s\n", ok ? "PASS" : "FAIL",
                    r.kernel.empty() ? "?" : r.kernel.c_str(), c.label, c.spec.describe().c_str(), c.rotary_dims,
                    c.weights == KNormWeights::kBf16 ? "bf16" : "fp32", table.c_str());
        print_case_details(r, seconds);
        tally->count(ok);
    }
}

// The e4m3 quantise-into-cache kernel: bit-exact against the CPU reference, in the engine layout
// or (v_transposed) the transposed V layout.
void check_quantize(const GpuDevice& gpu, wideattn_context* ctx, const SelftestOptions& o, bool v_transposed,
                    Tally* tally) {
    const QuantizeCaseResult q = run_quantize_case(gpu, ctx, static_cast<uint64_t>(o.seed), v_transposed);
    const bool ok = q.error.empty() && q.mismatches == 0 && q.nonfinite_device == q.nonfinite_reference;
    std::printf("%s %-14s %-20s bf16 -> e4m3 paged cache%s, NaN/inf and saturating inputs\n", ok ? "PASS" : "FAIL",
                q.kernel.empty() ? "quantize_e4m3" : q.kernel.c_str(), "quantize to cache",
                v_transposed ? " (transposed V layout)" : "");
    if (q.error.empty())
        std::printf("     %lld of %lld cache bytes differ from the CPU reference; nonfinite %d (reference %lld)\n",
                    static_cast<long long>(q.mismatches), static_cast<long long>(q.cache_bytes), q.nonfinite_device,
                    static_cast<long long>(q.nonfinite_reference));
    else
        std::printf("     error: %s\n", q.error.c_str());
    tally->count(ok);
}

// The prefill path of K from V (kernel k_from_v_rebuild): calls of several query tokens per
// sequence over a bf16 and an e4m3 V-only cache, their keys rebuilt into a bf16 K + V scratch and
// run as K + V calls on the kernel the dispatcher picks, against the fp64 GPU kernel in K-from-V
// mode (the bf16 kernels' bound on O; bit-identical reruns).
void check_k_from_v_rebuild(const GpuDevice& gpu, wideattn_context* ctx, const SelftestOptions& o, Tally* tally) {
    const auto seed = static_cast<uint64_t>(o.seed);
    std::vector<NamedSpec> cases = {
        {"kfv rebuild varlen", problem_spec({1, 7, 0, 63, 300}, {0, 777, 5, 1, 4000}, 32, 4, 16, seed + 40)},
        {"kfv rebuild chunk", problem_spec({1000}, {3000}, 32, 4, 64, seed + 41)},
    };
    cases[1].spec.gemma.q_rms = 0.5f;  // QK-normed Gemma-like inputs
    if (o.quick) cases.resize(std::min(cases.size(), o.quick_cases));
    for (const bool e4m3 : {false, true}) {
        for (NamedSpec c : cases) {
            c.spec.e4m3_kv = e4m3;
            const auto start = std::chrono::steady_clock::now();
            const CaseResult r = run_k_from_v_rebuild_case(gpu, ctx, c.spec, kGemma4GlobalRotaryDims);
            const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
            // No LSE bound, as for the K-from-V decode kernels: the fp64 kernel's K takes cos / sin
            // from cosf / sinf, the rebuild from rope_cos_sin_reduced, and where their bf16 values
            // part at a rounding tie a key moves by one ulp, which moves a peaked row's LSE by up to
            // a few 1e-3 (measured 1.0e-3 .. 4.4e-3, H200, 2026-12-04) while O stays in bound.
            const bool ok = r.error.empty() && r.stats.nonfinite == 0 && r.lse_nonfinite == 0 && r.deterministic &&
                            r.stats.rel_l2 <= kBf16RelL2;
            std::printf("%s %-14s %-20s %s\n", ok ? "PASS" : "FAIL",
                        r.kernel.empty() ? "k_from_v_rebuild" : r.kernel.c_str(), c.label, c.spec.describe().c_str());
            print_case_details(r, seconds);
            tally->count(ok);
        }
    }
}

// The per-tensor scale kernel feeding the quantise kernel on one stream, the flat Q
// destination and the scale's edge cases: bit-exact against the CPU reference.
void check_scale(const GpuDevice& gpu, wideattn_context* ctx, const SelftestOptions& o, Tally* tally) {
    const ScaleCaseResult s = run_scale_case(gpu, ctx, static_cast<uint64_t>(o.seed));
    const bool ok = s.error.empty() && s.failures.empty();
    std::printf("%s %-14s %-20s amax -> scale -> quantise, flat Q, all-zero/empty/all-NaN scales%s\n",
                ok ? "PASS" : "FAIL", s.kernel.empty() ? "amax_e4m3" : s.kernel.c_str(), "scale from amax",
                s.pow2_kernel.empty() ? "" : (", power-of-two scales (" + s.pow2_kernel + ")").c_str());
    if (!s.error.empty()) std::printf("     error: %s\n", s.error.c_str());
    for (const std::string& failure : s.failures) std::printf("     %s\n", failure.c_str());
    if (s.error.empty())
        std::printf("     %d comparisons with the CPU reference, %zu differ\n", s.comparisons, s.failures.size());
    tally->count(ok);
}

// Every check the bundle has kernels for on this device.
void run_checks(const GpuDevice& gpu, wideattn_context* ctx, const SelftestOptions& o, Tally* tally) {
    // One entry per prefill kernel the device can run (each tier of a dtype combination is
    // tested, selected by name), in manifest order.
    std::vector<RunnableKernel> combos;
    bool has_quantize = false, has_amax = false, has_rebuild = false;
    bool any_prefill = false;  // on this device, --kernels or not
    for (const RunnableKernel& k : runnable_kernels(ctx, gpu.cc_major(), gpu.cc_minor())) {
        any_prefill = any_prefill || k.kind == kKindPrefill;
        if (!o.runs(k.name)) continue;
        if (k.kind == kKindPrefill) combos.push_back(k);
        if (k.kind == kKindQuantizeE4m3) has_quantize = true;
        if (k.kind == kKindAmaxE4m3) has_amax = true;
        if (k.kind == kKindKFromVRebuild) has_rebuild = true;
    }
    if (!any_prefill) {
        std::printf("no kernel in the bundle runs on sm_%d%d\n", gpu.cc_major(), gpu.cc_minor());
        ++tally->failed;
    }
    for (const RunnableKernel& combo : combos) {
        if (wideattn_set_prefill_kernel(ctx, combo.name.c_str()) != WIDEATTN_OK) {
            std::printf("FAIL %-14s cannot select it: %s\n", combo.name.c_str(), wideattn_last_error());
            ++tally->failed;
            continue;
        }
        if (combo.k_from_v_only)
            check_k_from_v_kernel(gpu, ctx, o, combo, tally);
        else
            check_prefill_kernel(gpu, ctx, o, combo, tally);
    }
    wideattn_set_prefill_kernel(ctx, nullptr);
    if (has_quantize) {
        check_quantize(gpu, ctx, o, false, tally);
        check_quantize(gpu, ctx, o, true, tally);
    }
    if (has_amax && has_quantize) check_scale(gpu, ctx, o, tally);
    if (has_rebuild) check_k_from_v_rebuild(gpu, ctx, o, tally);
    if (!o.kernels.empty() && combos.empty() && !has_quantize && !has_amax && !has_rebuild)
        std::printf("note: no check of --kernels runs on sm_%d%d\n", gpu.cc_major(), gpu.cc_minor());
}

// The names of --kernels that the bundle has no kernel of (on any arch), comma-separated.
std::string unknown_kernels(const wideattn_context* ctx, const SelftestOptions& o) {
    std::string unknown;
    for (const std::string& name : o.kernels) {
        wideattn_kernel_info info{};
        if (!find_kernel_info(ctx, name, &info)) unknown += (unknown.empty() ? "" : ",") + name;
    }
    return unknown;
}

}  // namespace

int selftest_main(int argc, char** argv) {
    SelftestOptions o;
    if (const int status = parse_options(argc, argv, &o); status != kContinue) return status;
    wideattn_context* ctx = open_bundle(resolve_bundle_dir(o.bundle_flag, argv[0]), "selftest");
    if (!ctx) return 2;
    if (const std::string unknown = unknown_kernels(ctx, o); !unknown.empty()) {
        std::fprintf(stderr, "wideattn selftest: --kernels: the bundle %s has no kernel named %s\n",
                     wideattn_bundle_dir(ctx), unknown.c_str());
        wideattn_close(ctx);
        return 2;
    }
    wideattn_status status;
    std::string error;
    std::unique_ptr<GpuDevice> gpu = GpuDevice::open(static_cast<int>(o.device), &status, &error);
    if (!gpu) {
        wideattn_close(ctx);
        std::fprintf(o.skip_without_gpu ? stdout : stderr, "wideattn selftest: %s: %s\n",
                     o.skip_without_gpu ? "skipped, no GPU" : wideattn_status_string(status), error.c_str());
        return o.skip_without_gpu ? 0 : 2;
    }
    std::printf("selftest on %s (sm_%d%d), bundle %s, seed %lld\n", gpu->name().c_str(), gpu->cc_major(),
                gpu->cc_minor(), wideattn_bundle_dir(ctx), o.seed);
    Tally tally;
    run_checks(*gpu, ctx, o, &tally);
    wideattn_close(ctx);
    std::printf("selftest: %d passed, %d failed\n", tally.passed, tally.failed);
    return tally.failed ? 1 : 0;
}

}  // namespace wideattn::cli
