// test_gate_dumps.cpp - `wideattn accuracy gate` end to end on HDF5 dumps written with the
// project's writer, against truth computed independently (long-double KL of the stored floats,
// long-double batch means): the paired rule's verdicts and exit codes (0 accept, 1 reject,
// 3 inconclusive), its JSON numbers, correlated tokens (AR(1), rho 0.9) where the i.i.d.
// standard error would accept, the usage errors of the new options, and the regression of an
// infinite baseline KL (a -inf logit where the reference has mass), which made the point rule's
// budget infinite and accepted a candidate of negated logits with exit 0.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <vector>

#include "accuracy/logit_dump.h"
#include "accuracy_test_util.h"
#include "gate_test_util.h"

using namespace wideattn::accuracy;
using namespace wideattn::accuracy::testing;

namespace {

constexpr double kBaseLogit = 1.0;   // baseline rows (1, -1): KL log cosh(1) = 0.434 nats
constexpr int64_t kTokens = 310;
constexpr int64_t kBlock = 10;       // 31 blocks: t on 30 degrees of freedom
constexpr double kT95Df30 = 1.6972608865939578;

struct Dumps {
    TempDir dir;
    std::string reference, baseline, candidate;
    std::vector<long double> truth_d;  // KL_t(candidate) - KL_t(baseline) of the stored floats
};

// Reference rows (0, 0), baseline rows (1, -1), candidate rows with KL = baseline KL + d_t.
void write_dumps(Dumps* dumps, const std::vector<double>& d) {
    dumps->reference = dumps->dir.file("reference.h5");
    dumps->baseline = dumps->dir.file("baseline.h5");
    dumps->candidate = dumps->dir.file("candidate.h5");
    const std::vector<float> base(d.size(), static_cast<float>(kBaseLogit));
    const std::vector<float> cand = logits_for_differences(kBaseLogit, d);
    write_two_logit_dump(dumps->reference, std::vector<float>(d.size(), 0.0f));
    write_two_logit_dump(dumps->baseline, base);
    write_two_logit_dump(dumps->candidate, cand);
    dumps->truth_d.clear();
    for (size_t t = 0; t < d.size(); ++t) dumps->truth_d.push_back(two_logit_kl(cand[t]) - two_logit_kl(base[t]));
}

// Differences shift + centred independent noise (sd 0.01), and their batch-means standard error.
std::vector<double> shifted_differences(double shift_in_stderrs, double* stderr_out) {
    std::vector<double> noise = ar1_series(21, kTokens, 0.0, 0.0, 0.01);
    double mean = 0.0;
    for (double x : noise) mean += x / kTokens;
    for (double& x : noise) x -= mean;
    *stderr_out = static_cast<double>(long_double_batch_means(noise, kBlock).stderr_mean);
    for (double& x : noise) x += shift_in_stderrs * *stderr_out;
    return noise;
}

// The reference's rows (0, 0) hold one value, an error unless --allow-constant-rows: the uniform
// reference is what makes the KL of a row (g, -g) log cosh g.
CliRun gate(const Dumps& dumps, const std::string& json, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"gate", dumps.reference, dumps.candidate, "--baseline", dumps.baseline,
                                     "--json", json, "--allow-constant-rows"};
    args.insert(args.end(), extra.begin(), extra.end());
    return run_accuracy_cli(args);
}

bool near(double got, long double want, double tolerance) {
    return std::fabs(static_cast<long double>(got) - want) <= tolerance * std::fabs(want);
}

}  // namespace

TEST_CASE("gate dumps: identical candidate and baseline, accepted at margin 0") {
    Dumps dumps;
    write_dumps(&dumps, std::vector<double>(kTokens, 0.0));
    write_two_logit_dump(dumps.candidate, std::vector<float>(kTokens, static_cast<float>(kBaseLogit)));
    const std::string json = dumps.dir.file("same.json");
    CHECK(gate(dumps, json).status == 0);
    const std::string report = read_text(json);
    CHECK(report.find("\"rule\":\"paired\"") != std::string::npos);
    CHECK(report.find("\"verdict\":\"ACCEPT\"") != std::string::npos);
    CHECK(json_number(report, "upper_bound") == 0.0);
    CHECK(json_number(report, "mean_difference") == 0.0);
    CHECK(json_number(report, "exit_status") == 0.0);
}

