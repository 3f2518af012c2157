// test_kl_drift.cpp - drift over whole dumps: every statistic against an independent
// long-double computation, streaming results identical for any block / chunk size and
// threading, the bad-input errors (shapes, vocab, token ids, NaN/inf rows), and the report of
// an infinite KL.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "accuracy/accuracy_error.h"
#include "accuracy/drift_report.h"
#include "accuracy/kl_drift.h"
#include "accuracy/logit_dump.h"
#include "accuracy_test_util.h"

using namespace wideattn::accuracy;
using wideattn::accuracy::testing::kl_close;
using wideattn::accuracy::testing::naive_kl;
using wideattn::accuracy::testing::naive_log_sum_exp;
using wideattn::accuracy::testing::random_row;
using wideattn::accuracy::testing::relatively_close;
using wideattn::accuracy::testing::TempDir;

namespace {

struct DumpData {
    int64_t tokens = 0, vocab = 0;
    std::vector<float> logits;
    std::vector<int32_t> ids;
};

DumpData make_reference(int64_t tokens, int64_t vocab, uint64_t seed) {
    DumpData d{tokens, vocab, random_row(seed, tokens * vocab, -12.0, 12.0), {}};
    for (int64_t t = 0; t < tokens; ++t) {
        d.logits[t * vocab + (t * 13) % vocab] += 9.0f;  // a peaked top token per row
        d.ids.push_back(static_cast<int32_t>((t * 13 + (t % 3)) % vocab));
    }
    return d;
}

DumpData perturbed(const DumpData& base, uint64_t seed, double sigma) {
    DumpData d = base;
    const std::vector<float> noise = random_row(seed, base.tokens * base.vocab, -sigma, sigma);
    for (size_t i = 0; i < d.logits.size(); ++i) d.logits[i] += noise[i];
    return d;
}

void write(const std::string& path, const DumpData& d, LogitType type = LogitType::kFloat32, int64_t chunk_rows = 0,
           bool with_ids = true, const std::string& model = "test") {
    LogitDumpWriter writer(path, d.vocab, type, {model, "v", "e"}, chunk_rows);
    writer.append_rows(d.logits.data(), d.tokens);
    if (with_ids) writer.write_tokens(d.ids);
    writer.close();
}

std::string drift_error(const std::string& ref, const std::string& cand, const std::string& base = "") {
    try {
        compute_drift(ref, cand, base);
    } catch (const AccuracyError& e) {
        return e.what();
    }
    return "";
}

// Independent statistics: long double, sorted copy, numpy-style percentile.
long double naive_percentile(std::vector<long double> v, long double f) {
    std::sort(v.begin(), v.end());
    const long double pos = f * (v.size() - 1);
    const size_t lo = static_cast<size_t>(std::floor(pos));
    const size_t hi = std::min(lo + 1, v.size() - 1);
    return v[lo] + (pos - lo) * (v[hi] - v[lo]);
}

}  // namespace

