// bench.cpp - `wideattn bench`: times the bundle's kernels on the Gemma 4 31B global-layer
// suites (prefill and decode, docs/design.md section 7) with CUDA events, each call with its
// split-KV workspace, and measures the register-only mma.sync bf16 rate, on sm_90 the dense FP8
// and bf16 wgmma rates and, for decode cases, the device-to-device copy bandwidth and the
// read-only streaming bandwidth in the same run (before and after) as the ceilings the results
// are compared with. --pdl both times every case on two contexts, with and without programmatic
// dependent launch of the split-KV merge (WIDEATTN_PDL), in one process.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "accuracy/bf16.h"
#include "dispatch/bundle_files.h"
#include "dispatch/dependent_launch.h"
#include "fp8/codec/e4m3.h"
#include "kernels/common/kernel_desc.h"
#include "tools/bench/probe_shapes.h"
#include "tools/cli/bench_report.h"
#include "tools/cli/bench_suite.h"
#include "tools/cli/block_timeline.h"
#include "tools/cli/cli_common.h"
#include "tools/harness/device_problem.h"
#include "tools/harness/problem.h"
#include "tools/cli/subcommands.h"
#include "tools/harness/checks.h"

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
constexpr size_t kCopyProbeBytes = size_t{1} << 30;  // one cuMemcpyDtoD of the copy-bandwidth probe
constexpr int kCopyProbeReps = 7;
constexpr int kCopyProbeWarmup = 2;
constexpr unsigned char kCopyProbeFill = 0x3c;       // the source's bytes (any value)
constexpr size_t kReadProbeBytes = size_t{1} << 30;  // read by one launch of the streaming probe (> L2)
constexpr int kReadProbeReps = kCopyProbeReps;       // timed as the copy
constexpr int kReadProbeWarmup = kCopyProbeWarmup;
constexpr size_t kReadFillChunkBytes = size_t{16} << 20;  // pseudo-random bytes uploaded once, then replicated
constexpr uint64_t kReadFillSeed = 0x5EEDF00Dull;
constexpr uint64_t kNonZeroBytes = 0x0101010101010101ull;  // ORed into every fill word: no zero byte
constexpr uint64_t kSplitMixGamma = 0x9E3779B97F4A7C15ull;  // splitmix64's increment and mixing constants
constexpr uint64_t kSplitMixMul1 = 0xBF58476D1CE4E5B9ull;
constexpr uint64_t kSplitMixMul2 = 0x94D049BB133111EBull;
constexpr int32_t kWgmmaIterations = 4096;           // commit groups per warpgroup of the wgmma probes
constexpr int kWgmmaMajor = 9;                       // the probes are built for sm_90a only
constexpr int kWgmmaMinor = 0;
constexpr const char* kSuitePrefill = "prefill";
constexpr const char* kSuiteDecode = "decode";
// --pdl: the WIDEATTN_PDL of the contexts the variants run on (programmatic dependent launch of the
// split-KV merge), or both, each case timed on a context of each in turn.
constexpr const char* kPdlOn = "on";
constexpr const char* kPdlOff = "off";
constexpr const char* kPdlBoth = "both";
constexpr const char* kPdlEnvOn = "1";   // WIDEATTN_PDL values (dispatch/dependent_launch.h)
constexpr const char* kPdlEnvOff = "0";
// --timing: each timed call between its two events on an idle GPU (call: the host's enqueue of
// the call lies inside the pair), or queued behind a spin on the GPU long enough for the host to
// enqueue the call and its events first (queued: the GPU time of the call's kernels, as a
// captured graph or an engine running ahead of the GPU sees it).
constexpr const char* kTimingCall = "call";
constexpr const char* kTimingQueued = "queued";
// --e4m3-scale bounds: the pool's largest value (about 1.2) stays below e4m3's 448 at the smallest,
// and its values keep normal codes at the largest.
constexpr double kMinE4m3BenchScale = 0.003;
constexpr double kMaxE4m3BenchScale = 1.0;
constexpr uint64_t kQueueAheadNs = 300000;  // 300 us of spin: far above a call's host time (~10 us)
// --kfv-cos-sin: where the K-from-V calls take cos / sin from, the description's formula (no
// table: what the kernels evaluate) or a table of every position of the case's longest sequence
// (wideattn_k_from_v.cos_sin, filled by wideattn_k_from_v_cos_sin).
constexpr const char* kKfvCosSinFormula = "formula";
constexpr const char* kKfvCosSinTable = "table";
// --kernels names of the K-from-V prefill path (BenchVariant::rebuild): the rebuild kernel's
// manifest name over a BF16 V-only cache, and with ":e4m3" over an e4m3 one.
constexpr const char* kRebuildVariant = "k_from_v_rebuild";
constexpr const char* kRebuildVariantE4m3 = "k_from_v_rebuild:e4m3";

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

// A dense wgmma rate probe (tools/bench/wgmma_peak_*.cu, sm_90a only).
struct WgmmaProbe {
    const char* stem;
    const char* symbol;
    int k;  // K of one m64n256 wgmma
};
constexpr WgmmaProbe kWgmmaE4m3Probe = {"wgmma_peak_e4m3", "wideattn_wgmma_peak_e4m3", probe::kWgmmaKE4m3};
constexpr WgmmaProbe kWgmmaBf16Probe = {"wgmma_peak_bf16", "wideattn_wgmma_peak_bf16", probe::kWgmmaKBf16};

// A probe cubin of kProbeSubdir loaded for this device (<stem>.sm_NNa.cubin, else .sm_NN), and
// its kernel; unloads the module when it goes.
struct ProbeModule {
    const GpuDevice* gpu = nullptr;
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    ProbeModule() = default;
    ProbeModule(const ProbeModule&) = delete;
    ProbeModule& operator=(const ProbeModule&) = delete;
    ~ProbeModule() {
        if (module) gpu->driver().cuModuleUnload(module);
    }
    std::string load(const GpuDevice& device, const std::string& cubin_dir, const char* stem, const char* symbol) {
        gpu = &device;
        const std::string arch = "sm_" + std::to_string(device.cc_major()) + std::to_string(device.cc_minor());
        std::string image, why;
        for (const std::string& name : {arch + "a", arch})
            if (read_regular_file(cubin_dir + "/" + stem + "." + name + ".cubin", kMaxProbeBytes, &image, &why)) break;
        if (image.empty()) return std::string("no ") + stem + " cubin for " + arch + " in " + cubin_dir;
        const Driver& d = device.driver();
        const std::string what = std::string("cuModuleLoadData(") + stem + ")";
        std::string err = device.check(d.cuModuleLoadData(&module, image.data()), what.c_str());
        if (err.empty()) err = device.check(d.cuModuleGetFunction(&function, module, symbol), symbol);
        return err;
    }
};

