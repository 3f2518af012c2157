// test_bench_report.cpp - `wideattn bench`'s decode suite and report without a GPU: the suite's
// shapes and names (the three earlier decode cases still found by name), the split hints, the K/V
// byte count, the FP8/BF16 and mixed / (chunk + decodes) ratios (per --pdl setting), the wgmma
// ceiling of each entry, and the JSON report parsed back with the decode, read-bandwidth,
// wgmma-rate and K-from-V cos / sin fields.
#include <doctest/doctest.h>

#include <algorithm>
#include <sstream>
#include <string>
#include <vector>

#include "dispatch/json.h"
#include "tools/cli/bench_report.h"
#include "tools/cli/bench_suite.h"

using namespace wideattn;
using namespace wideattn::cli;

namespace {

const BenchCase& case_named(const std::vector<BenchCase>& suite, const std::string& name) {
    const auto it = std::find_if(suite.begin(), suite.end(), [&](const BenchCase& c) { return c.name == name; });
    REQUIRE_MESSAGE(it != suite.end(), name);
    return *it;
}

// write_report_json's output for these inputs, parsed back (the test case stops if it is not JSON).
JsonValue report_json(const RunInfo& info, const RunRates& rates, const std::vector<CaseRecord>& records) {
    std::ostringstream out;
    write_report_json(out, info, rates, records);
    JsonValue doc;
    std::string err;
    const std::string text = out.str();
    REQUIRE_MESSAGE(parse_json(text, &doc, &err), (err + "\n" + text));
    return doc;
}

// A record of `name` with a variant and a median time (the other timings equal to it).
CaseRecord record(const std::string& name, bool e4m3_kv, double ms, int64_t kv_bytes = 0) {
    CaseRecord r;
    r.bc.name = name;
    r.bc.decode = true;
    r.variant = BenchVariant{"", e4m3_kv, false};
    r.kernel = e4m3_kv ? "mma_e4m3_d512" : "wgmma_bf16_d512";
    r.t.median_ms = r.t.min_ms = r.t.p90_ms = ms;
    r.kv_bytes = kv_bytes;
    return r;
}

}  // namespace

TEST_CASE("bench decode suite: shapes, names, decode flags and the lookup of every case") {
    const std::vector<BenchCase> suite = gemma4_decode_bench_suite();
    struct Shape {
        const char* name;
        size_t count;
        int32_t q_len, context;
    };
    const Shape shapes[] = {{"decode_1_ctx_32k", 1, 1, 32768},    {"decode_1_ctx_128k", 1, 1, 131072},
                            {"decode_8_ctx_32k", 8, 1, 32768},    {"decode_64_ctx_8k", 64, 1, 8192},
                            {"decode_128_ctx_4k", 128, 1, 4096},
                            {"verify5_1_ctx_20k", 1, 5, 20480},   {"verify5_32_ctx_20k", 32, 5, 20480},
                            {"chunk_2k_ctx_4k", 1, 2048, 4096},   {"decode_63_ctx_8k", 63, 1, 8192},
                            {"decode_32_ctx_16k", 32, 1, 16384}, {"verify4_16_ctx_8k", 16, 4, 8192}};
    for (const Shape& s : shapes) {
        const BenchCase& c = case_named(suite, s.name);
        CHECK_MESSAGE(c.q_lens == std::vector<int32_t>(s.count, s.q_len), s.name);
        CHECK_MESSAGE(c.contexts == std::vector<int32_t>(s.count, s.context), s.name);
        CHECK(c.hq == 32);
        CHECK(c.hkv == 4);
    }
    const BenchCase& mixed = case_named(suite, kDecodeMixedParts.mixed);
    REQUIRE(mixed.q_lens.size() == 64);
    CHECK(mixed.q_lens[0] == 2048);
    CHECK(mixed.contexts[0] == 4096);
    CHECK(std::all_of(mixed.q_lens.begin() + 1, mixed.q_lens.end(), [](int32_t q) { return q == 1; }));
    CHECK(std::all_of(mixed.contexts.begin() + 1, mixed.contexts.end(), [](int32_t c) { return c == 8192; }));
    CHECK(std::all_of(suite.begin(), suite.end(), [](const BenchCase& c) { return c.decode; }));
    const std::vector<BenchCase> prefill = gemma4_suite();
    CHECK(std::none_of(prefill.begin(), prefill.end(), [](const BenchCase& c) { return c.decode; }));

    std::vector<BenchCase> found;
    REQUIRE(named_cases("decode_32_ctx_16k,decode_1_ctx_128k,prompt_16k,verify4_16_ctx_8k", "bench", "--list", &found));
    REQUIRE(found.size() == 4);
    CHECK(found[1].name == "decode_1_ctx_128k");
    CHECK(found[2].name == "prompt_16k");
    CHECK_FALSE(found[2].decode);
}