TEST_CASE("gate dumps: shifts of +3, +0.5 and -3 standard errors at margin 0") {
    const struct {
        double shift;
        int status;
        const char* verdict;
    } cases[] = {{3.0, 1, "REJECT"}, {0.5, 3, "INCONCLUSIVE"}, {-3.0, 0, "ACCEPT"}};
    for (const auto& c : cases) {
        INFO("shift " << c.shift << " standard errors");
        Dumps dumps;
        double stderr_mean = 0.0;
        write_dumps(&dumps, shifted_differences(c.shift, &stderr_mean));
        const std::string json = dumps.dir.file("gate.json");
        CHECK(gate(dumps, json, {"--block-tokens", std::to_string(kBlock)}).status == c.status);
        const std::string report = read_text(json);
        CHECK(report.find(std::string("\"verdict\":\"") + c.verdict + "\"") != std::string::npos);
        const auto truth = long_double_batch_means(dumps.truth_d, kBlock);
        CHECK(json_number(report, "blocks") == 31);
        CHECK(json_number(report, "degrees_of_freedom") == 30);
        CHECK(near(json_number(report, "t_quantile"), kT95Df30, 1e-12));
        CHECK(near(json_number(report, "mean_difference"), truth.mean, 1e-9));
        CHECK(near(json_number(report, "stderr_difference"), truth.stderr_mean, 1e-9));
        CHECK(near(json_number(report, "upper_bound"), truth.mean + kT95Df30 * truth.stderr_mean, 1e-9));
        CHECK(near(json_number(report, "lower_bound"), truth.mean - kT95Df30 * truth.stderr_mean, 1e-9));
        // The stored floats move d_t by ~1e-8; the shift is still the planned one.
        CHECK(near(json_number(report, "mean_difference"), c.shift * stderr_mean, 1e-3));
        const double needed = json_number(report, "tokens_needed");
        if (c.status == 3) {
            CHECK(needed > 10 * kTokens);
            CHECK(report.find("\"tokens_needed_verdict\":\"REJECT\"") != std::string::npos);
        } else {
            CHECK(std::isnan(needed));  // only an inconclusive verdict reports it
        }
    }
}

TEST_CASE("gate dumps: the default block length follows the documented rule") {
    Dumps dumps;
    double stderr_mean = 0.0;
    write_dumps(&dumps, shifted_differences(0.0, &stderr_mean));
    const std::string json = dumps.dir.file("gate.json");
    gate(dumps, json);
    const std::string report = read_text(json);
    const auto truth = long_double_batch_means(dumps.truth_d, 1);
    CHECK(near(json_number(report, "lag1_autocorrelation"), truth.lag1, 1e-6));
    // ceil(310^(1/3)) = 7 unless r asks for more: ceil(2 r / (0.05 (1 - r^2))); at most 31.
    const long double r = std::max<long double>(0, truth.lag1);
    const int64_t wanted = std::max<int64_t>(7, static_cast<int64_t>(std::ceil(2 * r / (0.05L * (1 - r * r)))));
    const int64_t b = std::min<int64_t>(wanted, 31);
    CHECK(json_number(report, "block_tokens") == b);
    CHECK(json_number(report, "blocks") == kTokens / b);
    CHECK(near(json_number(report, "stderr_difference"), long_double_batch_means(dumps.truth_d, b).stderr_mean, 1e-9));
}

TEST_CASE("gate dumps: correlated tokens (AR(1), rho 0.9): the i.i.d. error would accept") {
    constexpr int64_t kCorrelated = 2000;
    const std::vector<double> d = ar1_series(5, kCorrelated, 0.9, 0.05, 0.01);
    Dumps dumps;
    write_dumps(&dumps, d);
    const auto naive = long_double_batch_means(dumps.truth_d, 1);
    // A margin 3 i.i.d. standard errors above the mean: the bound with blocks of one token
    // (1.65 of them) clears it, the batch-means bound (~4.4 times wider here) does not.
    const double margin = static_cast<double>(naive.mean + 3 * naive.stderr_mean);
    char margin_text[40];
    std::snprintf(margin_text, sizeof margin_text, "%.17g", margin);
    const std::string json = dumps.dir.file("gate.json");
    CHECK(gate(dumps, json, {"--margin", margin_text, "--block-tokens", "1"}).status == 0);
    CHECK(gate(dumps, json, {"--margin", margin_text}).status == 3);
    const std::string report = read_text(json);
    const double b = json_number(report, "block_tokens");
    CHECK(b >= 100);  // r ~ 0.9 asks for ~190 tokens; capped at 200 (10 blocks)
    CHECK(b <= 200);
    const auto truth = long_double_batch_means(dumps.truth_d, static_cast<int64_t>(b));
    CHECK(near(json_number(report, "stderr_difference"), truth.stderr_mean, 1e-9));
    CHECK(near(json_number(report, "naive_stderr_difference"), naive.stderr_mean, 1e-9));
    CHECK(json_number(report, "stderr_difference") > 3 * json_number(report, "naive_stderr_difference"));
}