// Measures an mma.sync rate with one of the probes of tools/bench/ (default: the register-only
// bf16 rate of mma_peak.cu).
std::string measure_mma_peak(const GpuDevice& gpu, const std::string& cubin_dir, double* tflops,
                             const PeakProbe& probe = kBf16Probe) {
    const Driver& d = gpu.driver();
    ProbeModule m;
    std::string err = m.load(gpu, cubin_dir, probe.stem, probe.symbol);
    if (!err.empty()) return err;
    CUfunction function = m.function;
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
    if (!err.empty()) return err;
    const double flops = probe.flops_per_mma * kPeakChains * kPeakIterations * (double(blocks) * kPeakThreads / 32);
    *tflops = flops / (t.median_ms * 1e-3) / 1e12;
    return {};
}

// The variants of this run: one from --kernel / --kv-dtype / --q-dtype, or one per name of
// --kernels with that kernel's dtypes from the manifest. Returns an error message or "".
std::string bench_variants(wideattn_context* ctx, const std::string& kernel_flag, const std::string& kernels_flag,
                           bool e4m3_kv, bool e4m3_q, std::vector<BenchVariant>* variants) {
    if (kernels_flag.empty()) {
        if (!kernel_flag.empty() && wideattn_set_prefill_kernel(ctx, kernel_flag.c_str()) != WIDEATTN_OK)
            return std::string("--kernel: ") + wideattn_last_error();
        variants->push_back(BenchVariant{kernel_flag, e4m3_kv, e4m3_q,
                                         !kernel_flag.empty() && kernel_reads_transposed_v(ctx, kernel_flag),
                                         !kernel_flag.empty() && kernel_k_from_v_only(ctx, kernel_flag)});
        return {};
    }
    std::stringstream list(kernels_flag);
    std::string name;
    while (std::getline(list, name, ',')) {
        if (name == kRebuildVariant || name == kRebuildVariantE4m3) {
            BenchVariant rebuilt{name, name == kRebuildVariantE4m3, false, false, true};
            rebuilt.rebuild = true;
            variants->push_back(rebuilt);
            continue;
        }
        if (wideattn_set_prefill_kernel(ctx, name.c_str()) != WIDEATTN_OK)
            return std::string("--kernels: ") + wideattn_last_error();
        for (int i = 0; i < wideattn_kernel_count(ctx); ++i) {
            wideattn_kernel_info info{};
            wideattn_get_kernel_info(ctx, i, &info);
            if (name != info.name) continue;
            if (info.o_dtype != WIDEATTN_DTYPE_BF16) return "--kernels: " + name + " does not write bf16 output";
            variants->push_back(BenchVariant{name, info.kv_dtype == WIDEATTN_DTYPE_E4M3,
                                             info.q_dtype == WIDEATTN_DTYPE_E4M3,
                                             kernel_reads_transposed_v(ctx, name), kernel_k_from_v_only(ctx, name)});
            break;
        }
    }
    wideattn_set_prefill_kernel(ctx, nullptr);
    if (variants->empty()) return "--kernels needs at least one kernel name";
    return {};
}

// Measures the device-to-device copy bandwidth: the median time of a cuMemcpyDtoD of
// kCopyProbeBytes, timed with events, counted as read + write (GB/s).
std::string measure_copy_bandwidth(const GpuDevice& gpu, double* gbps) {
    DeviceBuffer src, dst;
    std::string err = src.allocate(gpu, kCopyProbeBytes);
    if (err.empty()) err = dst.allocate(gpu, kCopyProbeBytes);
    if (err.empty()) err = src.fill(kCopyProbeFill);
    const Driver& d = gpu.driver();
    const auto to = reinterpret_cast<CUdeviceptr>(dst.get());
    const auto from = reinterpret_cast<CUdeviceptr>(src.get());
    Timing t;
    if (err.empty())
        err = time_launches(gpu, kCopyProbeWarmup, kCopyProbeReps,
                            [&] { return gpu.check(d.cuMemcpyDtoD(to, from, kCopyProbeBytes), "cuMemcpyDtoD"); }, &t);
    if (!err.empty()) return err;
    *gbps = 2.0 * static_cast<double>(kCopyProbeBytes) / (t.median_ms * 1e-3) / 1e9;
    return {};
}

// Measures a dense wgmma rate (sm_90a): one block of two warpgroups per SM, each issuing
// kWgmmaIterations groups of kWgmmaStepsPerGroup m64n256 wgmmas, 2 * 64 * 256 * K FLOPs each.
std::string measure_wgmma_rate(const GpuDevice& gpu, const std::string& cubin_dir, const WgmmaProbe& p,
                               double* tflops) {
    ProbeModule m;
    std::string err = m.load(gpu, cubin_dir, p.stem, p.symbol);
    const int blocks = gpu.multiprocessors();
    DeviceBuffer out;
    if (err.empty()) err = out.allocate(gpu, sizeof(float) * blocks * probe::kWgmmaThreads);
    void* out_ptr = out.get();
    int32_t iterations = kWgmmaIterations;
    void* args[] = {&out_ptr, &iterations};
    const Driver& d = gpu.driver();
    Timing t;
    if (err.empty())
        err = time_launches(gpu, kDefaultWarmup, kDefaultReps,
                            [&] {
                                return gpu.check(d.cuLaunchKernel(m.function, blocks, 1, 1, probe::kWgmmaThreads, 1, 1,
                                                                  0, nullptr, args, nullptr),
                                                 "cuLaunchKernel(wgmma rate probe)");
                            },
                            &t);
    if (!err.empty()) return err;
    const double wgmmas = double(blocks) * probe::kWgmmaWarpgroups * kWgmmaIterations * probe::kWgmmaStepsPerGroup;
    *tflops = wgmmas * 2.0 * probe::kWgmmaM * probe::kWgmmaN * p.k / (t.median_ms * 1e-3) / 1e12;
    return {};
}

// Whether this device runs the wgmma probes (their cubins are built for sm_90a only).
bool wgmma_device(const GpuDevice& gpu) { return gpu.cc_major() == kWgmmaMajor && gpu.cc_minor() == kWgmmaMinor; }

// Both wgmma rates into *e4m3 and *bf16; "" or the first error.
std::string measure_wgmma_rates(const GpuDevice& gpu, const std::string& cubin_dir, double* e4m3, double* bf16) {
    std::string err = measure_wgmma_rate(gpu, cubin_dir, kWgmmaE4m3Probe, e4m3);
    if (err.empty()) err = measure_wgmma_rate(gpu, cubin_dir, kWgmmaBf16Probe, bf16);
    return err;
}