TEST_CASE("bench decode suite: split hints and K/V bytes of a problem") {
    const std::vector<BenchCase> suite = gemma4_decode_bench_suite();
    const HostProblem mixed = bench_problem(case_named(suite, kDecodeMixedParts.mixed), 0);
    CHECK(max_seqlen_q(mixed) == 2048);
    CHECK(max_seqlen_k(mixed) == 8193);
    CHECK(mixed.seq_lens_k[0] == 6144);
    CHECK(kv_read_bytes(mixed, false) == int64_t{2} * (6144 + 63 * 8193) * 4 * 512 * 2);
    const HostProblem single = bench_problem(case_named(suite, "decode_1_ctx_32k"), 1);
    CHECK(max_seqlen_q(single) == 1);
    CHECK(kv_read_bytes(single, false) == int64_t{2} * 32769 * 4 * 512 * 2);
    CHECK(kv_read_bytes(single, true) == int64_t{2} * 32769 * 4 * 512);
}

TEST_CASE("bench report: GB/s, FP8/BF16 ratio and mixed / (chunk + decodes)") {
    std::vector<CaseRecord> records = {
        record(kDecodeMixedParts.mixed, false, 3.0), record(kDecodeMixedParts.mixed, true, 2.0),
        record(kDecodeMixedParts.chunk, false, 1.0), record(kDecodeMixedParts.decodes, false, 1.0),
        record(kDecodeMixedParts.chunk, true, 0.5),  record("decode_1_ctx_32k", false, 2.0, 4000000000),
    };
    CHECK(record_kv_gbps(records[5]) == doctest::Approx(2000.0));
    CHECK(percent_of(1000.0, 4000.0) == doctest::Approx(25.0));
    CHECK(percent_of(1000.0, 0.0) == 0.0);
    CHECK(fp8_bf16_ratio(records, records[1]) == doctest::Approx(2.0 / 3.0));
    CHECK(fp8_bf16_ratio(records, records[0]) == 0.0);  // a bf16 record has no ratio
    CHECK(fp8_bf16_ratio(records, records[4]) == doctest::Approx(0.5));
    const std::vector<MixedRatio> ratios = mixed_ratios(records);  // the e4m3 decodes did not run
    REQUIRE(ratios.size() == 1);
    CHECK_FALSE(ratios[0].variant.e4m3_kv);
    CHECK(ratios[0].ratio == doctest::Approx(1.5));
}