TEST_CASE("gate dumps: new options' usage errors exit 2") {
    Dumps dumps;
    double stderr_mean = 0.0;
    write_dumps(&dumps, shifted_differences(0.0, &stderr_mean));
    const std::string json = dumps.dir.file("gate.json");
    const struct {
        std::vector<std::string> args;
        const char* message;
    } cases[] = {
        {{"--rule", "median"}, "'median' is not point or paired"},
        {{"--rule", "paired", "--budget", "1"}, "--rule paired"},
        {{"--confidence", "1"}, "--confidence must lie in [0.5, 1), got 1"},
        {{"--confidence", "0.3"}, "--confidence"},
        {{"--confidence", "high"}, "'high' is not a finite number"},
        {{"--block-tokens", "0"}, "--block-tokens"},
        {{"--block-tokens", "200"}, "--block-tokens 200 leaves fewer than 2 blocks of 310 tokens"},
        {{"--rule", "point", "--confidence", "0.9"}, "'--confidence' applies to --rule paired only"},
        {{"--rule", "point", "--block-tokens", "5"}, "'--block-tokens' applies to --rule paired only"},
    };
    for (const auto& c : cases) {
        INFO(c.message);
        const CliRun run = gate(dumps, json, c.args);
        CHECK(run.status == 2);
        CHECK(run.err.find(c.message) != std::string::npos);
    }
    // --budget alone keeps the point rule; --rule point with a baseline too.
    CHECK(gate(dumps, json, {"--budget", "0.5"}).status == 0);
    CHECK(read_text(json).find("\"rule\":\"point\"") != std::string::npos);
    CHECK(gate(dumps, json, {"--rule", "point", "--margin-rel", "0.01"}).status == 0);
}

TEST_CASE("gate dumps: a -inf baseline logit where the reference has mass is an error, not a budget") {
    // Regression: the baseline's KL was +inf at two rows, so the point rule's budget was +inf and
    // a candidate of negated logits (KL ~ 10 nats per token) was accepted with exit 0.
    constexpr int64_t kRows = 12, kVocab = 16;
    TempDir dir;
    const std::string ref = dir.file("ref.h5"), base = dir.file("base.h5"), cand = dir.file("cand.h5");
    std::vector<float> ref_rows, base_rows, cand_rows;
    for (int64_t t = 0; t < kRows; ++t) {
        const std::vector<float> row = random_row(static_cast<uint64_t>(t) + 1, kVocab, -4.0, 4.0);
        for (int64_t i = 0; i < kVocab; ++i) {
            ref_rows.push_back(row[i]);
            cand_rows.push_back(-row[i]);
            base_rows.push_back((t == 3 || t == 7) && i == 5 ? -INFINITY : row[i] + 0.01f);
        }
    }
    const auto write = [&](const std::string& path, const std::vector<float>& rows) {
        LogitDumpWriter writer(path, kVocab, LogitType::kFloat32, {"m", "v", "e"});
        writer.append_rows(rows.data(), kRows);
        writer.close();
    };
    write(ref, ref_rows);
    write(base, base_rows);
    write(cand, cand_rows);
    const std::string json = dir.file("gate.json");
    for (const std::vector<std::string>& rule : {std::vector<std::string>{"--rule", "point"},
                                                 std::vector<std::string>{"--rule", "paired"},
                                                 std::vector<std::string>{"--budget", "100"}}) {
        std::vector<std::string> args = {"gate", ref, cand, "--baseline", base, "--json", json};
        args.insert(args.end(), rule.begin(), rule.end());
        const CliRun run = run_accuracy_cli(args);
        INFO(rule[0] << " " << rule[1] << ": " << run.err);
        CHECK(run.status == 2);
        CHECK(run.err.find("baseline '" + base + "': KL(reference || baseline) is infinite at rows 3, 7") !=
              std::string::npos);
    }
    // The same baseline without the -inf logits: the negated candidate is rejected by both rules.
    for (float& x : base_rows)
        if (std::isinf(x)) x = 0.0f;
    write(base, base_rows);
    CHECK(run_accuracy_cli({"gate", ref, cand, "--baseline", base, "--json", json, "--rule", "point"}).status == 1);
    CHECK(run_accuracy_cli({"gate", ref, cand, "--baseline", base, "--json", json}).status == 1);
}

TEST_CASE("gate dumps: an infinite candidate KL is a reject naming the rows") {
    Dumps dumps;
    double stderr_mean = 0.0;
    write_dumps(&dumps, shifted_differences(0.0, &stderr_mean));
    // Candidate rows 4 and 250: logit -inf where the reference (0, 0) has probability 1/2.
    std::vector<float> cand = logits_for_differences(kBaseLogit, shifted_differences(0.0, &stderr_mean));
    LogitDumpWriter writer(dumps.candidate, 2, LogitType::kFloat32, {"two-logit", "test", "inf"});
    std::vector<float> rows;
    for (size_t t = 0; t < cand.size(); ++t) {
        rows.push_back(t == 4 || t == 250 ? -INFINITY : cand[t]);
        rows.push_back(-cand[t]);
    }
    writer.append_rows(rows.data(), kTokens);
    writer.close();
    const std::string json = dumps.dir.file("gate.json");
    CHECK(gate(dumps, json, {"--margin", "1"}).status == 1);
    const std::string report = read_text(json);
    CHECK(report.find("\"candidate_infinite_rows\":[4,250]") != std::string::npos);
    CHECK(report.find("rows 4, 250") != std::string::npos);
    CHECK(gate(dumps, json, {"--rule", "point", "--margin", "1"}).status == 1);
}