// Fills `buffer` (a multiple of kReadFillChunkBytes) with pseudo-random bytes, none zero: one
// chunk from a splitmix64 sequence uploaded, then copied over the rest on the device.
std::string fill_pseudo_random(const GpuDevice& gpu, DeviceBuffer& buffer) {
    std::vector<uint64_t> chunk(kReadFillChunkBytes / sizeof(uint64_t));
    uint64_t state = kReadFillSeed;
    for (uint64_t& word : chunk) {
        uint64_t z = (state += kSplitMixGamma);
        z = (z ^ (z >> 30)) * kSplitMixMul1;
        z = (z ^ (z >> 27)) * kSplitMixMul2;
        word = (z ^ (z >> 31)) | kNonZeroBytes;
    }
    std::string err = gpu.check(gpu.driver().cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(buffer.get()), chunk.data(),
                                                          kReadFillChunkBytes),
                                "cuMemcpyHtoD");
    const auto base = reinterpret_cast<CUdeviceptr>(buffer.get());
    for (size_t done = kReadFillChunkBytes; err.empty() && done < buffer.bytes();) {
        const size_t n = std::min(done, buffer.bytes() - done);
        err = gpu.check(gpu.driver().cuMemcpyDtoD(base + done, base, n), "cuMemcpyDtoD");
        done += n;
    }
    if (err.empty()) err = gpu.check(gpu.driver().cuCtxSynchronize(), "fill of the read probe's buffer");
    return err;
}

// Measures the read-only streaming bandwidth: the median time of one launch of stream_read.cu
// over kReadProbeBytes of pseudo-random bytes (filled outside timing), as GB/s read.
std::string measure_read_bandwidth(const GpuDevice& gpu, const std::string& cubin_dir, double* gbps) {
    ProbeModule m;
    std::string err = m.load(gpu, cubin_dir, "stream_read", "wideattn_stream_read");
    const int blocks = gpu.multiprocessors() * probe::kStreamBlocksPerSm;
    DeviceBuffer data, out;
    if (err.empty()) err = data.allocate(gpu, kReadProbeBytes);
    if (err.empty()) err = out.allocate(gpu, sizeof(uint32_t) * blocks);
    if (err.empty()) err = fill_pseudo_random(gpu, data);
    void* data_ptr = data.get();
    void* out_ptr = out.get();
    uint64_t vectors = kReadProbeBytes / probe::kStreamVectorBytes;
    void* args[] = {&data_ptr, &vectors, &out_ptr};
    const Driver& d = gpu.driver();
    Timing t;
    if (err.empty())
        err = time_launches(gpu, kReadProbeWarmup, kReadProbeReps,
                            [&] {
                                return gpu.check(d.cuLaunchKernel(m.function, blocks, 1, 1, probe::kStreamThreads, 1,
                                                                  1, 0, nullptr, args, nullptr),
                                                 "cuLaunchKernel(read bandwidth probe)");
                            },
                            &t);
    if (!err.empty()) return err;
    *gbps = static_cast<double>(kReadProbeBytes) / (t.median_ms * 1e-3) / 1e9;
    return {};
}