TEST_CASE("bench report: the JSON keeps the existing fields and adds the decode ones") {
    std::vector<CaseRecord> records = {record(kDecodeMixedParts.mixed, false, 3.0, 3000000000),
                                       record(kDecodeMixedParts.chunk, false, 1.0),
                                       record(kDecodeMixedParts.decodes, false, 1.0),
                                       record(kDecodeMixedParts.decodes, true, 0.5, 1000000000)};
    records[0].num_splits = 4;
    records[0].workspace_bytes = 1 << 20;
    records[0].max_seqlen_q = 2048;
    records[1].bc.decode = false;
    RunRates rates;
    rates.mma_before = 600;
    rates.copy_before = 4000;
    rates.copy_after = 2000;
    rates.copy_bytes = int64_t{1} << 30;
    rates.read_before = 5000;
    rates.read_after = 4000;
    rates.read_bytes = int64_t{1} << 30;
    const JsonValue doc =
        report_json(RunInfo{"2026-12-01T00:00:00Z", "GPU \"x\"", "abc", "decode", 20, 3}, rates, records);
    CHECK(doc.find("suite")->string == "decode");
    CHECK(doc.find("timing")->string == "call");  // RunInfo's default: each call between its events
    CHECK(doc.find("gpu")->string == "GPU \"x\"");
    CHECK(doc.find("copy_bandwidth_gbps_before")->number == 4000);
    CHECK(doc.find("copy_bandwidth_gbps_after")->number == 2000);
    CHECK(doc.find("copy_bytes")->number == double(int64_t{1} << 30));
    CHECK(doc.find("mma_rate_tflops_before")->number == 600);
    CHECK(doc.find("read_bytes")->number == double(int64_t{1} << 30));
    CHECK(doc.find("read_bandwidth_gbps_before")->number == 5000);
    CHECK(doc.find("read_bandwidth_gbps_after")->number == 4000);
    CHECK(doc.find("wgmma_e4m3_rate_tflops_before") == nullptr);  // not measured (not sm_90)
    CHECK(doc.find("wgmma_bf16_rate_tflops_after") == nullptr);
    const JsonValue& cases = *doc.find("cases");
    REQUIRE(cases.array.size() == 4);
    const JsonValue& mixed = cases.array[0];
    for (const char* key : {"case", "kernel", "q_lens", "contexts", "q_dtype", "kv_dtype", "num_q_heads", "median_ms",
                            "min_ms", "p90_ms", "tflops", "pct_mma_rate"})
        CHECK_MESSAGE(mixed.find(key) != nullptr, key);
    CHECK(mixed.find("num_splits")->number == 4);
    CHECK(mixed.find("workspace_bytes")->number == 1 << 20);
    CHECK(mixed.find("max_seqlen_q")->number == 2048);
    CHECK(mixed.find("kv_gbps")->number == doctest::Approx(1000.0));
    CHECK(mixed.find("pct_copy_bw_before")->number == doctest::Approx(25.0));
    CHECK(mixed.find("pct_copy_bw_after")->number == doctest::Approx(50.0));
    CHECK(mixed.find("pct_read_bw_before")->number == doctest::Approx(20.0));
    CHECK(mixed.find("pct_read_bw_after")->number == doctest::Approx(25.0));
    CHECK(mixed.find("pct_wgmma_rate") == nullptr);
    CHECK(cases.array[1].find("pct_read_bw_before") == nullptr);  // not a decode case
    CHECK(mixed.find("fp8_bf16_time_ratio") == nullptr);
    CHECK(cases.array[1].find("kv_gbps") == nullptr);  // not a decode case
    CHECK(cases.array[3].find("fp8_bf16_time_ratio")->number == doctest::Approx(0.5));
    CHECK(cases.array[3].find("kv_dtype")->string == "e4m3");
    const JsonValue& ratios = *doc.find("mixed_batch_ratios");
    REQUIRE(ratios.array.size() == 1);
    CHECK(ratios.array[0].find("ratio")->number == doctest::Approx(1.5));
    CHECK(ratios.array[0].find("chunk")->string == kDecodeMixedParts.chunk);
}

TEST_CASE("bench report: a ceiling that was not measured gives no percentage, not 0") {
    CHECK(percent_text(1000.0, 4000.0, 7) == "  25.0%");
    CHECK(percent_text(1000.0, 0.0, 7) == "      -");
    CHECK(percent_text(1000.0, -1.0, 9) == "        -");
    std::vector<CaseRecord> records = {record("decode_1_ctx_32k", false, 2.0, 4000000000),
                                       record("prompt_16k", false, 10.0)};
    records[1].bc.decode = false;
    RunRates rates;  // mma and read probes absent (as without the bench cubins): 0
    rates.copy_before = 4000;
    rates.copy_after = 2000;
    rates.copy_bytes = int64_t{1} << 30;
    const JsonValue doc = report_json(RunInfo{"2026-12-04T00:00:00Z", "GPU", "abc", "decode", 20, 3}, rates, records);
    const JsonValue& cases = *doc.find("cases");
    REQUIRE(cases.array.size() == 2);
    const JsonValue& decode = cases.array[0];
    CHECK(decode.find("pct_copy_bw_before")->number == doctest::Approx(50.0));
    CHECK(decode.find("pct_copy_bw_after")->number == doctest::Approx(100.0));
    CHECK(decode.find("pct_read_bw_before") == nullptr);
    CHECK(decode.find("pct_read_bw_after") == nullptr);
    CHECK(decode.find("pct_mma_rate") == nullptr);
    CHECK(cases.array[1].find("pct_mma_rate") == nullptr);
    CHECK(cases.array[1].find("tflops") != nullptr);
}

