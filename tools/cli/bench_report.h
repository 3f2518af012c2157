// bench_report.h - what `wideattn bench` prints and writes once a case is timed: one record per
// (case, variant), the table rows, the prefill figures (% of the mma.sync and wgmma rates), the
// decode figures (GB/s of K/V read, % of the copy and read-only bandwidths measured in the same
// run, the FP8/BF16 time ratio, mixed / (chunk + decodes)) and the --json report. Host-only: the
// CPU tests check it on made-up records.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "tools/cli/bench_suite.h"

namespace wideattn::cli {

// One timed (case, variant) of a run.
struct CaseRecord {
    BenchCase bc;
    BenchVariant variant;
    std::string kernel = "?";   // the prefill kernel that ran (name from the manifest)
    int32_t num_splits = 1;     // split-KV blocks per (token tile, KV head): wideattn_plan_launch
    int64_t workspace_bytes = 0;
    int32_t max_seqlen_q = 0, max_seqlen_k = 0, head_dim = 0, block_size = 0;
    double flops = 0;
    int64_t kv_bytes = 0;       // kv_read_bytes of the case with the variant's K/V dtype
    Timing t;
};

// The ceilings of a run: mma.sync and (sm_90) dense wgmma rates (TFLOP/s), the device-to-device
// copy bandwidth (GB/s, read + write) and the read-only streaming bandwidth (GB/s read), each
// measured at the start and (but the e4m3 mma.sync rates) at the end of the run (0: not measured).
struct RunRates {
    double mma_before = 0, mma_after = 0;
    double e4m3_register = 0, e4m3_streamed = 0;
    bool e4m3_measured = false;
    double wgmma_e4m3_before = 0, wgmma_e4m3_after = 0;  // m64n256k32 e4m3
    double wgmma_bf16_before = 0, wgmma_bf16_after = 0;  // m64n256k16 bf16
    bool wgmma_measured = false;                         // the probes ran (sm_90 with their cubins)
    double copy_before = 0, copy_after = 0;
    int64_t copy_bytes = 0;  // bytes of one timed cuMemcpyDtoD (counted twice: read + write)
    double read_before = 0, read_after = 0;
    int64_t read_bytes = 0;  // bytes one launch of the read probe reads (counted once)
};

// What the JSON header records besides the rates.
struct RunInfo {
    std::string tool_date, gpu, commit, suite;
    long long reps = 0, warmup = 0;
    std::string timing = "call";  // bench --timing: "call" or "queued"
    double e4m3_scale = 0;        // bench --e4m3-scale: the per-tensor scale of every e4m3 input
};

double record_tflops(const CaseRecord& r);
// GB/s of K/V read (kv_bytes over the median time); 0 without a time.
double record_kv_gbps(const CaseRecord& r);
// 100 * value / ceiling, 0 when the ceiling is unknown (0).
double percent_of(double value, double ceiling);
// percent_of as the text tables print it, right-aligned in `width` characters ("12.3%"), or "-"
// when the ceiling was not measured (<= 0).
std::string percent_text(double value, double ceiling, int width);

// The dense wgmma rate (measured at the start of the run) a prefill record's TFLOP/s is compared
// with: the FP8 rate for the 8-bit kernels (e4m3 K/V; *fp8 = true), the bf16 rate for bf16
// entries of the Hopper tier (kernels named wgmma_*); 0 for decode cases, other kernels, and
// when the rate was not measured.
double wgmma_ceiling(const CaseRecord& r, const RunRates& rates, bool* fp8 = nullptr);

// The median time of the e4m3-K/V, bf16-Q record over that of the bf16 record of the same case
// with the same kernel choice; 0 when `r` is not such an e4m3 record or either is missing.
double fp8_bf16_ratio(const std::vector<CaseRecord>& records, const CaseRecord& r);

// mixed / (chunk + decodes) of kDecodeMixedParts, per dtype variant that ran all three.
struct MixedRatio {
    BenchVariant variant;
    double mixed_ms = 0, chunk_ms = 0, decodes_ms = 0, ratio = 0;
};
std::vector<MixedRatio> mixed_ratios(const std::vector<CaseRecord>& records);

// The table printed while the run goes: header, and one row per record (% of the ceilings
// measured at the start; decode columns "-" for prefill cases, %wgmma "-" where wgmma_ceiling is 0).
void print_table_header();
void print_row(const CaseRecord& r, const RunRates& rates);

// The decode summary at the end of the run: per decode case, ms, GB/s, % of both copy and both
// read-only bandwidths per variant and the FP8/BF16 time ratio; then the mixed-batch ratios.
void print_decode_summary(const std::vector<CaseRecord>& records, const RunRates& rates);

// The --json report (docs/design.md section 7 lists its fields).
void write_report_json(std::ostream& out, const RunInfo& info, const RunRates& rates,
                       const std::vector<CaseRecord>& records);

std::string json_escape(const std::string& s);

}  // namespace wideattn::cli