TEST_CASE("drift statistics agree with an independent long-double computation") {
    TempDir dir;
    const int64_t tokens = 97, vocab = 1003;
    const DumpData ref = make_reference(tokens, vocab, 1);
    const DumpData cand = perturbed(ref, 2, 0.3);
    const DumpData base = perturbed(ref, 3, 0.5);
    write(dir.file("ref.h5"), ref);
    write(dir.file("cand.h5"), cand);
    write(dir.file("base.h5"), base);
    const DriftReport report = compute_drift(dir.file("ref.h5"), dir.file("cand.h5"), dir.file("base.h5"));
    REQUIRE(report.tokens == tokens);
    REQUIRE(report.has_tokens);
    REQUIRE(report.has_baseline);

    std::vector<long double> kl, base_kl, dp;
    int64_t same_top = 0;
    for (int64_t t = 0; t < tokens; ++t) {
        const float* r = &ref.logits[t * vocab];
        const float* c = &cand.logits[t * vocab];
        kl.push_back(naive_kl(r, c, vocab));
        base_kl.push_back(naive_kl(r, &base.logits[t * vocab], vocab));
        if (std::max_element(r, r + vocab) - r == std::max_element(c, c + vocab) - c) ++same_top;
        const int32_t id = ref.ids[t];
        dp.push_back(std::exp(c[id] - naive_log_sum_exp(c, vocab)) - std::exp(r[id] - naive_log_sum_exp(r, vocab)));
    }
    for (int64_t t = 0; t < tokens; ++t) REQUIRE(kl_close(report.candidate_kl[t], kl[t]));
    const long double mean = std::accumulate(kl.begin(), kl.end(), 0.0L) / tokens;
    long double squares = 0.0L;
    for (long double x : kl) squares += (x - mean) * (x - mean);
    const long double stderr_mean = std::sqrt(squares / (tokens - 1) / tokens);
    const DriftSummary& s = report.candidate_drift;
    CHECK(relatively_close(s.kl.mean, mean, 1e-9));
    CHECK(relatively_close(s.kl.stderr_mean, stderr_mean, 1e-9));
    CHECK(relatively_close(s.kl.max, *std::max_element(kl.begin(), kl.end()), 1e-9));
    CHECK(relatively_close(s.kl.min, *std::min_element(kl.begin(), kl.end()), 1e-9));
    CHECK(relatively_close(s.kl.median, naive_percentile(kl, 0.5L), 1e-9));
    CHECK(relatively_close(s.kl.p99_9, naive_percentile(kl, 0.999L), 1e-9));
    CHECK(relatively_close(s.kl.p1, naive_percentile(kl, 0.01L), 1e-9));
    CHECK(s.top1_agreement.mean == doctest::Approx(static_cast<double>(same_top) / tokens).epsilon(1e-15));
    CHECK(same_top < tokens);  // the perturbation does flip some top tokens: the check can fail

    long double dp_squares = 0.0L;
    for (long double x : dp) dp_squares += x * x;
    CHECK(relatively_close(s.rms_delta_p.mean, std::sqrt(dp_squares / tokens), 1e-9));
    CHECK(relatively_close(s.delta_p.max, *std::max_element(dp.begin(), dp.end()), 1e-9));
    CHECK(relatively_close(s.delta_p.median, naive_percentile(dp, 0.5L), 1e-8));

    const long double base_mean = std::accumulate(base_kl.begin(), base_kl.end(), 0.0L) / tokens;
    CHECK(relatively_close(report.baseline_drift.kl.mean, base_mean, 1e-9));
    CHECK(report.baseline_drift.kl.mean > report.candidate_drift.kl.mean);  // sigma 0.5 vs 0.3
    CHECK(relatively_close(report.paired_kl_difference.mean, mean - base_mean, 1e-9));
    long double diff_squares = 0.0L;
    for (int64_t t = 0; t < tokens; ++t) {
        const long double d = (kl[t] - base_kl[t]) - (mean - base_mean);
        diff_squares += d * d;
    }
    CHECK(relatively_close(report.paired_kl_difference.stderr_mean, std::sqrt(diff_squares / (tokens - 1) / tokens), 1e-8));
}

TEST_CASE("streaming gives identical results for any block size, chunking, threading and dtype path") {
    TempDir dir;
    const int64_t tokens = 41, vocab = 517;
    const DumpData ref = make_reference(tokens, vocab, 5);
    const DumpData cand = perturbed(ref, 6, 0.2);
    write(dir.file("ref_chunk1.h5"), ref, LogitType::kFloat32, 1);
    write(dir.file("ref_whole.h5"), ref, LogitType::kFloat32, tokens);
    write(dir.file("cand_chunk3.h5"), cand, LogitType::kFloat32, 3);
    write(dir.file("cand_chunk7.h5"), cand, LogitType::kFloat32, 7);

    DriftOptions whole;
    whole.block_rows = tokens;  // one block: the whole file at once
    whole.threads = 1;
    const DriftReport expected = compute_drift(dir.file("ref_whole.h5"), dir.file("cand_chunk7.h5"), "", whole);
    for (int64_t block_rows : {1, 2, 5, 40, 41, 1000}) {
        for (int threads : {1, 2, 3}) {
            DriftOptions options;
            options.block_rows = block_rows;
            options.threads = threads;
            const DriftReport got = compute_drift(dir.file("ref_chunk1.h5"), dir.file("cand_chunk3.h5"), "", options);
            CAPTURE(block_rows);
            CAPTURE(threads);
            CHECK(got.candidate_kl == expected.candidate_kl);  // bitwise
            CHECK(got.candidate_drift.kl.mean == expected.candidate_drift.kl.mean);
            CHECK(got.candidate_drift.rms_delta_p.mean == expected.candidate_drift.rms_delta_p.mean);
            CHECK(got.candidate_drift.top1_agreement.mean == expected.candidate_drift.top1_agreement.mean);
        }
    }
    for (int threads : {1, 2}) {
        int64_t progress_calls = 0, last_done = 0;
        bool increasing = true;
        DriftOptions with_progress;
        with_progress.block_rows = 10;
        with_progress.threads = threads;
        with_progress.progress = [&](int64_t done, int64_t total) {
            ++progress_calls;
            increasing = increasing && done >= last_done && done <= total;
            last_done = done;
        };
        compute_drift(dir.file("ref_chunk1.h5"), dir.file("cand_chunk3.h5"), "", with_progress);
        CHECK(progress_calls >= 2);
        CHECK(increasing);
        CHECK(last_done == tokens);
    }
}