TEST_CASE("bench report: --pdl variants pair within their setting and carry it in the JSON") {
    std::vector<CaseRecord> records;
    for (const char* pdl : {"on", "off"}) {
        const double scale = std::string(pdl) == "on" ? 1.0 : 2.0;
        for (CaseRecord r : {record(kDecodeMixedParts.mixed, false, 3.0 * scale),
                             record(kDecodeMixedParts.chunk, false, 1.0 * scale),
                             record(kDecodeMixedParts.decodes, false, 1.0 * scale),
                             record("decode_1_ctx_32k", false, 0.1 * scale), record("decode_1_ctx_32k", true, 0.05)}) {
            r.variant.pdl = pdl;
            records.push_back(r);
        }
    }
    // e4m3 over bf16 of the same setting: 0.05 / 0.1 with PDL, 0.05 / 0.2 without.
    CHECK(fp8_bf16_ratio(records, records[4]) == doctest::Approx(0.5));
    CHECK(fp8_bf16_ratio(records, records[9]) == doctest::Approx(0.25));
    const std::vector<MixedRatio> ratios = mixed_ratios(records);
    REQUIRE(ratios.size() == 2);
    CHECK(ratios[0].variant.pdl == "on");
    CHECK(ratios[1].variant.pdl == "off");
    CHECK(ratios[0].mixed_ms == doctest::Approx(3.0));
    CHECK(ratios[1].mixed_ms == doctest::Approx(6.0));
    const JsonValue doc =
        report_json(RunInfo{"2026-12-01T00:00:00Z", "GPU", "abc", "decode", 20, 3, "queued"}, RunRates{}, records);
    CHECK(doc.find("timing")->string == "queued");
    const JsonValue& cases = *doc.find("cases");
    REQUIRE(cases.array.size() == records.size());
    CHECK(cases.array[0].find("pdl")->string == "on");
    CHECK(cases.array[5].find("pdl")->string == "off");
    CHECK(doc.find("mixed_batch_ratios")->array[1].find("pdl")->string == "off");
    // Without --pdl the field is absent.
    const JsonValue plain = report_json(RunInfo{"2026-12-01T00:00:00Z", "GPU", "abc", "decode", 20, 3}, RunRates{},
                                        {record("decode_1_ctx_32k", false, 0.1)});
    CHECK(plain.find("cases")->array[0].find("pdl") == nullptr);
}

TEST_CASE("bench report: K-from-V entries say where cos / sin came from (--kfv-cos-sin)") {
    std::vector<CaseRecord> records;
    for (const bool table : {false, true}) {
        CaseRecord r = record("decode_1_ctx_32k", false, table ? 0.07 : 0.08);
        r.variant.kernel = r.kernel = "decode_bf16kfv_d512";
        r.variant.k_from_v = true;
        r.variant.cos_sin_table = table;
        records.push_back(r);
    }
    records.push_back(record("decode_1_ctx_32k", false, 0.074));  // a K+V entry: no such field
    const JsonValue doc =
        report_json(RunInfo{"2026-12-01T00:00:00Z", "GPU", "abc", "decode", 20, 3}, RunRates{}, records);
    const JsonValue& cases = *doc.find("cases");
    REQUIRE(cases.array.size() == records.size());
    CHECK(cases.array[0].find("kfv_cos_sin")->string == "formula");
    CHECK(cases.array[1].find("kfv_cos_sin")->string == "table");
    CHECK(cases.array[2].find("kfv_cos_sin") == nullptr);
}

