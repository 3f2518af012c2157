// kl_drift.cpp - see kl_drift.h.
#include "accuracy/kl_drift.h"

#include <algorithm>
#include <cmath>
#include <memory>

#include "accuracy/accuracy_error.h"
#include "accuracy/row_block_stream.h"
#include "accuracy/row_kl.h"
#include "accuracy/split_worker.h"

namespace wideattn::accuracy {
namespace {

std::string shape_text(const LogitDumpInfo& info) {
    return "[" + std::to_string(info.tokens) + ", " + std::to_string(info.vocab) + "]";
}

void check_same_shape(const LogitDumpInfo& reference, const LogitDumpInfo& other) {
    if (reference.tokens != other.tokens || reference.vocab != other.vocab)
        throw AccuracyError("shape mismatch: '" + reference.path + "' has logits " + shape_text(reference) + " but '" +
                            other.path + "' has " + shape_text(other) + " ([tokens, vocab] must match)");
}

void check_same_tokens(const std::vector<int32_t>& expected, const std::string& expected_path,
                       const std::vector<int32_t>& actual, const std::string& actual_path) {
    for (size_t i = 0; i < expected.size(); ++i) {
        if (expected[i] != actual[i])
            throw AccuracyError("token ids differ at row " + std::to_string(i) + ": '" + expected_path + "' has " +
                                std::to_string(expected[i]) + ", '" + actual_path + "' has " + std::to_string(actual[i]));
    }
}

void throw_row_problem(const LogitDumpInfo& info, int64_t row, RowProblem problem, int64_t column) {
    if (problem == RowProblem::kAllNegativeInfinity)
        throw AccuracyError("'" + info.path + "' row " + std::to_string(row) +
                            ": every logit is -inf (no probability distribution)");
    throw AccuracyError("'" + info.path + "' row " + std::to_string(row) + " column " + std::to_string(column) +
                        ": logit is " + row_problem_name(problem));
}

// Per-token values of one dump against the reference, filled row by row in order.
struct DriftAccumulator {
    std::vector<double> kl;
    std::vector<double> delta_p;
    int64_t top1_same = 0;

    void add(const RowPairDrift& drift, const float* ref, const LogitDumpInfo& ref_info, const float* other,
             const LogitDumpInfo& other_info, int64_t row, int32_t token) {
        if (drift.ref_problem != RowProblem::kNone)
            throw_row_problem(ref_info, row, drift.ref_problem, drift.ref_problem_column);
        if (drift.cand_problem != RowProblem::kNone)
            throw_row_problem(other_info, row, drift.cand_problem, drift.cand_problem_column);
        kl.push_back(drift.kl);
        if (drift.ref_argmax == drift.cand_argmax) ++top1_same;
        if (token >= 0) {
            const double p_ref = std::exp(static_cast<double>(ref[token]) - drift.ref_log_normalizer);
            const double p_other = std::exp(static_cast<double>(other[token]) - drift.cand_log_normalizer);
            delta_p.push_back(p_other - p_ref);
        }
    }