TEST_CASE("float16 and bfloat16 dumps give the KL of their exactly widened values") {
    TempDir dir;
    const DumpData ref = make_reference(9, 300, 8);
    const DumpData cand = perturbed(ref, 9, 0.2);
    write(dir.file("ref16.h5"), ref, LogitType::kFloat16);
    write(dir.file("candbf.h5"), cand, LogitType::kBFloat16);
    LogitDumpReader ref_reader(dir.file("ref16.h5")), cand_reader(dir.file("candbf.h5"));
    std::vector<float> r(9 * 300), c(9 * 300);
    ref_reader.read_rows(0, 9, r.data());
    cand_reader.read_rows(0, 9, c.data());
    const DriftReport report = compute_drift(dir.file("ref16.h5"), dir.file("candbf.h5"), "");
    for (int t = 0; t < 9; ++t) CHECK(kl_close(report.candidate_kl[t], naive_kl(&r[t * 300], &c[t * 300], 300)));
}

TEST_CASE("drift: clear errors for mismatched or broken inputs") {
    TempDir dir;
    const DumpData ref = make_reference(6, 50, 11);
    write(dir.file("ref.h5"), ref);

    write(dir.file("short.h5"), make_reference(5, 50, 12));
    CHECK(drift_error(dir.file("ref.h5"), dir.file("short.h5")).find("shape mismatch") != std::string::npos);
    write(dir.file("narrow.h5"), make_reference(6, 49, 12));
    const std::string vocab_error = drift_error(dir.file("ref.h5"), dir.file("narrow.h5"));
    CHECK(vocab_error.find("[6, 49]") != std::string::npos);
    CHECK(drift_error(dir.file("ref.h5"), dir.file("ref.h5"), dir.file("narrow.h5")).find("shape mismatch") !=
          std::string::npos);

    DumpData other_ids = ref;
    other_ids.ids[4] += 1;
    write(dir.file("ids.h5"), other_ids);
    const std::string ids_error = drift_error(dir.file("ref.h5"), dir.file("ids.h5"));
    CHECK(ids_error.find("token ids differ at row 4") != std::string::npos);

    DumpData with_nan = ref;
    with_nan.logits[3 * 50 + 17] = std::numeric_limits<float>::quiet_NaN();
    write(dir.file("nan.h5"), with_nan);
    const std::string nan_error = drift_error(dir.file("ref.h5"), dir.file("nan.h5"));
    CHECK(nan_error.find("row 3 column 17") != std::string::npos);
    CHECK(nan_error.find("NaN") != std::string::npos);
    CHECK(nan_error.find("nan.h5") != std::string::npos);

    DumpData with_inf = ref;
    with_inf.logits[5 * 50] = std::numeric_limits<float>::infinity();
    write(dir.file("inf.h5"), with_inf);
    CHECK(drift_error(dir.file("inf.h5"), dir.file("ref.h5")).find("row 5 column 0: logit is +inf") != std::string::npos);

    DumpData all_zero = ref;
    std::fill(all_zero.logits.begin() + 2 * 50, all_zero.logits.begin() + 3 * 50, -std::numeric_limits<float>::infinity());
    write(dir.file("allneg.h5"), all_zero);
    CHECK(drift_error(dir.file("ref.h5"), dir.file("allneg.h5")).find("row 2: every logit is -inf") != std::string::npos);

    CHECK(drift_error(dir.file("ref.h5"), dir.file("missing.h5")).find("cannot open") != std::string::npos);
}