void print_help() {
    std::printf(
        "usage: wideattn bench [--bundle DIR] [--device N] [--suite prefill|decode] [--cases A,B,...]\n"
        "                      [--reps N] [--warmup N] [--reference] [--kv-dtype bf16|e4m3]\n"
        "                      [--q-dtype bf16|e4m3] [--json FILE] [--kernel NAME | --kernels A,B,...]\n"
        "                      [--pdl on|off|both] [--timing call|queued] [--splits N]\n"
        "                      [--kfv-cos-sin formula|table] [--e4m3-scale X] [--block-timeline]\n"
        "                      [--commit SHA] [--list]\n\n"
        "Times the bf16 kernel the dispatcher selects on the Gemma 4 31B global-layer suite\n"
        "(Hq 32, Hkv 4, D 512, page 16, shuffled block table; random inputs larger than L2) with\n"
        "CUDA events: warm-up, then the median of N timed runs. Counts causal FLOPs as\n"
        "4*D*Hq*(q_len*context + q_len*(q_len+1)/2) and reports TFLOP/s and the percentage of the\n"
        "register-only mma.sync bf16 rate, measured before and after the suite in the same run.\n"
        "On sm_90 the dense wgmma rates are measured the same way (m64n256k32 e4m3 and m64n256k16\n"
        "bf16, operands in shared memory, two warpgroups per SM), and prefill rows report %%wgmma:\n"
        "the 8-bit kernels (e4m3 K/V) of the FP8 rate, the bf16 Hopper-tier kernels (wgmma_*) of\n"
        "the bf16 rate (skipped where the probe cubins, built for sm_90a only, are missing).\n"
        "Every call gets the max_seqlen_q / max_seqlen_k hints and the split-KV workspace that\n"
        "wideattn_workspace_size asks for on the device (allocated once per case, outside timing);\n"
        "the 'spl' column is the split count wideattn_plan_launch reports for it.\n\n"
        "Decode cases (--list marks them) also report the GB/s of K/V read (the K and V bytes of\n"
        "every visible key of every sequence, once per KV head) and its percentage of the\n"
        "device-to-device copy bandwidth (a %d MiB cuMemcpyDtoD, read + write, median of %d) and\n"
        "of the read-only streaming bandwidth (%%read: a kernel reading %d MiB of pseudo-random\n"
        "bytes with 16-byte loads, median of %d), both measured at the start and at the end of\n"
        "the run.\n\n"
        "  --bundle DIR   bundle directory (default: $WIDEATTN_BUNDLE, the build tree's, the installed one)\n"
        "  --device N     CUDA device ordinal (default 0)\n"
        "  --suite S      prefill (default): the prefill suite with the kernel the options below pick;\n"
        "                 decode: the decode suite (single tokens and 5-token verifications after long\n"
        "                 contexts, a mixed batch of one 2048-token chunk and 63 decodes and its two\n"
        "                 parts alone, the three decode cases), every case with bf16 K/V, with e4m3\n"
        "                 K/V + bf16 Q, and with e4m3 K/V + bf16 Q over a transposed V cache (rows\n"
        "                 'CASE vT', JSON v_transposed; where a kernel of that layout runs), the\n"
        "                 dispatcher's kernels, then a summary with the FP8/BF16\n"
        "                 time ratio and mixed / (chunk + decodes); not with --kernel, --kernels,\n"
        "                 --kv-dtype, --q-dtype or --reference\n"
        "  --cases LIST   comma-separated case names from both suites (default: the --suite's cases;\n"
        "                 an empty list or name is refused)\n"
        "  --reps N       timed runs per case (default %d, 1..%lld)\n"
        "  --warmup N     untimed runs first (default %d, 0..%lld)\n"
        "  --reference    time the fp64 reference kernel (o_dtype f64) instead of the bf16 kernel; not\n"
        "                 with --kernel or --kernels\n"
        "  --kv-dtype T   bf16 (default) or e4m3: K/V cache as e4m3 codes with per-tensor scales; also\n"
        "                 measures the e4m3 mma.sync rate (register-only, and with B from shared memory)\n"
        "  --q-dtype T    bf16 (default) or e4m3 (with --kv-dtype e4m3): Q passed as e4m3 codes with a\n"
        "                 per-tensor scale, for the kernel that takes Q already quantised\n"
        "  --kernel NAME  time this prefill kernel instead of the one the dispatcher picks (e.g.\n"
        "                 wgmma_bf16_d512 on sm_90, where wgmma_bf16c2p_d512 is picked by default); not with\n"
        "                 --reference\n"
        "  --kernels LIST time several prefill kernels side by side in this one process, each case\n"
        "                 running every kernel in turn with inputs of that kernel's dtypes (e.g.\n"
        "                 mma_bf16_d512,wgmma_bf16_d512,wgmma_e4m3q_d512); a single_token kernel\n"
        "                 (the decode kernels) only on cases with total_q <= num_seqs, a few_tokens\n"
        "                 kernel (the verify kernels) only where total_q <= 8 x num_seqs, a note on\n"
        "                 the others (--kernel NAME runs it on every case); not with --kernel,\n"
        "                 --kv-dtype, --q-dtype or --reference. A kernel that serves only K-from-V calls\n"
        "                 (decode_e4m3kfv_d512, decode_bf16kfv_d512), with --kernel or --kernels, runs\n"
        "                 K-from-V calls: k_cache NULL, K rebuilt from V with Gemma 4's description and\n"
        "                 random k_norm weights that are bf16 values, as a checkpoint's (kv_bytes: V only;\n"
        "                 cos / sin as --kfv-cos-sin says). k_from_v_rebuild in the list times the\n"
        "                 K-from-V prefill path over a BF16 V-only cache: wideattn_k_from_v_rebuild into\n"
        "                 a dense bf16 K + V scratch, then the K + V prefill the dispatcher picks for it\n"
        "                 (both in each timed call; kernel column 'k_from_v_rebuild+KERNEL');\n"
        "                 k_from_v_rebuild:e4m3 the same over an e4m3 V-only cache\n"
        "  --json FILE    also write the results as JSON: per case and variant the timings, TFLOP/s,\n"
        "                 max_seqlen_q, max_seqlen_k, num_splits, workspace_bytes, decode, and for\n"
        "                 decode cases kv_bytes, kv_gbps, pct_copy_bw_before, pct_copy_bw_after,\n"
        "                 pct_read_bw_before, pct_read_bw_after (fp8_bf16_time_ratio on e4m3 K/V\n"
        "                 entries of --suite decode), for prefill cases on sm_90 pct_fp8_wgmma_rate\n"
        "                 (e4m3 K/V) or pct_wgmma_rate (bf16 Hopper tier); the header has suite,\n"
        "                 timing and, when measured, copy_bytes, copy_bandwidth_gbps_before/_after,\n"
        "                 read_bytes,\n"
        "                 read_bandwidth_gbps_before/_after, wgmma_e4m3_rate_tflops_before/_after,\n"
        "                 wgmma_bf16_rate_tflops_before/_after; mixed_batch_ratios when the mixed\n"
        "                 batch and its parts ran. A pct_ field is present only when its ceiling was\n"
        "                 measured (the text tables print '-' in its place)\n"
        "  --pdl MODE     on or off: run on a context opened with WIDEATTN_PDL=1 or 0 (programmatic\n"
        "                 dependent launch of the split-KV merge kernel on sm_90 and later); both: open\n"
        "                 one of each and time every case and variant on each in turn, in this one process\n"
        "                 (rows 'CASE pdl=on' and 'CASE pdl=off', JSON field pdl); default: the\n"
        "                 environment's WIDEATTN_PDL\n"
        "  --timing MODE  call (default): each timed call between two CUDA events on an idle GPU,\n"
        "                 so the host's enqueue of the call (validation, plan, launches) is inside\n"
        "                 the pair; queued: each call queued behind a 300 us spin on the GPU\n"
        "                 (tools/bench/spin_wait.cu), so the events time the call's kernels back to\n"
        "                 back, as a captured graph runs them (JSON field timing)\n"
        "  --splits N     num_splits of every call: 0 (default) the library's choice, 1 never split,\n"
        "                 2..%d exactly that many (the workspace sized for it; a kernel without a\n"
        "                 split entry reports its refusal); the spl column and JSON num_splits show\n"
        "                 what ran\n"
        "  --kfv-cos-sin S  formula (default): the K-from-V calls (above) have no cos / sin table, the\n"
        "                 kernels evaluate cos / sin; table: each case's calls read a table of every\n"
        "                 position up to its longest sequence (wideattn_k_from_v.cos_sin, filled by\n"
        "                 wideattn_k_from_v_cos_sin, the same outputs; allocated once per case, outside\n"
        "                 timing, not in kv_bytes; rows 'CASE cos_sin', JSON kfv_cos_sin); table needs a\n"
        "                 K-from-V kernel\n"
        "  --e4m3-scale X the per-tensor scale of every e4m3 input (the pools' codes are value / X; default\n"
        "                 2^-8, a power of two; another value, e.g. 0.0037, times the paths the 8-bit\n"
        "                 kernels take for scales that are not one: decode_e4m3kfvb_d512's fp32 steps),\n"
        "                 %g..%g (JSON e4m3_scale)\n"
        "  --block-timeline  after each case's row, the lines 'wideattn-timeline NAME X Y Z SMID\n"
        "                 START_NS END_NS' of every block its launches ran (warm-up and timed), for\n"
        "                 tools/bench/block_timeline.py; only kernels built with\n"
        "                 -DWIDEATTN_BLOCK_TIMELINE_RECORDS keep them (kernels/common/block_timeline.cuh,\n"
        "                 a variant bundle), a note says when none of the case's did; the record kept\n"
        "                 per block costs the kernel a few instructions and registers\n"
        "  --commit SHA   recorded in the JSON\n"
        "  --list         print the case names and exit (decode-suite cases marked '(decode)')\n",
        static_cast<int>(kCopyProbeBytes >> 20), kCopyProbeReps, static_cast<int>(kReadProbeBytes >> 20),
        kReadProbeReps, kDefaultReps, kMaxReps, kDefaultWarmup, kMaxReps, WIDEATTN_MAX_SPLITS, kMinE4m3BenchScale,
        kMaxE4m3BenchScale);
}

// The command line of one run.
struct BenchOptions {
    std::string bundle_flag, json_path, commit, cases_flag, kernel_flag, kernels_flag;
    std::string suite = kSuitePrefill;
    std::string pdl;  // --pdl: kPdlOn, kPdlOff, kPdlBoth; "" = the environment's WIDEATTN_PDL
    std::string timing = kTimingCall;  // --timing: kTimingCall or kTimingQueued
    std::string kfv_cos_sin = kKfvCosSinFormula;  // --kfv-cos-sin: kKfvCosSinFormula or kKfvCosSinTable
    bool reference = false;
    bool block_timeline = false;  // --block-timeline
    bool cases_given = false;  // --cases was on the command line (even as an empty list)
    bool e4m3_kv = false, e4m3_q = false;
    long long device = 0, reps = kDefaultReps, warmup = kDefaultWarmup;
    long long splits = 0;  // --splits: wideattn_prefill_params.num_splits of every call
    float e4m3_scale = kE4m3BenchScale;  // --e4m3-scale
    bool decode_suite() const { return suite == kSuiteDecode; }
};