    DriftSummary summary(bool has_tokens) const {
        DriftSummary s;
        s.kl = summarize(kl);
        s.top1_agreement = proportion(top1_same, static_cast<int64_t>(kl.size()));
        s.has_tokens = has_tokens;
        if (has_tokens) {
            s.delta_p = summarize(delta_p);
            s.rms_delta_p = root_mean_square(delta_p);
        }
        return s;
    }
};

}  // namespace

int64_t default_block_rows(int64_t vocab, int64_t chunk_rows) {
    int64_t block_rows = std::max<int64_t>(1, DriftOptions::kTargetBlockBytes / (vocab * int64_t{sizeof(float)}));
    if (chunk_rows > 0 && chunk_rows <= block_rows) block_rows -= block_rows % chunk_rows;
    return block_rows;
}

DriftReport compute_drift(const std::string& reference, const std::string& candidate, const std::string& baseline,
                          const DriftOptions& options) {
    std::vector<std::unique_ptr<LogitDumpReader>> readers;
    readers.push_back(std::make_unique<LogitDumpReader>(reference));
    readers.push_back(std::make_unique<LogitDumpReader>(candidate));
    const bool has_baseline = !baseline.empty();
    if (has_baseline) readers.push_back(std::make_unique<LogitDumpReader>(baseline));

    DriftReport report;
    report.reference_info = readers[0]->info();
    report.candidate_info = readers[1]->info();
    report.has_baseline = has_baseline;
    if (has_baseline) report.baseline_info = readers[2]->info();
    for (size_t i = 1; i < readers.size(); ++i) check_same_shape(report.reference_info, readers[i]->info());
    report.tokens = report.reference_info.tokens;
    report.vocab = report.reference_info.vocab;

    // Token ids: every dump that has them must agree; the first one found is used.
    std::vector<int32_t> tokens;
    std::string tokens_path;
    for (const auto& reader : readers) {
        if (!reader->info().has_tokens) continue;
        std::vector<int32_t> these = reader->read_tokens();
        if (tokens_path.empty()) {
            tokens = std::move(these);
            tokens_path = reader->info().path;
        } else {
            check_same_tokens(tokens, tokens_path, these, reader->info().path);
        }
    }
    report.has_tokens = !tokens_path.empty();

    const int64_t block_rows = options.block_rows > 0 ? options.block_rows
                                                      : default_block_rows(report.vocab, report.reference_info.chunk_rows);

    std::vector<LogitDumpReader*> reader_pointers;
    for (const auto& reader : readers) reader_pointers.push_back(reader.get());
    DriftAccumulator candidate_drift, baseline_drift;
    candidate_drift.kl.reserve(static_cast<size_t>(report.tokens));
    if (has_baseline) baseline_drift.kl.reserve(static_cast<size_t>(report.tokens));
    const int64_t vocab = report.vocab;
    {
        RowBlockStream stream(reader_pointers, block_rows, options.read_ahead);
        SplitWorker workers(options.compute_threads > 1);
        const int pairs = has_baseline ? 2 : 1;  // candidate, then baseline, against the reference
        std::vector<RowPairDrift> drifts;
        RowBlock block;
        while (stream.next(&block)) {
            // Rows of the block in parallel (each row's result lands in its own slot) ...
            drifts.assign(static_cast<size_t>(block.rows * pairs), RowPairDrift{});
            workers.run(block.rows * pairs, [&](int64_t begin, int64_t end) {
                for (int64_t item = begin; item < end; ++item) {
                    const int64_t r = item / pairs;
                    const int which = static_cast<int>(item % pairs) + 1;
                    drifts[static_cast<size_t>(item)] =
                        row_pair_drift(block.data[0] + r * vocab, block.data[which] + r * vocab, vocab);
                }
            });
            // ... then accumulated in row order, so results do not depend on the split.
            for (int64_t r = 0; r < block.rows; ++r) {
                const int64_t row = block.first_row + r;
                const int32_t token = report.has_tokens ? tokens[static_cast<size_t>(row)] : -1;
                const float* ref = block.data[0] + r * vocab;
                candidate_drift.add(drifts[static_cast<size_t>(r * pairs)], ref, report.reference_info,
                                    block.data[1] + r * vocab, report.candidate_info, row, token);
                if (has_baseline)
                    baseline_drift.add(drifts[static_cast<size_t>(r * pairs + 1)], ref, report.reference_info,
                                       block.data[2] + r * vocab, report.baseline_info, row, token);
            }
            if (options.progress) options.progress(block.first_row + block.rows, report.tokens);
        }
    }

    report.candidate_drift = candidate_drift.summary(report.has_tokens);
    report.candidate_kl = std::move(candidate_drift.kl);
    if (has_baseline) {
        report.baseline_drift = baseline_drift.summary(report.has_tokens);
        report.baseline_kl = std::move(baseline_drift.kl);
        std::vector<double> differences(report.candidate_kl.size());
        for (size_t i = 0; i < differences.size(); ++i)
            differences[i] = report.candidate_kl[i] - report.baseline_kl[i];
        const DistributionSummary paired = summarize(differences);
        report.paired_kl_difference = {paired.mean, paired.stderr_mean};
    }
    return report;
}

}  // namespace wideattn::accuracy