TEST_CASE("bench report: the wgmma ceiling of an entry and the wgmma fields of the JSON") {
    RunRates rates;
    rates.mma_before = 600;
    rates.wgmma_measured = true;
    rates.wgmma_e4m3_before = 1600;
    rates.wgmma_e4m3_after = 1500;
    rates.wgmma_bf16_before = 800;
    rates.wgmma_bf16_after = 750;
    // 1e12 FLOPs in 2.5 ms = 400 TFLOP/s.
    auto prefill = [](const char* kernel, bool e4m3_kv, bool e4m3_q) {
        CaseRecord r = record("prompt_16k", e4m3_kv, 2.5);
        r.bc.decode = false;
        r.variant.e4m3_q = e4m3_q;
        r.kernel = kernel;
        r.flops = 1e12;
        return r;
    };
    const std::vector<CaseRecord> records = {
        prefill("wgmma_e4m3pv_d512", true, true), prefill("wgmma_bf16_d512", false, false),
        prefill("mma_e4m3_d512", true, false),    prefill("mma_bf16_d512", false, false),
        prefill("reference_f64", false, false),   record("decode_1_ctx_32k", true, 0.1, 100000000),
    };
    bool fp8 = false;
    CHECK(wgmma_ceiling(records[0], rates, &fp8) == 1600);
    CHECK(fp8);
    CHECK(wgmma_ceiling(records[1], rates, &fp8) == 800);
    CHECK_FALSE(fp8);
    CHECK(wgmma_ceiling(records[2], rates) == 1600);  // every 8-bit kernel: the FP8 rate
    CHECK(wgmma_ceiling(records[3], rates) == 0.0);   // bf16 outside the Hopper tier: none
    CHECK(wgmma_ceiling(records[4], rates) == 0.0);
    CHECK(wgmma_ceiling(records[5], rates) == 0.0);   // decode: bandwidth-bound, no rate
    RunRates unmeasured = rates;
    unmeasured.wgmma_measured = false;
    CHECK(wgmma_ceiling(records[0], unmeasured) == 0.0);

    const JsonValue doc = report_json(RunInfo{"2026-12-01T00:00:00Z", "GPU", "abc", "prefill", 20, 3}, rates, records);
    CHECK(doc.find("wgmma_e4m3_rate_tflops_before")->number == 1600);
    CHECK(doc.find("wgmma_e4m3_rate_tflops_after")->number == 1500);
    CHECK(doc.find("wgmma_bf16_rate_tflops_before")->number == 800);
    CHECK(doc.find("wgmma_bf16_rate_tflops_after")->number == 750);
    CHECK(doc.find("read_bytes") == nullptr);  // no decode ceiling measured
    const JsonValue& cases = *doc.find("cases");
    REQUIRE(cases.array.size() == records.size());
    CHECK(cases.array[0].find("tflops")->number == doctest::Approx(400.0));
    CHECK(cases.array[0].find("pct_mma_rate")->number == doctest::Approx(400.0 / 6.0));
    CHECK(cases.array[0].find("pct_fp8_wgmma_rate")->number == doctest::Approx(25.0));
    CHECK(cases.array[0].find("pct_wgmma_rate") == nullptr);
    CHECK(cases.array[1].find("pct_wgmma_rate")->number == doctest::Approx(50.0));
    CHECK(cases.array[1].find("pct_fp8_wgmma_rate") == nullptr);
    CHECK(cases.array[2].find("pct_fp8_wgmma_rate")->number == doctest::Approx(25.0));
    for (size_t i : {size_t{3}, size_t{4}, size_t{5}}) {
        CHECK(cases.array[i].find("pct_wgmma_rate") == nullptr);
        CHECK(cases.array[i].find("pct_fp8_wgmma_rate") == nullptr);
    }
    CHECK(cases.array[5].find("pct_read_bw_before") == nullptr);  // decode entry, read rate unknown: no percentage
    CHECK(cases.array[5].find("kv_gbps") != nullptr);
}