constexpr int kContinue = -1;  // parse_options: go on with the run

// Prints the case names of both suites.
void list_cases() {
    for (const BenchCase& c : gemma4_suite()) std::printf("%s\n", c.name.c_str());
    for (const BenchCase& c : gemma4_decode_bench_suite()) std::printf("%s (decode)\n", c.name.c_str());
}

// Reads an option with a value (other than the integers); false after printing a usage error.
bool value_option(ArgReader& args, BenchOptions* o) {
    const std::string option = args.arg();
    std::string text;
    if (!args.value(&text)) return false;
    if (option == "--kv-dtype" || option == "--q-dtype") {
        if (!parse_e4m3_dtype("bench", option, text, option == "--kv-dtype" ? &o->e4m3_kv : &o->e4m3_q)) return false;
    } else if (option == "--suite") {
        if (text != kSuitePrefill && text != kSuiteDecode) {
            std::fprintf(stderr, "wideattn bench: --suite='%s' is not %s or %s\n", text.c_str(), kSuitePrefill,
                         kSuiteDecode);
            return false;
        }
        o->suite = text;
    } else if (option == "--pdl") {
        if (text != kPdlOn && text != kPdlOff && text != kPdlBoth) {
            std::fprintf(stderr, "wideattn bench: --pdl='%s' is not %s, %s or %s\n", text.c_str(), kPdlOn, kPdlOff,
                         kPdlBoth);
            return false;
        }
        o->pdl = text;
    } else if (option == "--timing") {
        if (text != kTimingCall && text != kTimingQueued) {
            std::fprintf(stderr, "wideattn bench: --timing='%s' is not %s or %s\n", text.c_str(), kTimingCall,
                         kTimingQueued);
            return false;
        }
        o->timing = text;
    } else if (option == "--kfv-cos-sin") {
        if (text != kKfvCosSinFormula && text != kKfvCosSinTable) {
            std::fprintf(stderr, "wideattn bench: --kfv-cos-sin='%s' is not %s or %s\n", text.c_str(),
                         kKfvCosSinFormula, kKfvCosSinTable);
            return false;
        }
        o->kfv_cos_sin = text;
    } else if (option == "--kernels") {
        if (text.empty()) {
            std::fprintf(stderr, "wideattn bench: --kernels needs at least one kernel name\n");
            return false;
        }
        if (has_empty_name(text)) {
            std::fprintf(stderr, "wideattn bench: --kernels='%s' has an empty kernel name\n", text.c_str());
            return false;
        }
        o->kernels_flag = text;
    } else if (option == "--cases") {
        o->cases_flag = text;
        o->cases_given = true;
    } else if (option == "--e4m3-scale") {
        char* end = nullptr;
        const double value = std::strtod(text.c_str(), &end);
        if (text.empty() || end == text.c_str() || *end != '\0' || !(value >= kMinE4m3BenchScale) ||
            !(value <= kMaxE4m3BenchScale)) {
            std::fprintf(stderr, "wideattn bench: --e4m3-scale='%s' is not a number in %g..%g\n", text.c_str(),
                         kMinE4m3BenchScale, kMaxE4m3BenchScale);
            return false;
        }
        o->e4m3_scale = static_cast<float>(value);
    } else {
        std::string* targets[] = {&o->bundle_flag, &o->json_path, &o->kernel_flag, &o->commit};
        const char* names[] = {"--bundle", "--json", "--kernel", "--commit"};
        for (size_t i = 0; i < std::size(names); ++i)
            if (option == names[i]) *targets[i] = text;
    }
    return true;
}

bool takes_value(const ArgReader& args) {
    for (const char* option : {"--kv-dtype", "--q-dtype", "--suite", "--kernels", "--bundle", "--json", "--kernel",
                               "--commit", "--cases", "--pdl", "--timing", "--kfv-cos-sin", "--e4m3-scale"})
        if (args.is(option)) return true;
    return false;
}

// Reads the arguments into *o. Returns kContinue, or the exit status: 0 after --help or --list,
// 2 on a usage error (printed).
int parse_options(int argc, char** argv, BenchOptions* o) {
    ArgReader args("bench", argc, argv);
    while (args.next()) {
        if (args.is("--help") || args.is("-h")) {
            print_help();
            return 0;
        } else if (args.is("--reference")) {
            o->reference = true;
        } else if (args.is("--block-timeline")) {
            o->block_timeline = true;
        } else if (args.is("--list")) {
            list_cases();
            return 0;
        } else if (takes_value(args)) {
            if (!value_option(args, o)) return 2;
        } else if (args.is("--device")) {
            if (!args.int_value(0, kMaxDeviceOrdinal, &o->device)) return 2;
        } else if (args.is("--reps")) {
            if (!args.int_value(1, kMaxReps, &o->reps)) return 2;
        } else if (args.is("--warmup")) {
            if (!args.int_value(0, kMaxReps, &o->warmup)) return 2;
        } else if (args.is("--splits")) {
            if (!args.int_value(0, WIDEATTN_MAX_SPLITS, &o->splits)) return 2;
        } else {
            args.report_unknown();
            return 2;
        }
    }
    return kContinue;
}

// The cases of --cases, looked up in the prefill and decode suites (the --suite's cases without
// --cases); false after printing an unknown or empty name.
bool select_cases(const BenchOptions& o, std::vector<BenchCase>* selected) {
    if (!o.cases_given) {
        *selected = o.decode_suite() ? gemma4_decode_bench_suite() : gemma4_suite();
        return true;
    }
    return named_cases(o.cases_flag, "bench", "--list", selected);
}

// Options that do not combine; false after printing why.
bool options_combine(const BenchOptions& o) {
    if (o.reference && (!o.kernel_flag.empty() || !o.kernels_flag.empty())) {
        std::fprintf(stderr,
                     "wideattn bench: --reference times the fp64 reference kernel (o_dtype f64); it does not combine "
                     "with --kernel or --kernels, which pin bf16-output kernels\n");
        return false;
    }
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
    if (o.decode_suite() &&
        (!o.kernels_flag.empty() || !o.kernel_flag.empty() || o.e4m3_kv || o.e4m3_q || o.reference)) {
        std::fprintf(stderr,
                     "wideattn bench: --suite decode runs the dispatcher's kernels with bf16 and with e4m3 K/V; it "
                     "does not combine with --kernel, --kernels, --kv-dtype, --q-dtype or --reference\n");
        return false;
    }
    return true;
}

