// bench_report.h - what `wideattn bench` prints and writes once a case is timed: one record per
// (case, variant), the table rows, the decode figures (GB/s of K/V read, % of the copy bandwidth
// measured in the same run, the FP8/BF16 time ratio, mixed / (chunk + decodes)) and the --json
// report. Host-only: the CPU tests check it on made-up records.
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

// The ceilings of a run: mma.sync rates (TFLOP/s) and the device-to-device copy bandwidth
// (GB/s, read + write), each measured at the start and at the end of the run (0: not measured).
struct RunRates {
    double mma_before = 0, mma_after = 0;
    double e4m3_register = 0, e4m3_streamed = 0;
    bool e4m3_measured = false;
    double copy_before = 0, copy_after = 0;
    int64_t copy_bytes = 0;  // bytes of one timed cuMemcpyDtoD (counted twice: read + write)
};

// What the JSON header records besides the rates.
struct RunInfo {
    std::string tool_date, gpu, commit, suite;
    long long reps = 0, warmup = 0;
};

double record_tflops(const CaseRecord& r);
// GB/s of K/V read (kv_bytes over the median time); 0 without a time.
double record_kv_gbps(const CaseRecord& r);
// 100 * value / ceiling, 0 when the ceiling is unknown (0).
double percent_of(double value, double ceiling);

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
// measured at the start; decode columns "-" for prefill cases).
void print_table_header();
void print_row(const CaseRecord& r, const RunRates& rates);

// The decode summary at the end of the run: per decode case, ms, GB/s and % of both copy
// bandwidths per variant and the FP8/BF16 time ratio; then the mixed-batch ratios.
void print_decode_summary(const std::vector<CaseRecord>& records, const RunRates& rates);

// The --json report (docs/design.md section 7 lists its fields).
void write_report_json(std::ostream& out, const RunInfo& info, const RunRates& rates,
                       const std::vector<CaseRecord>& records);

std::string json_escape(const std::string& s);

}  // namespace wideattn::cli