TEST_CASE("drift without token ids skips delta-p; -inf logits are zero probabilities") {
    TempDir dir;
    DumpData ref = make_reference(4, 30, 21);
    DumpData cand = perturbed(ref, 22, 0.1);
    ref.logits[7] = -std::numeric_limits<float>::infinity();   // zero in both
    cand.logits[7] = -std::numeric_limits<float>::infinity();
    cand.logits[40] = -std::numeric_limits<float>::infinity();  // zero only in the candidate: row 1 infinite
    write(dir.file("ref.h5"), ref, LogitType::kFloat32, 0, false);
    write(dir.file("cand.h5"), cand, LogitType::kFloat32, 0, false);
    const DriftReport report = compute_drift(dir.file("ref.h5"), dir.file("cand.h5"), "");
    CHECK_FALSE(report.has_tokens);
    CHECK_FALSE(report.candidate_drift.has_tokens);
    CHECK(kl_close(report.candidate_kl[0], naive_kl(&ref.logits[0], &cand.logits[0], 30)));
    CHECK(std::isinf(report.candidate_kl[1]));
    CHECK(std::isinf(report.candidate_drift.kl.mean));
}

TEST_CASE("kl reports an infinite KL plainly, and a paired difference of +inf - +inf as undefined") {
    TempDir dir;
    constexpr int64_t kTokens = 12, kVocab = 16;
    const DumpData ref = make_reference(kTokens, kVocab, 31);
    DumpData cand = perturbed(ref, 32, 0.05), base = perturbed(ref, 33, 0.05);
    const float minus_inf = -std::numeric_limits<float>::infinity();
    for (const int64_t row : {3, 7}) base.logits[row * kVocab + 5] = minus_inf;  // the baseline: rows 3 and 7
    cand.logits[3 * kVocab + 6] = minus_inf;                                      // the candidate: row 3
    write(dir.file("ref.h5"), ref);
    write(dir.file("cand.h5"), cand);
    write(dir.file("base.h5"), base);
    const DriftReport report = compute_drift(dir.file("ref.h5"), dir.file("cand.h5"), dir.file("base.h5"));
    CHECK(std::isinf(report.baseline_drift.kl.mean));
    CHECK(std::isnan(report.paired_kl_difference.mean));
    const std::string text = format_drift_text(report);
    CHECK(text.find("warning: KL(reference || baseline) is +inf at rows 3, 7 of 12 tokens: the baseline gives "
                    "probability 0 (a logit of -inf) to tokens the reference does not, so its mean KL is +inf; such "
                    "a baseline cannot set a gate's budget or margin (gate exits 2)") != std::string::npos);
    CHECK(text.find("warning: KL(reference || candidate) is +inf at row 3 of 12 tokens") != std::string::npos);
    CHECK(text.find("(not defined: the KL of both dumps is +inf at some token") != std::string::npos);
    const std::string json = drift_report_json(report, "kl", nullptr, nullptr);
    CHECK(json.find("\"kl_infinite_count\":2,\"kl_infinite_rows\":[3,7]") != std::string::npos);
    CHECK(json.find("\"paired_kl_difference\":{\"mean\":\"nan\"") != std::string::npos);
}

TEST_CASE("dumps of differently named models are compared with a warning on the one that differs") {
    TempDir dir;
    const DumpData ref = make_reference(6, 50, 3);
    write(dir.file("ref.h5"), ref);
    write(dir.file("cand.h5"), perturbed(ref, 4, 0.1), LogitType::kFloat32, 0, true, "llama-3-8b");
    write(dir.file("base.h5"), perturbed(ref, 5, 0.1));
    write(dir.file("unnamed.h5"), perturbed(ref, 6, 0.1), LogitType::kFloat32, 0, true, "");
    const DriftReport report = compute_drift(dir.file("ref.h5"), dir.file("cand.h5"), dir.file("base.h5"));
    REQUIRE(report.candidate_info.warnings.size() == 1);
    CHECK(report.candidate_info.warnings[0] == "'" + dir.file("cand.h5") + "' is of model \"llama-3-8b\" but the reference '" +
                                                   dir.file("ref.h5") + "' of model \"test\": are these dumps of the same model?");
    CHECK(report.baseline_info.warnings.empty());
    CHECK(compute_drift(dir.file("ref.h5"), dir.file("unnamed.h5"), "").candidate_info.warnings.empty());
}