// Measures the rates before the suite and prints them under the run's heading line.
void measure_rates_before(const GpuDevice& gpu, const BenchOptions& o, bool any_e4m3, bool any_decode,
                          const std::string& probe_dir, RunRates* rates, std::string* mma_error) {
    *mma_error = measure_mma_peak(gpu, probe_dir, &rates->mma_before);
    std::printf("bench on %s (sm_%d%d, %d SMs), %lld reps after %lld warm-up\n", gpu.name().c_str(), gpu.cc_major(),
                gpu.cc_minor(), gpu.multiprocessors(), o.reps, o.warmup);
    if (mma_error->empty())
        std::printf("mma.sync bf16 register-only rate: %.1f TFLOP/s\n", rates->mma_before);
    else
        std::printf("mma.sync rate not measured: %s\n", mma_error->c_str());
    if (wgmma_device(gpu)) {
        const std::string err = measure_wgmma_rates(gpu, probe_dir, &rates->wgmma_e4m3_before, &rates->wgmma_bf16_before);
        rates->wgmma_measured = err.empty();
        if (err.empty())
            std::printf("wgmma dense rate: %.1f TFLOP/s e4m3 (m64n256k32), %.1f TFLOP/s bf16 (m64n256k16)\n",
                        rates->wgmma_e4m3_before, rates->wgmma_bf16_before);
        else
            std::printf("wgmma rates not measured: %s\n", err.c_str());
    }
    if (any_decode) {
        const std::string err = measure_copy_bandwidth(gpu, &rates->copy_before);
        if (err.empty()) {
            rates->copy_bytes = static_cast<int64_t>(kCopyProbeBytes);
            std::printf("copy bandwidth (cuMemcpyDtoD, read + write): %.1f GB/s\n", rates->copy_before);
        } else {
            std::printf("copy bandwidth not measured: %s\n", err.c_str());
        }
        const std::string read_err = measure_read_bandwidth(gpu, probe_dir, &rates->read_before);
        if (read_err.empty()) {
            rates->read_bytes = static_cast<int64_t>(kReadProbeBytes);
            std::printf("read bandwidth (streaming 16-byte loads, read only): %.1f GB/s\n", rates->read_before);
        } else {
            std::printf("read bandwidth not measured: %s\n", read_err.c_str());
        }
    }
    // The 8-bit kernel's own ceilings: e4m3 mma.sync with register operands, and with B read
    // from shared memory before every mma (as K and V are).
    if (!any_e4m3) return;
    rates->e4m3_measured = true;
    const std::string e1 = measure_mma_peak(gpu, probe_dir, &rates->e4m3_register, kE4m3RegisterProbe);
    const std::string e2 = measure_mma_peak(gpu, probe_dir, &rates->e4m3_streamed, kE4m3StreamedProbe);
    if (e1.empty() && e2.empty())
        std::printf("mma.sync e4m3 rate: %.1f TFLOP/s register-only, %.1f TFLOP/s with B from shared memory\n",
                    rates->e4m3_register, rates->e4m3_streamed);
    else
        std::printf("mma.sync e4m3 rate not measured: %s\n", (e1.empty() ? e2 : e1).c_str());
}

// The kernel and split count of *p (wideattn_plan_launch with the workspace attached), into *r.
std::string plan_case(wideattn_context* ctx, const GpuDevice& gpu, const wideattn_prefill_params& p, CaseRecord* r) {
    wideattn_launch_plan plan{};
    if (wideattn_plan_launch(ctx, &p, gpu.cc_major(), gpu.cc_minor(), gpu.multiprocessors(), &plan) != WIDEATTN_OK)
        return wideattn_last_error();
    wideattn_kernel_info info{};
    if (wideattn_get_kernel_info(ctx, plan.kernel_index, &info) == WIDEATTN_OK) r->kernel = info.name;
    r->num_splits = plan.num_splits;
    r->workspace_bytes = p.workspace_bytes;
    return {};
}

// The GPU-side wait of --timing queued (spin_wait.cu), loaded once per run; no function: call timing.
struct QueueAhead {
    ProbeModule spin;
    // Queues the wait on the default stream (nothing without the probe).
    std::string operator()() const {
        if (!spin.function) return {};
        uint64_t ns = kQueueAheadNs;
        void* args[] = {&ns};
        return spin.gpu->check(spin.gpu->driver().cuLaunchKernel(spin.function, 1, 1, 1, 1, 1, 1, 0, nullptr, args,
                                                                  nullptr),
                               "cuLaunchKernel(spin_wait)");
    }
};

// Times case number `c` of the run with one variant into *r. Returns "" or the first error.
std::string time_case(wideattn_context* ctx, const GpuDevice& gpu, const BenchOptions& o, const HostProblem& h,
                      size_t c, const InputPools& pools, const QueueAhead& ahead, CaseRecord* r) {
    CaseBuffers b;
    std::string err = upload_case(gpu, h, c, r->variant, o.reference, pools, &b);
    wideattn_prefill_params p = case_params(h, b, r->variant, o.reference);
    p.num_splits = static_cast<int32_t>(o.splits);
    RebuildScratch scratch;  // rebuild variants: a dense scratch, table_stride pages a sequence
    wideattn_prefill_params kv = p;  // the K + V call on the scratch (rebuild variants)
    if (err.empty() && r->variant.rebuild) {
        err = scratch.create(gpu, h, h.table_stride);
        kv = k_and_v_call(p, scratch.out);
    }
    wideattn_prefill_params& planned = r->variant.rebuild ? kv : p;
    if (err.empty()) err = attach_workspace(ctx, gpu, &planned, &b);
    if (err.empty()) err = plan_case(ctx, gpu, planned, r);
    if (err.empty() && r->variant.rebuild) r->kernel = std::string(kRebuildVariant) + "+" + r->kernel;
    if (err.empty())
        err = time_launches(gpu, static_cast<int>(o.warmup), static_cast<int>(o.reps),
                            [&]() -> std::string {
                                if (r->variant.rebuild &&
                                    wideattn_k_from_v_rebuild(ctx, &p, &scratch.out, nullptr) != WIDEATTN_OK)
                                    return wideattn_last_error();
                                if (wideattn_prefill(ctx, &planned, nullptr) != WIDEATTN_OK)
                                    return wideattn_last_error();
                                return {};
                            },
                            &r->t, [&] { return ahead(); });
    return err;
}

// The record of one case and variant before timing: shapes, FLOPs, K/V bytes, hints.
CaseRecord new_record(const BenchCase& bc, const HostProblem& h, const BenchVariant& variant) {
    CaseRecord r;
    r.bc = bc;
    r.variant = variant;
    r.max_seqlen_q = max_seqlen_q(h);
    r.max_seqlen_k = max_seqlen_k(h);
    r.head_dim = h.spec.head_dim;
    r.block_size = h.spec.block_size;
    r.flops = h.flops();
    r.kv_bytes = kv_read_bytes(h, variant.e4m3_kv, variant.k_from_v);
    return r;
}

