// bench_report.cpp - the table, decode summary and JSON report of `wideattn bench` (see
// bench_report.h).
#include "tools/cli/bench_report.h"

#include <cstdio>
#include <string>

namespace wideattn::cli {
namespace {

constexpr double kMsPerSecond = 1e3;
constexpr double kBytesPerGb = 1e9;
constexpr double kFlopsPerTflop = 1e12;
constexpr const char* kHopperTierPrefix = "wgmma_";  // the Hopper-tier kernels' names (bundle/meson.build)

const char* dtype_name(bool e4m3) { return e4m3 ? "e4m3" : "bf16"; }

// `field` (`, "key": `) and the percentage when the ceiling was measured (> 0); nothing otherwise
// (a ceiling that was not measured has no percentage, not 0).
void json_percent(std::ostream& out, const char* field, double value, double ceiling) {
    if (ceiling > 0) out << field << percent_of(value, ceiling);
}

bool same_choice(const BenchVariant& a, const BenchVariant& b) {
    return a.kernel == b.kernel && a.e4m3_kv == b.e4m3_kv && a.e4m3_q == b.e4m3_q && a.v_transposed == b.v_transposed &&
           a.cos_sin_table == b.cos_sin_table && a.pdl == b.pdl;
}

// The case name as the tables print it: with " vT" for the dispatcher's choice over a transposed
// V cache (a named kernel's layout follows from its name), " cos_sin" for K-from-V calls with a
// cos / sin table, and the variant's --pdl setting.
std::string row_label(const CaseRecord& r) {
    std::string label = r.bc.name;
    if (r.variant.kernel.empty() && r.variant.v_transposed) label += " vT";
    if (r.variant.cos_sin_table) label += " cos_sin";
    return r.variant.pdl.empty() ? label : label + " pdl=" + r.variant.pdl;
}

// The record of case `name` with the variant `v`, or nullptr.
const CaseRecord* find_record(const std::vector<CaseRecord>& records, const std::string& name, const BenchVariant& v) {
    for (const CaseRecord& r : records)
        if (r.bc.name == name && same_choice(r.variant, v)) return &r;
    return nullptr;
}

template <typename T>
void json_list(std::ostream& out, const std::vector<T>& values) {
    out << "[";
    for (size_t i = 0; i < values.size(); ++i) out << (i ? ", " : "") << values[i];
    out << "]";
}

void case_json(std::ostream& out, const CaseRecord& r, const RunRates& rates, const std::vector<CaseRecord>& records) {
    const double tflops = record_tflops(r);
    out << "    {\"case\": \"" << json_escape(r.bc.name) << "\", \"kernel\": \"" << json_escape(r.kernel)
        << "\", \"q_lens\": ";
    json_list(out, r.bc.q_lens);
    out << ", \"contexts\": ";
    json_list(out, r.bc.contexts);
    out << ", \"q_dtype\": \"" << dtype_name(r.variant.e4m3_q) << "\", \"kv_dtype\": \""
        << dtype_name(r.variant.e4m3_kv) << "\", \"num_q_heads\": " << r.bc.hq << ", \"num_kv_heads\": " << r.bc.hkv
        << ", \"head_dim\": " << r.head_dim << ", \"block_size\": " << r.block_size << ", \"flops\": " << r.flops
        << ", \"median_ms\": " << r.t.median_ms << ", \"min_ms\": " << r.t.min_ms << ", \"p90_ms\": " << r.t.p90_ms
        << ", \"tflops\": " << tflops;
    json_percent(out, ", \"pct_mma_rate\": ", tflops, rates.mma_before);
    out << ", \"max_seqlen_q\": " << r.max_seqlen_q << ", \"max_seqlen_k\": " << r.max_seqlen_k
        << ", \"num_splits\": " << r.num_splits << ", \"workspace_bytes\": " << r.workspace_bytes
        << ", \"decode\": " << (r.bc.decode ? "true" : "false");
    if (r.variant.v_transposed) out << ", \"v_transposed\": true";
    if (r.variant.k_from_v) out << ", \"kfv_cos_sin\": \"" << (r.variant.cos_sin_table ? "table" : "formula") << "\"";
    if (!r.variant.pdl.empty()) out << ", \"pdl\": \"" << json_escape(r.variant.pdl) << "\"";
    bool fp8 = false;
    const double wgmma = wgmma_ceiling(r, rates, &fp8);
    if (wgmma > 0 && fp8) out << ", \"pct_fp8_wgmma_rate\": " << percent_of(tflops, wgmma);
    if (wgmma > 0 && !fp8) out << ", \"pct_wgmma_rate\": " << percent_of(tflops, wgmma);
    if (r.bc.decode) {
        const double gbps = record_kv_gbps(r);
        out << ", \"kv_bytes\": " << r.kv_bytes << ", \"kv_gbps\": " << gbps;
        json_percent(out, ", \"pct_copy_bw_before\": ", gbps, rates.copy_before);
        json_percent(out, ", \"pct_copy_bw_after\": ", gbps, rates.copy_after);
        json_percent(out, ", \"pct_read_bw_before\": ", gbps, rates.read_before);
        json_percent(out, ", \"pct_read_bw_after\": ", gbps, rates.read_after);
    }
    const double ratio = fp8_bf16_ratio(records, r);
    if (ratio > 0) out << ", \"fp8_bf16_time_ratio\": " << ratio;
    out << "}";
}

void mixed_json(std::ostream& out, const std::vector<MixedRatio>& ratios) {
    out << ",\n  \"mixed_batch_ratios\": [";
    for (size_t i = 0; i < ratios.size(); ++i) {
        const MixedRatio& m = ratios[i];
        out << (i ? ",\n" : "\n") << "    {\"mixed\": \"" << kDecodeMixedParts.mixed << "\", \"chunk\": \""
            << kDecodeMixedParts.chunk << "\", \"decodes\": \"" << kDecodeMixedParts.decodes << "\", \"kernel\": \""
            << json_escape(m.variant.kernel) << "\", \"q_dtype\": \"" << dtype_name(m.variant.e4m3_q)
            << "\", \"kv_dtype\": \"" << dtype_name(m.variant.e4m3_kv) << "\""
            << (m.variant.v_transposed ? ", \"v_transposed\": true" : "")
            << (m.variant.pdl.empty() ? "" : ", \"pdl\": \"" + json_escape(m.variant.pdl) + "\"")
            << ", \"mixed_ms\": " << m.mixed_ms
            << ", \"chunk_ms\": " << m.chunk_ms << ", \"decodes_ms\": " << m.decodes_ms << ", \"ratio\": " << m.ratio
            << "}";
    }
    out << (ratios.empty() ? "]" : "\n  ]");
}

}  // namespace

std::string json_escape(const std::string& s) {
    std::string out;
    for (char c : s) {
        if (c == '"' || c == '\\') out += '\\';
        out += c;
    }
    return out;
}

double record_tflops(const CaseRecord& r) {
    return r.t.median_ms > 0 ? r.flops / (r.t.median_ms / kMsPerSecond) / kFlopsPerTflop : 0.0;
}

double record_kv_gbps(const CaseRecord& r) {
    return r.t.median_ms > 0 ? static_cast<double>(r.kv_bytes) / (r.t.median_ms / kMsPerSecond) / kBytesPerGb : 0.0;
}

double percent_of(double value, double ceiling) { return ceiling > 0 ? 100.0 * value / ceiling : 0.0; }

std::string percent_text(double value, double ceiling, int width) {
    char text[32];
    if (ceiling > 0)
        std::snprintf(text, sizeof text, "%*.1f%%", width - 1, percent_of(value, ceiling));
    else
        std::snprintf(text, sizeof text, "%*s", width, "-");
    return text;
}


double wgmma_ceiling(const CaseRecord& r, const RunRates& rates, bool* fp8) {
    if (fp8) *fp8 = r.variant.e4m3_kv;
    if (r.bc.decode || !rates.wgmma_measured) return 0.0;
    if (r.variant.e4m3_kv) return rates.wgmma_e4m3_before;
    return r.kernel.rfind(kHopperTierPrefix, 0) == 0 ? rates.wgmma_bf16_before : 0.0;
}

double fp8_bf16_ratio(const std::vector<CaseRecord>& records, const CaseRecord& r) {
    if (!r.variant.e4m3_kv || r.variant.e4m3_q) return 0.0;
    BenchVariant bf16{r.variant.kernel, false, false};
    bf16.pdl = r.variant.pdl;
    const CaseRecord* base = find_record(records, r.bc.name, bf16);
    if (!base || base->t.median_ms <= 0) return 0.0;
    return r.t.median_ms / base->t.median_ms;
}

std::vector<MixedRatio> mixed_ratios(const std::vector<CaseRecord>& records) {
    std::vector<MixedRatio> ratios;
    for (const CaseRecord& r : records) {
        if (r.bc.name != kDecodeMixedParts.mixed) continue;
        const CaseRecord* chunk = find_record(records, kDecodeMixedParts.chunk, r.variant);
        const CaseRecord* decodes = find_record(records, kDecodeMixedParts.decodes, r.variant);
        if (!chunk || !decodes || chunk->t.median_ms + decodes->t.median_ms <= 0) continue;
        MixedRatio m{r.variant, r.t.median_ms, chunk->t.median_ms, decodes->t.median_ms, 0};
        m.ratio = m.mixed_ms / (m.chunk_ms + m.decodes_ms);
        ratios.push_back(m);
    }
    return ratios;
}

void print_table_header() {
    std::printf("%-24s %-16s %4s %4s %10s %10s %10s %9s %7s %8s %7s %7s %7s\n", "case", "kernel", "kv", "spl",
                "median_ms", "min_ms", "p90_ms", "TFLOP/s", "%mma", "GB/s", "%copy", "%read", "%wgmma");
}

void print_row(const CaseRecord& r, const RunRates& rates) {
    const double tflops = record_tflops(r);
    char decode[48] = "       -       -       -";
    if (r.bc.decode) {
        const double gbps = record_kv_gbps(r);
        std::snprintf(decode, sizeof decode, "%8.1f %s %s", gbps, percent_text(gbps, rates.copy_before, 7).c_str(),
                      percent_text(gbps, rates.read_before, 7).c_str());
    }
    const double wgmma = wgmma_ceiling(r, rates);
    std::printf("%-24s %-16s %4s %4d %10.3f %10.3f %10.3f %9.1f %s %s %s\n", row_label(r).c_str(),
                r.kernel.c_str(), dtype_name(r.variant.e4m3_kv), r.num_splits, r.t.median_ms, r.t.min_ms, r.t.p90_ms,
                tflops, percent_text(tflops, rates.mma_before, 7).c_str(), decode,
                percent_text(tflops, wgmma, 7).c_str());
    std::fflush(stdout);
}

void print_decode_summary(const std::vector<CaseRecord>& records, const RunRates& rates) {
    bool any = false;
    for (const CaseRecord& r : records) any = any || r.bc.decode;
    if (!any) return;
    std::printf("\ndecode: GB/s of K/V read (every visible key once per KV head); %% of the copy bandwidth at the\n"
                "start (%.1f GB/s) and end (%.1f GB/s) of the run, %%rd- of the read-only streaming bandwidth at\n"
                "the start (%.1f GB/s) and end (%.1f GB/s); fp8/bf16 = e4m3-K/V time / bf16 time\n",
                rates.copy_before, rates.copy_after, rates.read_before, rates.read_after);
    std::printf("%-24s %-16s %4s %4s %10s %8s %7s %7s %9s %7s %8s\n", "case", "kernel", "kv", "spl", "median_ms",
                "GB/s", "%start", "%end", "%rd-start", "%rd-end", "fp8/bf16");
    for (const CaseRecord& r : records) {
        if (!r.bc.decode) continue;
        const double gbps = record_kv_gbps(r);
        const double ratio = fp8_bf16_ratio(records, r);
        char ratio_text[16] = "-";
        if (ratio > 0) std::snprintf(ratio_text, sizeof ratio_text, "%.3f", ratio);
        std::printf("%-24s %-16s %4s %4d %10.3f %8.1f %s %s %s %s %8s\n", row_label(r).c_str(), r.kernel.c_str(),
                    dtype_name(r.variant.e4m3_kv), r.num_splits, r.t.median_ms, gbps,
                    percent_text(gbps, rates.copy_before, 7).c_str(), percent_text(gbps, rates.copy_after, 7).c_str(),
                    percent_text(gbps, rates.read_before, 9).c_str(), percent_text(gbps, rates.read_after, 7).c_str(),
                    ratio_text);
    }
    for (const MixedRatio& m : mixed_ratios(records)) {
        const std::string pdl = m.variant.pdl.empty() ? "" : ", pdl=" + m.variant.pdl;
        const char* layout = m.variant.v_transposed ? ", V transposed" : "";
        std::printf("%s (%s K/V%s%s): %.3f ms / (%s %.3f ms + %s %.3f ms) = %.3f\n", kDecodeMixedParts.mixed,
                    dtype_name(m.variant.e4m3_kv), layout, pdl.c_str(), m.mixed_ms, kDecodeMixedParts.chunk, m.chunk_ms,
                    kDecodeMixedParts.decodes, m.decodes_ms, m.ratio);
    }
}

void write_report_json(std::ostream& out, const RunInfo& info, const RunRates& rates,
                       const std::vector<CaseRecord>& records) {
    out << "{\n  \"tool\": \"wideattn bench\",\n  \"date\": \"" << json_escape(info.tool_date) << "\",\n  \"gpu\": \""
        << json_escape(info.gpu) << "\",\n  \"commit\": \"" << json_escape(info.commit) << "\",\n  \"suite\": \""
        << json_escape(info.suite) << "\",\n  \"timing\": \"" << json_escape(info.timing) << "\",\n  \"e4m3_scale\": "
        << info.e4m3_scale << ",\n  \"reps\": " << info.reps << ",\n  \"warmup\": " << info.warmup
        << ",\n  \"mma_rate_tflops_before\": " << rates.mma_before << ",\n  \"mma_rate_tflops_after\": "
        << rates.mma_after;
    if (rates.wgmma_measured)
        out << ",\n  \"wgmma_e4m3_rate_tflops_before\": " << rates.wgmma_e4m3_before
            << ",\n  \"wgmma_e4m3_rate_tflops_after\": " << rates.wgmma_e4m3_after
            << ",\n  \"wgmma_bf16_rate_tflops_before\": " << rates.wgmma_bf16_before
            << ",\n  \"wgmma_bf16_rate_tflops_after\": " << rates.wgmma_bf16_after;
    if (rates.e4m3_measured)
        out << ",\n  \"mma_e4m3_register_rate_tflops\": " << rates.e4m3_register
            << ",\n  \"mma_e4m3_streamed_rate_tflops\": " << rates.e4m3_streamed;
    if (rates.copy_bytes > 0)
        out << ",\n  \"copy_bytes\": " << rates.copy_bytes << ",\n  \"copy_bandwidth_gbps_before\": "
            << rates.copy_before << ",\n  \"copy_bandwidth_gbps_after\": " << rates.copy_after;
    if (rates.read_bytes > 0)
        out << ",\n  \"read_bytes\": " << rates.read_bytes << ",\n  \"read_bandwidth_gbps_before\": "
            << rates.read_before << ",\n  \"read_bandwidth_gbps_after\": " << rates.read_after;
    out << ",\n  \"cases\": [\n";
    for (size_t i = 0; i < records.size(); ++i) {
        if (i) out << ",\n";
        case_json(out, records[i], rates, records);
    }
    out << "\n  ]";
    const std::vector<MixedRatio> ratios = mixed_ratios(records);
    if (!ratios.empty()) mixed_json(out, ratios);
    out << "\n}\n";
}

}  // namespace wideattn::cli
