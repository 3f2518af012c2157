// tune.cpp - `wideattn tune`: on the user's GPU, times every bundled prefill kernel that serves
// each shape class and dtype combination on the bench suites' cases (prefill and decode),
// side by side and interleaved, and writes the tuning file the dispatcher follows
// (dispatch/tuning.h, docs/design.md "Tuning file"). A single_token kernel is timed only on cases
// of one query token per sequence (decode_single), a few_tokens kernel only on cases of at most 8
// per sequence (decode_single and decode): the only calls each serves on its own.
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "dispatch/tuning.h"
#include "kernels/common/kernel_desc.h"
#include "tools/cli/bench_suite.h"
#include "tools/cli/cli_common.h"
#include "tools/cli/subcommands.h"
#include "tools/harness/checks.h"

namespace wideattn::cli {
namespace {

constexpr int kDefaultTuneReps = 10;
constexpr int kDefaultTuneWarmup = 2;
constexpr int kExitNoGpu = 2;

struct TuneOptions {
    std::string bundle_flag, cases_flag, out_path;
    bool cases_given = false;  // --cases was on the command line (even as an empty list)
    long long device = 0, reps = kDefaultTuneReps, warmup = kDefaultTuneWarmup;
};

// One dtype combination of the bundle's prefill kernels (bf16 output; the fp64 reference is a
// yardstick, not a candidate).
struct Combo {
    int32_t q_dtype, kv_dtype;
    std::vector<std::string> kernels;  // every bundled kernel of these dtypes
};

void print_help() {
    std::printf(
        "usage: wideattn tune [--bundle DIR] [--device N] [--cases A,B,...] [--reps N] [--warmup N]\n"
        "                     [--out FILE]\n\n"
        "On this GPU, times every prefill kernel of the bundle that serves each shape class\n"
        "(decode_single: total_q <= num_seqs; decode: total_q <= 8 * num_seqs; prefill_short:\n"
        "total_q < 8192; prefill_long: the rest; chunked prefill and mixed batches fall into these\n"
        "by total_q) and dtype combination (q/kv, bf16 output) on the bench cases of that class,\n"
        "side by side and interleaved (each repetition runs every candidate once, in a rotating\n"
        "order), printing the timings as it goes. A kernel with the single_token feature (the decode\n"
        "kernels) is a candidate on decode_single cases only, one with the few_tokens feature (the\n"
        "verify kernels) on decode_single and decode cases: the calls each serves on its own.\n"
        "Per class and dtypes it chooses the kernel with the smallest sum of per-case median\n"
        "times and writes the tuning file: device name, compute capability, driver version, the\n"
        "bundle's checksum, and per class the chosen kernel with the timings behind it. The\n"
        "dispatcher follows it on this device with this bundle (wideattn inspect shows its state).\n\n"
        "  --bundle DIR   bundle directory (default: $WIDEATTN_BUNDLE, the build tree's, the installed one)\n"
        "  --device N     CUDA device ordinal (default 0)\n"
        "  --cases LIST   comma-separated case names of `wideattn bench --list` (default: the prefill\n"
        "                 suite and decode_32_ctx_16k, decode_64_ctx_4k (decode_single),\n"
        "                 verify4_16_ctx_8k (decode); an empty list or name is refused)\n"
        "  --reps N       timed repetitions per case (default %d, 1..%lld)\n"
        "  --warmup N     untimed runs of each candidate first (default %d, 0..%lld)\n"
        "  --out FILE     the tuning file to write (default: tuning.json beside the bundle's\n"
        "                 manifest.json, where the dispatcher looks when WIDEATTN_TUNING is unset)\n\n"
        "Without a GPU it exits with status 2.\n",
        kDefaultTuneReps, kMaxReps, kDefaultTuneWarmup, kMaxReps);
}

constexpr int kContinue = -1;

int parse_options(int argc, char** argv, TuneOptions* o) {
    ArgReader args("tune", argc, argv);
    while (args.next()) {
        if (args.is("--help") || args.is("-h")) {
            print_help();
            return 0;
        } else if (args.is("--bundle")) {
            if (!args.value(&o->bundle_flag)) return 2;
        } else if (args.is("--cases")) {
            if (!args.value(&o->cases_flag)) return 2;
            o->cases_given = true;
        } else if (args.is("--out")) {
            if (!args.value(&o->out_path)) return 2;
        } else if (args.is("--device")) {
            if (!args.int_value(0, kMaxDeviceOrdinal, &o->device)) return 2;
        } else if (args.is("--reps")) {
            if (!args.int_value(1, kMaxReps, &o->reps)) return 2;
        } else if (args.is("--warmup")) {
            if (!args.int_value(0, kMaxReps, &o->warmup)) return 2;
        } else {
            args.report_unknown();
            return 2;
        }
    }
    return kContinue;
}

// The cases of --cases among the prefill and decode suites (without --cases the prefill suite and
// the three cases of gemma4_decode_suite, two single-token and one verification step, which keeps
// a tune within one 10-minute device call); false after printing an unknown or empty name.
bool tune_cases(const TuneOptions& o, std::vector<BenchCase>* out) {
    if (!o.cases_given) {
        *out = gemma4_suite();
        for (const BenchCase& c : gemma4_decode_suite()) out->push_back(c);
        return true;
    }
    return named_cases(o.cases_flag, "tune", "wideattn bench --list", out);
}

// The bundle's bf16-output prefill kernels grouped by q/kv dtypes (names in manifest order, once).
std::vector<Combo> bundle_combos(const wideattn_context* ctx) {
    std::vector<Combo> combos;
    for (int i = 0; i < wideattn_kernel_count(ctx); ++i) {
        wideattn_kernel_info info{};
        wideattn_get_kernel_info(ctx, i, &info);
        if (std::string(info.kind) != "prefill" || info.o_dtype != WIDEATTN_DTYPE_BF16) continue;
        auto combo = std::find_if(combos.begin(), combos.end(), [&](const Combo& c) {
            return c.q_dtype == info.q_dtype && c.kv_dtype == info.kv_dtype;
        });
        if (combo == combos.end()) combo = combos.insert(combos.end(), Combo{info.q_dtype, info.kv_dtype, {}});
        if (std::find(combo->kernels.begin(), combo->kernels.end(), info.name) == combo->kernels.end())
            combo->kernels.push_back(info.name);
    }
    return combos;
}

// The kernels of `combo` that serve params `p` on this device (each pinned in turn). Pinning lifts
// the token-count rules of selection, so a single_token or few_tokens kernel is left out here for
// a call with more query tokens per sequence than it serves on its own (one block per token, or
// per 8, on a long prompt would take seconds a run).
std::vector<std::string> candidates(wideattn_context* ctx, const GpuDevice& gpu, const Combo& combo,
                                    const wideattn_prefill_params& p) {
    std::vector<std::string> out;
    for (const std::string& name : combo.kernels) {
        if (!kernel_serves_alone(ctx, name, p.total_q, p.num_seqs)) continue;
        int32_t index = -1;
        if (wideattn_set_prefill_kernel(ctx, name.c_str()) == WIDEATTN_OK &&
            wideattn_is_supported(ctx, &p, gpu.cc_major(), gpu.cc_minor(), &index) == WIDEATTN_OK)
            out.push_back(name);
    }
    wideattn_set_prefill_kernel(ctx, nullptr);
    return out;
}

// Times each of `kernels` on one case's params: warm-up runs of each, then `reps` rounds that run
// every kernel once, the order rotated by one per round. *medians[k] is kernel k's median.
std::string time_interleaved(wideattn_context* ctx, const GpuDevice& gpu, const TuneOptions& o,
                             const wideattn_prefill_params& p, const std::vector<std::string>& kernels,
                             std::vector<Timing>* timings) {
    const auto launch = [&]() -> std::string {
        if (wideattn_prefill(ctx, &p, nullptr) != WIDEATTN_OK) return wideattn_last_error();
        return {};
    };
    std::vector<std::vector<float>> ms(kernels.size());
    std::string err;
    for (size_t k = 0; err.empty() && k < kernels.size(); ++k) {
        wideattn_set_prefill_kernel(ctx, kernels[k].c_str());
        Timing ignored;
        if (o.warmup > 0) err = time_launches(gpu, 0, static_cast<int>(o.warmup), launch, &ignored);
    }
    for (long long rep = 0; err.empty() && rep < o.reps; ++rep) {
        for (size_t step = 0; err.empty() && step < kernels.size(); ++step) {
            const size_t k = (step + static_cast<size_t>(rep)) % kernels.size();
            wideattn_set_prefill_kernel(ctx, kernels[k].c_str());
            Timing one;
            err = time_launches(gpu, 0, 1, launch, &one);
            if (err.empty()) ms[k].push_back(static_cast<float>(one.median_ms));
        }
    }
    wideattn_set_prefill_kernel(ctx, nullptr);
    if (!err.empty()) return err;
    timings->clear();
    for (const std::vector<float>& each : ms) timings->push_back(summarize(each));
    return {};
}

// The timings of one class and dtype combination as the run goes: per kernel, its cases.
using ClassKey = std::pair<ShapeClass, std::pair<int32_t, int32_t>>;

std::string combo_label(const Combo& c) {
    return std::string(dtype_label(c.q_dtype)) + "/" + dtype_label(c.kv_dtype);
}

// Times case `c` for every combination, printing a line per kernel and adding the medians to
// *results. Returns the number of failures.
int tune_case(wideattn_context* ctx, const GpuDevice& gpu, const TuneOptions& o, const BenchCase& bc, size_t c,
              const std::vector<Combo>& combos, const InputPools& pools,
              std::map<ClassKey, std::map<std::string, TuningTiming>>* results) {
    const HostProblem h = bench_problem(bc, c);
    const ShapeClass shape = shape_class_of(h.cu_seqlens_q.back(), static_cast<int32_t>(bc.q_lens.size()));
    int failures = 0;
    for (const Combo& combo : combos) {
        const BenchVariant variant{"", combo.kv_dtype == WIDEATTN_DTYPE_E4M3, combo.q_dtype == WIDEATTN_DTYPE_E4M3};
        CaseBuffers b;
        std::string err = upload_case(gpu, h, c, variant, false, pools, &b);
        const wideattn_prefill_params p = case_params(h, b, variant, false);
        const std::vector<std::string> kernels = err.empty() ? candidates(ctx, gpu, combo, p) : std::vector<std::string>();
        std::vector<Timing> timings;
        if (err.empty() && !kernels.empty()) err = time_interleaved(ctx, gpu, o, p, kernels, &timings);
        if (!err.empty()) {
            std::printf("%-18s %-13s %-9s error: %s\n", bc.name.c_str(), shape_class_name(shape),
                        combo_label(combo).c_str(), err.c_str());
            ++failures;
            continue;
        }
        for (size_t k = 0; k < kernels.size(); ++k) {
            std::printf("%-18s %-13s %-9s %-18s %10.3f %10.3f %10.3f\n", bc.name.c_str(), shape_class_name(shape),
                        combo_label(combo).c_str(), kernels[k].c_str(), timings[k].median_ms, timings[k].min_ms,
                        timings[k].p90_ms);
            TuningTiming& t = (*results)[{shape, {combo.q_dtype, combo.kv_dtype}}][kernels[k]];
            t.kernel = kernels[k];
            t.total_ms += timings[k].median_ms;
            t.case_ms.emplace_back(bc.name, timings[k].median_ms);
        }
        std::fflush(stdout);
    }
    return failures;
}

// The choices from the results: per class and dtypes, the kernel of the smallest total among
// those timed on every case of the class.
std::vector<TuningChoice> choose(const std::map<ClassKey, std::map<std::string, TuningTiming>>& results) {
    std::vector<TuningChoice> choices;
    std::printf("\n%-13s %-9s %-18s %10s  %s\n", "class", "q/kv", "chosen", "total_ms", "candidates (total_ms)");
    for (const auto& [key, by_kernel] : results) {
        TuningChoice choice;
        choice.shape_class = key.first;
        choice.q_dtype = key.second.first;
        choice.kv_dtype = key.second.second;
        size_t most_cases = 0;
        for (const auto& entry : by_kernel) most_cases = std::max(most_cases, entry.second.case_ms.size());
        const TuningTiming* best = nullptr;
        std::string listed;
        for (const auto& [name, timing] : by_kernel) {
            choice.timings.push_back(timing);
            char item[96];
            std::snprintf(item, sizeof item, "%s%s %.3f", listed.empty() ? "" : ", ", name.c_str(), timing.total_ms);
            listed += item;
            if (timing.case_ms.size() == most_cases && (!best || timing.total_ms < best->total_ms)) best = &timing;
        }
        choice.kernel = best->kernel;
        std::printf("%-13s %-9s %-18s %10.3f  %s\n", shape_class_name(choice.shape_class),
                    (std::string(dtype_label(choice.q_dtype)) + "/" + dtype_label(choice.kv_dtype)).c_str(),
                    choice.kernel.c_str(), best->total_ms, listed.c_str());
        choices.push_back(choice);
    }
    return choices;
}

// Writes the tuning file; false after printing why not.
bool write_tuning(const std::string& path, const TuningFile& file) {
    std::ofstream out(path);
    out << tuning_json(file);
    if (!out) {
        std::fprintf(stderr, "wideattn tune: cannot write --out '%s'\n", path.c_str());
        return false;
    }
    return true;
}

std::string utc_now() {
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    return date;
}

}  // namespace

int tune_main(int argc, char** argv) {
    TuneOptions o;
    if (const int status = parse_options(argc, argv, &o); status != kContinue) return status;
    std::vector<BenchCase> cases;
    if (!tune_cases(o, &cases)) return 2;
    // The candidates are pinned by name, so an existing tuning file (even a malformed one, which
    // this run replaces) plays no part.
    setenv(kTuningPathEnv, kTuningOff, 1);
    wideattn_context* ctx = open_bundle(resolve_bundle_dir(o.bundle_flag, argv[0]), "tune");
    if (!ctx) return 2;
    const std::string out_path = o.out_path.empty() ? std::string(wideattn_bundle_dir(ctx)) + "/" + kTuningFileName
                                                    : o.out_path;
    if (!output_writable("tune", "--out", out_path)) {
        wideattn_close(ctx);
        return 2;
    }
    wideattn_status status;
    std::string error;
    std::unique_ptr<GpuDevice> gpu = GpuDevice::open(static_cast<int>(o.device), &status, &error);
    if (!gpu) {
        std::fprintf(stderr, "wideattn tune: needs a GPU: %s: %s\n", wideattn_status_string(status), error.c_str());
        wideattn_close(ctx);
        return kExitNoGpu;
    }
    const std::vector<Combo> combos = bundle_combos(ctx);
    const bool any_e4m3 = std::any_of(combos.begin(), combos.end(), [](const Combo& c) { return c.kv_dtype == WIDEATTN_DTYPE_E4M3; });
    std::printf("tune on %s (sm_%d%d, driver %d), bundle %s (%s), %lld reps after %lld warm-up, interleaved\n",
                gpu->name().c_str(), gpu->cc_major(), gpu->cc_minor(), gpu->driver().version,
                wideattn_bundle_dir(ctx), wideattn_bundle_checksum(ctx), o.reps, o.warmup);
    std::printf("%-18s %-13s %-9s %-18s %10s %10s %10s\n", "case", "class", "q/kv", "kernel", "median_ms", "min_ms",
                "p90_ms");
    const InputPools pools = make_pools(any_e4m3);
    std::map<ClassKey, std::map<std::string, TuningTiming>> results;
    int failures = 0;
    for (size_t c = 0; c < cases.size(); ++c) failures += tune_case(ctx, *gpu, o, cases[c], c, combos, pools, &results);
    TuningFile file;
    file.device_name = gpu->name();
    file.cc_major = gpu->cc_major();
    file.cc_minor = gpu->cc_minor();
    file.driver_version = gpu->driver().version;
    file.bundle_checksum = wideattn_bundle_checksum(ctx);
    file.library_version = wideattn_version();
    file.date = utc_now();
    file.choices = choose(results);
    wideattn_close(ctx);
    if (failures) {
        std::fprintf(stderr, "wideattn tune: %d case(s) failed; no tuning file written\n", failures);
        return 1;
    }
    if (!write_tuning(out_path, file)) return 1;
    std::printf("wrote %s (%zu choices)\n", out_path.c_str(), file.choices.size());
    return 0;
}

}  // namespace wideattn::cli