// The contexts of a run: `main`, and with --pdl both `pdl_off`, opened with WIDEATTN_PDL=0, for
// the variants with pdl "off".
struct BenchContexts {
    wideattn_context* main = nullptr;
    wideattn_context* pdl_off = nullptr;
    wideattn_context* of(const BenchVariant& v) const { return pdl_off && v.pdl == kPdlOff ? pdl_off : main; }
};

// Why --kernels leaves `variant` out on problem h, or "": a single_token (few_tokens) kernel runs
// side by side only on cases of at most 1 (8) query tokens per sequence, the calls it serves on
// its own (pinned, it would serve any call, with one block per query token or per 8: seconds a
// run on a long prompt). --kernel NAME runs its kernel on every case.
std::string side_by_side_skip(const wideattn_context* ctx, const BenchOptions& o, const HostProblem& h,
                              const BenchVariant& variant) {
    const auto num_seqs = static_cast<int32_t>(h.spec.q_lens.size());
    if (o.kernels_flag.empty() || variant.rebuild || kernel_serves_alone(ctx, variant.kernel, h.total_q, num_seqs))
        return {};
    const int32_t limit = kernel_alone_tokens_per_seq(ctx, variant.kernel);
    return variant.kernel + " skipped: a " + (limit == 1 ? kFeatureSingleToken : kFeatureFewTokens) +
           " kernel, timed only where total_q <= " + (limit == 1 ? "" : std::to_string(limit) + " x ") +
           "num_seqs (here " + std::to_string(h.total_q) + " over " + std::to_string(num_seqs) + ")";
}

// --block-timeline: the block records of the case's launches (block_timeline.h), or a note that
// no loaded kernel keeps them; false after printing the driver error as the case's error.
bool print_block_timeline(wideattn_context* ctx, const GpuDevice& gpu, const std::string& case_name) {
    int modules = 0;
    const std::string err = drain_block_timeline(ctx, gpu, stdout, &modules);
    if (!err.empty()) {
        std::printf("%-24s error: --block-timeline: %s\n", case_name.c_str(), err.c_str());
        return false;
    }
    if (modules == 0)
        std::printf("%-24s note: --block-timeline: no kernel of this case keeps block records (built without "
                    "-DWIDEATTN_BLOCK_TIMELINE_RECORDS)\n",
                    case_name.c_str());
    return true;
}

// Times every selected case with every variant, printing one row each into *records (a note for
// a variant side_by_side_skip leaves out). Returns the number of cases that failed.
int run_suite(const BenchContexts& contexts, const GpuDevice& gpu, const BenchOptions& o,
              const std::vector<BenchCase>& selected, const std::vector<BenchVariant>& variants,
              const InputPools& pools, const QueueAhead& ahead, const RunRates& rates,
              std::vector<CaseRecord>* records) {
    print_table_header();
    int failures = 0;
    for (size_t c = 0; c < selected.size(); ++c) {
        const BenchCase& bc = selected[c];
        const HostProblem h = bench_problem(bc, c);
        for (const BenchVariant& variant : variants) {
            wideattn_context* ctx = contexts.of(variant);
            if (const std::string why = side_by_side_skip(ctx, o, h, variant); !why.empty()) {
                std::printf("%-24s note: %s\n", bc.name.c_str(), why.c_str());
                continue;
            }
            const bool pinned = !variant.kernel.empty() && !variant.rebuild;  // a rebuild pins nothing
            wideattn_set_prefill_kernel(ctx, pinned ? variant.kernel.c_str() : nullptr);
            CaseRecord r = new_record(bc, h, variant);
            const std::string err = time_case(ctx, gpu, o, h, c, pools, ahead, &r);
            if (!err.empty()) {
                std::printf("%-24s error: %s\n", bc.name.c_str(), err.c_str());
                ++failures;
                continue;
            }
            print_row(r, rates);
            records->push_back(r);
            if (o.block_timeline && !print_block_timeline(ctx, gpu, bc.name)) ++failures;
        }
    }
    return failures;
}

// Writes the --json report; false after printing that it could not.
bool write_json(const BenchOptions& o, const GpuDevice& gpu, const RunRates& rates,
                const std::vector<CaseRecord>& records) {
    std::ofstream out(o.json_path);
    const std::time_t now = std::time(nullptr);
    char date[32];
    std::strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%SZ", std::gmtime(&now));
    RunInfo info{date, gpu.name(), o.commit, o.suite, o.reps, o.warmup, o.timing, o.e4m3_scale};
    write_report_json(out, info, rates, records);
    if (!out) {
        std::fprintf(stderr, "wideattn bench: cannot write --json '%s'\n", o.json_path.c_str());
        return false;
    }
    return true;
}

// Marks the K-from-V variants of --kfv-cos-sin table as reading a cos / sin table; "" or the usage
// error when no variant makes K-from-V calls.
std::string use_cos_sin_tables(const BenchOptions& o, std::vector<BenchVariant>* variants) {
    if (o.kfv_cos_sin != kKfvCosSinTable) return {};
    bool any = false;
    for (BenchVariant& v : *variants) any |= (v.cos_sin_table = v.k_from_v);
    if (any) return {};
    return std::string("--kfv-cos-sin ") + kKfvCosSinTable +
           " gives K-from-V calls a cos / sin table, and no variant makes K-from-V calls: name a kernel that serves "
           "only them with --kernel or --kernels (decode_bf16kfv_d512, decode_e4m3kfv_d512)";
}

// The variants of the run (both K/V dtypes for --suite decode; with --pdl each labelled with its
// setting, and with --pdl both each twice, on then off); "" or the usage error.
std::string run_variants(wideattn_context* ctx, const BenchOptions& o, std::vector<BenchVariant>* variants) {
    if (!o.decode_suite()) {
        const std::string err = bench_variants(ctx, o.kernel_flag, o.kernels_flag, o.e4m3_kv, o.e4m3_q, variants);
        if (!err.empty()) return err;
    } else {
        // bf16 K/V, e4m3 K/V in the engine layout, e4m3 K/V with V transposed (the layout of the
        // FP8 P V prefill kernels; left out where no kernel of that layout runs: keep_runnable).
        BenchVariant transposed{"", true, false};
        transposed.v_transposed = true;
        *variants = {BenchVariant{"", false, false}, BenchVariant{"", true, false}, transposed};
    }
    if (const std::string err = use_cos_sin_tables(o, variants); !err.empty()) return err;
    if (o.pdl.empty()) return {};
    std::vector<BenchVariant> labelled;
    for (BenchVariant v : *variants)
        for (const char* setting : {kPdlOn, kPdlOff}) {
            if (o.pdl != kPdlBoth && o.pdl != setting) continue;
            v.pdl = setting;
            labelled.push_back(v);
        }
    *variants = labelled;
    return {};
}

