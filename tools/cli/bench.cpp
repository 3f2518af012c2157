// bench.cpp - `wideattn bench`: times the bundle's kernels on the Gemma 4 31B global-layer
// suite (docs/design.md section 7) with CUDA events, and measures the register-only mma.sync bf16
// rate in the same run (before and after) as the ceiling the results are compared with.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <ctime>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "accuracy/bf16.h"
#include "dispatch/bundle_files.h"
#include "fp8/codec/e4m3.h"
#include "tools/cli/bench_suite.h"
#include "tools/cli/cli_common.h"
#include "tools/harness/device_problem.h"
#include "tools/harness/problem.h"
#include "tools/cli/subcommands.h"

namespace wideattn::cli {
namespace {

constexpr int kDefaultReps = 20;
constexpr int kDefaultWarmup = 3;
constexpr int kPeakIterations = 4096;
constexpr uint64_t kMaxProbeBytes = uint64_t{1} << 30;
constexpr int kPeakBlocksPerSm = 4;
constexpr int kPeakThreads = 256;
constexpr int kPeakChains = 8;                       // must match tools/bench/mma_peak*.cu
constexpr const char* kProbeSubdir = "bench";        // build/tools/bench/: tools/bench/meson.build

// A throughput probe cubin built in kProbeSubdir beside the CLI (sources in tools/bench/).
struct PeakProbe {
    const char* stem;       // <stem>.<arch>.cubin
    const char* symbol;
    double flops_per_mma;   // one mma per warp
    int32_t streamed;       // e4m3 probe only: 1 = B from shared memory before every mma; -1 = no such argument
};
constexpr PeakProbe kBf16Probe = {"mma_peak", "wideattn_mma_peak", 2.0 * 16 * 8 * 16, -1};
constexpr PeakProbe kE4m3RegisterProbe = {"mma_peak_e4m3", "wideattn_mma_peak_e4m3", 2.0 * 16 * 8 * 32, 0};
constexpr PeakProbe kE4m3StreamedProbe = {"mma_peak_e4m3", "wideattn_mma_peak_e4m3", 2.0 * 16 * 8 * 32, 1};
constexpr uint16_t kNoNanE4m3Pair = 0x7777;  // clears bit 3 and 7 of both bytes: never the NaN code 0x7f

// Measures an mma.sync rate with one of the probes of tools/bench/ (default: the register-only
// bf16 rate of mma_peak.cu).
std::string measure_mma_peak(const GpuDevice& gpu, const std::string& cubin_dir, double* tflops,
                             const PeakProbe& probe = kBf16Probe) {
    const Driver& d = gpu.driver();
    const std::string arch = "sm_" + std::to_string(gpu.cc_major()) + std::to_string(gpu.cc_minor());
    std::string image, why;
    for (const std::string& name : {arch + "a", arch})
        if (read_regular_file(cubin_dir + "/" + probe.stem + "." + name + ".cubin", kMaxProbeBytes, &image, &why))
            break;
    if (image.empty()) return std::string("no ") + probe.stem + " cubin for " + arch + " in " + cubin_dir;
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    std::string err = gpu.check(d.cuModuleLoadData(&module, image.data()), "cuModuleLoadData(mma peak probe)");
    if (err.empty()) err = gpu.check(d.cuModuleGetFunction(&function, module, probe.symbol), "mma peak probe symbol");
    const int blocks = gpu.multiprocessors() * kPeakBlocksPerSm;
    DeviceBuffer operands, out;
    std::vector<uint16_t> random = random_bf16(32 * 6 * 2, 1.0f, 12345);
    if (probe.streamed >= 0)
        for (uint16_t& pair : random) pair &= kNoNanE4m3Pair;
    if (err.empty()) err = operands.allocate(gpu, random.size() * sizeof(uint16_t));
    if (err.empty()) err = operands.upload(random.data(), random.size() * sizeof(uint16_t));
    if (err.empty()) err = out.allocate(gpu, size_t{4} * blocks * kPeakThreads);
    void* operand_ptr = operands.get();
    void* out_ptr = out.get();
    int32_t iterations = kPeakIterations;
    int32_t streamed = probe.streamed;
    // The driver reads as many entries as the kernel has parameters: the bf16 probe ignores the last.
    void* args[] = {&operand_ptr, &out_ptr, &iterations, &streamed};
    Timing t;
    if (err.empty())
        err = time_launches(gpu, kDefaultWarmup, kDefaultReps,
                            [&] {
                                return gpu.check(d.cuLaunchKernel(function, blocks, 1, 1, kPeakThreads, 1, 1, 0,
                                                                  nullptr, args, nullptr),
                                                 "cuLaunchKernel(mma peak probe)");
                            },
                            &t);
    if (module) d.cuModuleUnload(module);
    if (!err.empty()) return err;
    const double flops = probe.flops_per_mma * kPeakChains * kPeakIterations * (double(blocks) * kPeakThreads / 32);
    *tflops = flops / (t.median_ms * 1e-3) / 1e12;
    return {};
}

std::string json_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

// The variants of this run: one from --kernel / --kv-dtype / --q-dtype, or one per name of
// --kernels with that kernel's dtypes from the manifest. Returns an error message or "".
std::string bench_variants(wideattn_context* ctx, const std::string& kernel_flag, const std::string& kernels_flag,
                           bool e4m3_kv, bool e4m3_q, std::vector<BenchVariant>* variants) {
    if (kernels_flag.empty()) {
        if (!kernel_flag.empty() && wideattn_set_prefill_kernel(ctx, kernel_flag.c_str()) != WIDEATTN_OK)
            return std::string("--kernel: ") + wideattn_last_error();
        variants->push_back(BenchVariant{kernel_flag, e4m3_kv, e4m3_q});
        return {};
    }
    std::stringstream list(kernels_flag);
    std::string name;
    while (std::getline(list, name, ',')) {
        if (name.empty()) return "--kernels='" + kernels_flag + "' has an empty name";
        if (wideattn_set_prefill_kernel(ctx, name.c_str()) != WIDEATTN_OK)
            return std::string("--kernels: ") + wideattn_last_error();
        for (int i = 0; i < wideattn_kernel_count(ctx); ++i) {
            wideattn_kernel_info info{};
            wideattn_get_kernel_info(ctx, i, &info);
            if (name != info.name) continue;
            if (info.o_dtype != WIDEATTN_DTYPE_BF16) return "--kernels: " + name + " does not write bf16 output";
            variants->push_back(BenchVariant{name, info.kv_dtype == WIDEATTN_DTYPE_E4M3,
                                             info.q_dtype == WIDEATTN_DTYPE_E4M3});
            break;
        }
    }
    wideattn_set_prefill_kernel(ctx, nullptr);
    if (variants->empty()) return "--kernels needs at least one kernel name";
    return {};
}

void print_help() {
    std::printf(
        "usage: wideattn bench [--bundle DIR] [--device N] [--cases A,B,...] [--reps N] [--warmup N]\n"
        "                      [--reference] [--kv-dtype bf16|e4m3] [--q-dtype bf16|e4m3] [--json FILE]\n"
        "                      [--kernel NAME | --kernels A,B,...] [--commit SHA] [--list]\n\n"
        "Times the bf16 kernel the dispatcher selects on the Gemma 4 31B global-layer suite\n"
        "(Hq 32, Hkv 4, D 512, page 16, shuffled block table; random inputs larger than L2) with\n"
        "CUDA events: warm-up, then the median of N timed runs. Counts causal FLOPs as\n"
        "4*D*Hq*(q_len*context + q_len*(q_len+1)/2) and reports TFLOP/s and the percentage of the\n"
        "register-only mma.sync bf16 rate, measured before and after the suite in the same run.\n\n"
        "  --bundle DIR   bundle directory (default: $WIDEATTN_BUNDLE, the build tree's, the installed one)\n"
        "  --device N     CUDA device ordinal (default 0)\n"
        "  --cases LIST   comma-separated case names (default: the prefill suite; --list also shows\n"
        "                 the decode cases, which run only when named)\n"
        "  --reps N       timed runs per case (default %d, 1..%lld)\n"
        "  --warmup N     untimed runs first (default %d, 0..%lld)\n"
        "  --reference    time the fp64 reference kernel (o_dtype f64) instead of the bf16 kernel\n"
        "  --kv-dtype T   bf16 (default) or e4m3: K/V cache as e4m3 codes with per-tensor scales; also\n"
        "                 measures the e4m3 mma.sync rate (register-only, and with B from shared memory)\n"
        "  --q-dtype T    bf16 (default) or e4m3 (with --kv-dtype e4m3): Q passed as e4m3 codes with a\n"
        "                 per-tensor scale, for the kernel that takes Q already quantised\n"
        "  --kernel NAME  time this prefill kernel instead of the one the dispatcher picks (e.g.\n"
        "                 mma_bf16_d512 on sm_90, where wgmma_bf16_d512 is picked by default)\n"
        "  --kernels LIST time several prefill kernels side by side in this one process, each case\n"
        "                 running every kernel in turn with inputs of that kernel's dtypes (e.g.\n"
        "                 mma_bf16_d512,wgmma_bf16_d512,wgmma_e4m3q_d512); not with --kernel,\n"
        "                 --kv-dtype, --q-dtype or --reference\n"
        "  --json FILE    also write the results as JSON\n"
        "  --commit SHA   recorded in the JSON\n"
        "  --list         print the case names and exit\n",
        kDefaultReps, kMaxReps, kDefaultWarmup, kMaxReps);
}

// The command line of one run.
struct BenchOptions {
    std::string bundle_flag, json_path, commit, cases_flag, kernel_flag, kernels_flag;
    bool reference = false;
    bool e4m3_kv = false, e4m3_q = false;
    long long device = 0, reps = kDefaultReps, warmup = kDefaultWarmup;
};

constexpr int kContinue = -1;  // parse_options: go on with the run

// Reads the arguments into *o. Returns kContinue, or the exit status: 0 after --help or --list,
// 2 on a usage error (printed).
int parse_options(int argc, char** argv, const std::vector<BenchCase>& suite, BenchOptions* o) {
    ArgReader args("bench", argc, argv);
    while (args.next()) {
        if (args.is("--help") || args.is("-h")) {
            print_help();
            return 0;
        } else if (args.is("--reference")) {
            o->reference = true;
        } else if (args.is("--kv-dtype") || args.is("--q-dtype")) {
            const std::string option = args.arg();
            std::string dtype;
            if (!args.value(&dtype)) return 2;
            if (dtype != "bf16" && dtype != "e4m3") {
                std::fprintf(stderr, "wideattn bench: %s='%s' is not bf16 or e4m3\n", option.c_str(), dtype.c_str());
                return 2;
            }
            (option == "--kv-dtype" ? o->e4m3_kv : o->e4m3_q) = dtype == "e4m3";
        } else if (args.is("--list")) {
            for (const BenchCase& c : suite) std::printf("%s\n", c.name.c_str());
            for (const BenchCase& c : gemma4_decode_suite()) std::printf("%s (decode)\n", c.name.c_str());
            return 0;
        } else if (args.is("--bundle")) {
            if (!args.value(&o->bundle_flag)) return 2;
        } else if (args.is("--json")) {
            if (!args.value(&o->json_path)) return 2;
        } else if (args.is("--kernel")) {
            if (!args.value(&o->kernel_flag)) return 2;
        } else if (args.is("--kernels")) {
            if (!args.value(&o->kernels_flag)) return 2;
            if (o->kernels_flag.empty()) {
                std::fprintf(stderr, "wideattn bench: --kernels needs at least one kernel name\n");
                return 2;
            }
        } else if (args.is("--commit")) {
            if (!args.value(&o->commit)) return 2;
        } else if (args.is("--cases")) {
            if (!args.value(&o->cases_flag)) return 2;
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

// The cases of --cases, looked up in the prefill and decode suites (the prefill suite when it is
// empty); false after printing an unknown name.
bool select_cases(const std::string& cases_flag, const std::vector<BenchCase>& prefill,
                  std::vector<BenchCase>* selected) {
    if (cases_flag.empty()) {
        *selected = prefill;
        return true;
    }
    return named_cases(cases_flag, "bench", "--list", selected);
}

// Options that do not combine; false after printing why.
bool options_combine(const BenchOptions& o) {
    if (o.e4m3_q && (!o.e4m3_kv || o.reference)) {
        std::fprintf(stderr, "wideattn bench: --q-dtype e4m3 needs --kv-dtype e4m3 and no --reference\n");
        return false;
    }
    if (!o.kernels_flag.empty() && (!o.kernel_flag.empty() || o.e4m3_kv || o.e4m3_q || o.reference)) {
        std::fprintf(stderr,
                     "wideattn bench: --kernels takes each kernel's dtypes from the manifest; it does not combine "
                     "with --kernel, --kv-dtype, --q-dtype or --reference\n");
        return false;
    }
    return true;
}

// The mma.sync rates of the run: the bf16 ceiling before and after the suite, and the e4m3
// ceilings when a variant reads e4m3 K/V.
struct PeakRates {
    std::string probe_dir;  // where the probe cubins are
    std::string error;      // why the bf16 rate was not measured ("" when it was)
    double before = 0, after = 0;
    double e4m3_register = 0, e4m3_streamed = 0;
};

// Measures the rates before the suite and prints them under the run's heading line.
void measure_rates_before(const GpuDevice& gpu, const BenchOptions& o, bool any_e4m3, PeakRates* rates) {
    rates->error = measure_mma_peak(gpu, rates->probe_dir, &rates->before);
    std::printf("bench on %s (sm_%d%d, %d SMs), %lld reps after %lld warm-up\n", gpu.name().c_str(), gpu.cc_major(),
                gpu.cc_minor(), gpu.multiprocessors(), o.reps, o.warmup);
    if (rates->error.empty())
        std::printf("mma.sync bf16 register-only rate: %.1f TFLOP/s\n", rates->before);
    else
        std::printf("mma.sync rate not measured: %s\n", rates->error.c_str());
    // The 8-bit kernel's own ceilings: e4m3 mma.sync with register operands, and with B read
    // from shared memory before every mma (as K and V are).
    if (!any_e4m3) return;
    const std::string e1 = measure_mma_peak(gpu, rates->probe_dir, &rates->e4m3_register, kE4m3RegisterProbe);
    const std::string e2 = measure_mma_peak(gpu, rates->probe_dir, &rates->e4m3_streamed, kE4m3StreamedProbe);
    if (e1.empty() && e2.empty())
        std::printf("mma.sync e4m3 rate: %.1f TFLOP/s register-only, %.1f TFLOP/s with B from shared memory\n",
                    rates->e4m3_register, rates->e4m3_streamed);
    else
        std::printf("mma.sync e4m3 rate not measured: %s\n", (e1.empty() ? e2 : e1).c_str());
}

// What one timed case gives the table and the JSON.
struct CaseTiming {
    std::string kernel = "?";  // the kernel that ran (name from the manifest)
    Timing t;
};

// Times case number `c` of the run with one variant. Returns "" or the first error.
std::string time_case(wideattn_context* ctx, const GpuDevice& gpu, const BenchOptions& o, const HostProblem& h,
                      size_t c, const BenchVariant& variant, const InputPools& pools, CaseTiming* out) {
    CaseBuffers b;
    std::string err = upload_case(gpu, h, c, variant, o.reference, pools, &b);
    wideattn_prefill_params p = case_params(h, b, variant, o.reference);
    int32_t index = -1;
    if (err.empty() && wideattn_is_supported(ctx, &p, gpu.cc_major(), gpu.cc_minor(), &index) != WIDEATTN_OK)
        err = wideattn_last_error();
    if (index >= 0) {
        wideattn_kernel_info info{};
        wideattn_get_kernel_info(ctx, index, &info);
        out->kernel = info.name;
    }
    if (err.empty())
        err = time_launches(gpu, static_cast<int>(o.warmup), static_cast<int>(o.reps),
                            [&]() -> std::string {
                                if (wideattn_prefill(ctx, &p, nullptr) != WIDEATTN_OK) return wideattn_last_error();
                                return {};
                            },
                            &out->t);
    return err;
}

// Appends one case's JSON object to `json_cases` (comma-separated).
void append_case_json(const BenchCase& bc, const HostProblem& h, const BenchVariant& variant, const CaseTiming& r,
                      double tflops, double pct, std::ostringstream& json_cases) {
    const Timing& t = r.t;
    json_cases << (json_cases.tellp() > 0 ? ",\n" : "") << "    {\"case\": \"" << bc.name << "\", \"kernel\": \""
               << r.kernel << "\", \"q_lens\": " << "[";
    for (size_t s = 0; s < bc.q_lens.size(); ++s) json_cases << (s ? ", " : "") << bc.q_lens[s];
    json_cases << "], \"contexts\": [";
    for (size_t s = 0; s < bc.contexts.size(); ++s) json_cases << (s ? ", " : "") << bc.contexts[s];
    json_cases << "], \"q_dtype\": \"" << (variant.e4m3_q ? "e4m3" : "bf16") << "\", \"kv_dtype\": \""
               << (variant.e4m3_kv ? "e4m3" : "bf16") << "\", \"num_q_heads\": " << bc.hq
               << ", \"num_kv_heads\": " << bc.hkv << ", \"head_dim\": " << h.spec.head_dim
               << ", \"block_size\": " << h.spec.block_size << ", \"flops\": " << h.flops()
               << ", \"median_ms\": " << t.median_ms << ", \"min_ms\": " << t.min_ms << ", \"p90_ms\": " << t.p90_ms
               << ", \"tflops\": " << tflops << ", \"pct_mma_rate\": " << pct << "}";
}

// Times every selected case with every variant, printing one row each and collecting the JSON
// objects. Returns the number of cases that failed.
int run_suite(wideattn_context* ctx, const GpuDevice& gpu, const BenchOptions& o,
              const std::vector<BenchCase>& selected, const std::vector<BenchVariant>& variants,
              const InputPools& pools, double peak_before, std::ostringstream& json_cases) {
    std::printf("%-18s %-16s %10s %10s %10s %9s %8s\n", "case", "kernel", "median_ms", "min_ms", "p90_ms", "TFLOP/s",
                "%mma");
    int failures = 0;
    for (size_t c = 0; c < selected.size(); ++c) {
        for (const BenchVariant& variant : variants) {
            const BenchCase& bc = selected[c];
            wideattn_set_prefill_kernel(ctx, variant.kernel.empty() ? nullptr : variant.kernel.c_str());
            const HostProblem h = bench_problem(bc, c);
            CaseTiming r;
            const std::string err = time_case(ctx, gpu, o, h, c, variant, pools, &r);
            if (!err.empty()) {
                std::printf("%-18s error: %s\n", bc.name.c_str(), err.c_str());
                ++failures;
                continue;
            }
            const double tflops = h.flops() / (r.t.median_ms * 1e-3) / 1e12;
            const double pct = peak_before > 0 ? 100.0 * tflops / peak_before : 0.0;
            std::printf("%-18s %-16s %10.3f %10.3f %10.3f %9.1f %7.1f%%\n", bc.name.c_str(), r.kernel.c_str(),
                        r.t.median_ms, r.t.min_ms, r.t.p90_ms, tflops, pct);
            std::fflush(stdout);
            append_case_json(bc, h, variant, r, tflops, pct, json_cases);
        }
    }
    return failures;
}

// Writes the --json report; false after printing that it could not.
bool write_json(const BenchOptions& o, const GpuDevice& gpu, const PeakRates& rates, bool any_e4m3,
                const std::ostringstream& json_cases) {
    std::ofstream out(o.json_path);
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    out << "{\n  \"tool\": \"wideattn bench\",\n  \"date\": \"" << date << "\",\n  \"gpu\": \""
        << json_escape(gpu.name()) << "\",\n  \"commit\": \"" << json_escape(o.commit) << "\",\n  \"reps\": " << o.reps
        << ",\n  \"warmup\": " << o.warmup << ",\n  \"mma_rate_tflops_before\": " << rates.before
        << ",\n  \"mma_rate_tflops_after\": " << rates.after;
    if (any_e4m3)
        out << ",\n  \"mma_e4m3_register_rate_tflops\": " << rates.e4m3_register
            << ",\n  \"mma_e4m3_streamed_rate_tflops\": " << rates.e4m3_streamed;
    out << ",\n  \"cases\": [\n"
        << json_cases.str() << "\n  ]\n}\n";
    if (!out) {
        std::fprintf(stderr, "wideattn bench: cannot write --json '%s'\n", o.json_path.c_str());
        return false;
    }
    return true;
}

}  // namespace

int bench_main(int argc, char** argv) {
    BenchOptions o;
    const std::vector<BenchCase> suite = gemma4_suite();
    if (const int status = parse_options(argc, argv, suite, &o); status != kContinue) return status;
    std::vector<BenchCase> selected;
    if (!select_cases(o.cases_flag, suite, &selected) || !options_combine(o)) return 2;
    wideattn_context* ctx = open_bundle(resolve_bundle_dir(o.bundle_flag, argv[0]), "bench");
    if (!ctx) return 2;
    std::vector<BenchVariant> variants;
    const std::string variant_error = bench_variants(ctx, o.kernel_flag, o.kernels_flag, o.e4m3_kv, o.e4m3_q, &variants);
    if (!variant_error.empty()) {
        std::fprintf(stderr, "wideattn bench: %s\n", variant_error.c_str());
        wideattn_close(ctx);
        return 2;
    }
    const bool any_e4m3 =
        std::any_of(variants.begin(), variants.end(), [](const BenchVariant& v) { return v.e4m3_kv; });
    wideattn_status status;
    std::string error;
    std::unique_ptr<GpuDevice> gpu = GpuDevice::open(static_cast<int>(o.device), &status, &error);
    if (!gpu) {
        std::fprintf(stderr, "wideattn bench: %s: %s\n", wideattn_status_string(status), error.c_str());
        wideattn_close(ctx);
        return 2;
    }
    PeakRates rates;
    rates.probe_dir = executable_dir() + "/" + kProbeSubdir;  // mma_peak.<arch>.cubin
    measure_rates_before(*gpu, o, any_e4m3, &rates);
    const InputPools pools = make_pools(any_e4m3);
    std::ostringstream json_cases;
    int failures = run_suite(ctx, *gpu, o, selected, variants, pools, rates.before, json_cases);
    if (rates.error.empty()) {
        measure_mma_peak(*gpu, rates.probe_dir, &rates.after);
        std::printf("mma.sync bf16 register-only rate after the suite: %.1f TFLOP/s\n", rates.after);
    }
    if (!o.json_path.empty() && !write_json(o, *gpu, rates, any_e4m3, json_cases)) ++failures;
    wideattn_close(ctx);
    return failures ? 1 : 0;
}

}  // namespace wideattn::cli