// Drops the dispatcher's transposed-V variants (the decode suite's) when no prefill kernel of the
// bundle that reads V transposed runs on this GPU, with a note.
void keep_runnable(const wideattn_context* ctx, const GpuDevice& gpu, std::vector<BenchVariant>* variants) {
    const std::vector<RunnableKernel> kernels = runnable_kernels(ctx, gpu.cc_major(), gpu.cc_minor());
    const bool transposed_runs = std::any_of(kernels.begin(), kernels.end(), [](const RunnableKernel& k) {
        return k.v_transposed && k.kind == kKindPrefill;
    });
    if (transposed_runs) return;
    const auto before = variants->size();
    variants->erase(std::remove_if(variants->begin(), variants->end(),
                                   [](const BenchVariant& v) { return v.kernel.empty() && v.v_transposed; }),
                    variants->end());
    if (variants->size() != before)
        std::printf("note: no kernel of this bundle reads V transposed on this GPU: the e4m3 K/V cases with V "
                    "transposed are left out\n");
}

// Opens the bundle with WIDEATTN_PDL set to `value` for the open (NULL: as the environment has
// it), then restores the variable; nullptr after printing why it could not.
wideattn_context* open_with_pdl(const std::string& bundle_dir, const char* value) {
    if (!value) return open_bundle(bundle_dir, "bench");
    const char* before = std::getenv(kPdlEnv);
    const bool had = before != nullptr;
    const std::string saved = had ? before : "";
    setenv(kPdlEnv, value, 1);
    wideattn_context* ctx = open_bundle(bundle_dir, "bench");
    if (had)
        setenv(kPdlEnv, saved.c_str(), 1);
    else
        unsetenv(kPdlEnv);
    return ctx;
}

// The contexts --pdl asks for (one, or with "both" one of each); false after printing why not.
bool open_contexts(const BenchOptions& o, const std::string& bundle_dir, BenchContexts* contexts) {
    const char* main_value = o.pdl.empty() ? nullptr : o.pdl == kPdlOff ? kPdlEnvOff : kPdlEnvOn;
    contexts->main = open_with_pdl(bundle_dir, main_value);
    if (!contexts->main) return false;
    if (o.pdl != kPdlBoth) return true;
    contexts->pdl_off = open_with_pdl(bundle_dir, kPdlEnvOff);
    return contexts->pdl_off != nullptr;
}

void close_contexts(const BenchContexts& contexts) {
    wideattn_close(contexts.main);
    wideattn_close(contexts.pdl_off);
}

// Re-measures the ceilings at the end of the run and prints them.
void measure_rates_after(const GpuDevice& gpu, const std::string& probe_dir, bool mma_measured, RunRates* rates) {
    if (mma_measured) {
        measure_mma_peak(gpu, probe_dir, &rates->mma_after);
        std::printf("mma.sync bf16 register-only rate after the suite: %.1f TFLOP/s\n", rates->mma_after);
    }
    if (rates->wgmma_measured) {
        const std::string err = measure_wgmma_rates(gpu, probe_dir, &rates->wgmma_e4m3_after, &rates->wgmma_bf16_after);
        if (err.empty())
            std::printf("wgmma dense rate after the suite: %.1f TFLOP/s e4m3, %.1f TFLOP/s bf16\n",
                        rates->wgmma_e4m3_after, rates->wgmma_bf16_after);
        else
            std::printf("wgmma rates after the suite not measured: %s\n", err.c_str());
    }
    if (rates->copy_bytes > 0) {
        const std::string err = measure_copy_bandwidth(gpu, &rates->copy_after);
        if (err.empty())
            std::printf("copy bandwidth after the suite: %.1f GB/s\n", rates->copy_after);
        else
            std::printf("copy bandwidth after the suite not measured: %s\n", err.c_str());
    }
    if (rates->read_bytes > 0) {
        const std::string err = measure_read_bandwidth(gpu, probe_dir, &rates->read_after);
        if (err.empty())
            std::printf("read bandwidth after the suite: %.1f GB/s\n", rates->read_after);
        else
            std::printf("read bandwidth after the suite not measured: %s\n", err.c_str());
    }
}

}  // namespace

int bench_main(int argc, char** argv) {
    BenchOptions o;
    if (const int status = parse_options(argc, argv, &o); status != kContinue) return status;
    std::vector<BenchCase> selected;
    if (!select_cases(o, &selected) || !options_combine(o)) return 2;
    if (!o.json_path.empty() && !output_writable("bench", "--json", o.json_path)) return 2;
    BenchContexts contexts;
    if (!open_contexts(o, resolve_bundle_dir(o.bundle_flag, argv[0]), &contexts)) {
        close_contexts(contexts);
        return 2;
    }
    wideattn_context* ctx = contexts.main;
    std::vector<BenchVariant> variants;
    const std::string variant_error = run_variants(ctx, o, &variants);
    if (!variant_error.empty()) {
        std::fprintf(stderr, "wideattn bench: %s\n", variant_error.c_str());
        close_contexts(contexts);
        return 2;
    }
    const bool any_e4m3 =
        std::any_of(variants.begin(), variants.end(), [](const BenchVariant& v) { return v.e4m3_kv; });
    const bool any_decode = std::any_of(selected.begin(), selected.end(), [](const BenchCase& c) { return c.decode; });
    wideattn_status status;
    std::string error;
    std::unique_ptr<GpuDevice> gpu = GpuDevice::open(static_cast<int>(o.device), &status, &error);
    if (!gpu) {
        std::fprintf(stderr, "wideattn bench: %s: %s\n", wideattn_status_string(status), error.c_str());
        close_contexts(contexts);
        return 2;
    }
    const std::string probe_dir = executable_dir() + "/" + kProbeSubdir;  // <stem>.<arch>.cubin
    QueueAhead ahead;
    if (o.timing == kTimingQueued) {
        const std::string err = ahead.spin.load(*gpu, probe_dir, "spin_wait", "wideattn_spin_wait");
        if (!err.empty()) {
            std::fprintf(stderr, "wideattn bench: --timing %s: %s\n", kTimingQueued, err.c_str());
            close_contexts(contexts);
            return 2;
        }
        std::printf("timing: each call queued behind a %.0f us wait on the GPU (the GPU time of its kernels)\n",
                    kQueueAheadNs / 1e3);
    }
    keep_runnable(ctx, *gpu, &variants);
    RunRates rates;
    std::string mma_error;
    measure_rates_before(*gpu, o, any_e4m3, any_decode, probe_dir, &rates, &mma_error);
    const InputPools pools = make_pools(any_e4m3, o.e4m3_scale);
    std::vector<CaseRecord> records;
    int failures = run_suite(contexts, *gpu, o, selected, variants, pools, ahead, rates, &records);
    measure_rates_after(*gpu, probe_dir, mma_error.empty(), &rates);
    print_decode_summary(records, rates);
    if (!o.json_path.empty() && !write_json(o, *gpu, rates, records)) ++failures;
    close_contexts(contexts);
    return failures ? 1 : 0;
}

}  // namespace wideattn::cli
