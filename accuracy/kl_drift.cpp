// kl_drift.cpp - see kl_drift.h.
#include "accuracy/kl_drift.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <exception>
#include <limits>
#include <memory>
#include <mutex>
#include <thread>

#include "accuracy/accuracy_error.h"
#include "accuracy/checked_size.h"
#include "accuracy/row_kl.h"
#include "accuracy/row_ranges.h"

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

// A warning on `other` when both dumps name a model and the names differ: the dumps are then
// most likely of different models (a mix-up in the pipeline that wrote them), which no shape
// check catches when the vocabularies are equal.
void note_other_model(const LogitDumpInfo& reference, LogitDumpInfo* other) {
    if (reference.metadata.model.empty() || other->metadata.model.empty() ||
        reference.metadata.model == other->metadata.model)
        return;
    other->warnings.push_back("'" + other->path + "' is of model \"" + other->metadata.model +
                              "\" but the reference '" + reference.path + "' of model \"" +
                              reference.metadata.model + "\": are these dumps of the same model?");
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

// Per-token results of one dump against the reference, stored by row (workers fill disjoint
// rows), summarised in row order at the end.
struct DriftValues {
    std::vector<double> kl;
    std::vector<double> delta_p;
    std::vector<uint8_t> top1_same;

    explicit DriftValues(int64_t tokens, bool has_tokens)
        : kl(static_cast<size_t>(tokens)), delta_p(has_tokens ? static_cast<size_t>(tokens) : 0),
          top1_same(static_cast<size_t>(tokens)) {}

    DriftSummary summary(bool has_tokens) const {
        DriftSummary s;
        s.kl = summarize(kl);
        int64_t same = 0;
        for (uint8_t flag : top1_same) same += flag;
        s.top1_agreement = proportion(same, static_cast<int64_t>(kl.size()));
        s.has_tokens = has_tokens;
        if (has_tokens) {
            s.delta_p = summarize(delta_p);
            s.rms_delta_p = root_mean_square(delta_p);
        }
        return s;
    }
};

// The first error (by row) any worker met; later rows are not started once one is known.
class FirstError {
public:
    void record(int64_t row, std::exception_ptr error) {
        std::lock_guard<std::mutex> lock(mutex_);
        if (row < row_) {
            row_ = row;
            error_ = std::move(error);
            stop_before_.store(row);
        }
    }
    // Whether work starting at `row` is still useful.
    bool wanted(int64_t row) const { return row < stop_before_.load(); }
    void rethrow_if_any() const {
        if (error_) std::rethrow_exception(error_);
    }
    // The row of the first error; every row before it was computed. The maximum when none.
    int64_t row() const { return stop_before_.load(); }

private:
    std::mutex mutex_;
    int64_t row_ = std::numeric_limits<int64_t>::max();
    std::exception_ptr error_;
    std::atomic<int64_t> stop_before_{std::numeric_limits<int64_t>::max()};
};

// The rows of one dump whose logits all have one value: a flag per row (workers set disjoint
// rows) and the first such row found with its value, for the message.
class ConstantRows {
public:
    explicit ConstantRows(int64_t tokens) : flags_(static_cast<size_t>(tokens)) {}
    void record(int64_t row, float value) {
        flags_[static_cast<size_t>(row)] = 1;
        std::lock_guard<std::mutex> lock(mutex_);
        if (row < first_) {
            first_ = row;
            value_ = value;
        }
    }
    int64_t first() const { return first_; }  // the maximum when none; read after the workers end
    float value() const { return value_; }
    std::vector<RowRange> before(int64_t end) const { return flagged_rows(flags_, end); }

private:
    std::vector<uint8_t> flags_;
    std::mutex mutex_;
    int64_t first_ = std::numeric_limits<int64_t>::max();
    float value_ = 0.0f;
};

// "'c.h5' dataset 'logits': rows 8..15 (8 of 16) hold one value each (every logit 0 in row 8)".
std::string constant_rows_text(const LogitDumpInfo& info, const ConstantRows& constant, int64_t end) {
    const std::vector<RowRange> rows = constant.before(end);
    const int64_t count = rows_in(rows);
    char value[32];
    std::snprintf(value, sizeof value, "%.9g", static_cast<double>(constant.value()));
    return "'" + info.path + "' dataset '" + kLogitsDataset + "': " + row_ranges_text(rows) + " (" +
           std::to_string(count) + " of " + std::to_string(info.tokens) + ") " +
           (count == 1 ? "holds one value" : "hold one value each") + " (every logit " + value + " in row " +
           std::to_string(constant.first()) + ")";
}

// Rows per block, blocks and workers of a drift run, checked against the limits.
struct BlockPlan {
    int64_t block_rows = 0;
    int64_t blocks = 0;
    int workers = 0;
};

BlockPlan plan_blocks(const DriftOptions& options, const DriftReport& report, size_t dumps) {
    if (options.block_rows < 0)
        throw AccuracyError("rows per block (--block-rows) must be >= 1, got " + std::to_string(options.block_rows));
    if (options.threads < 0 || options.threads > DriftOptions::kMaxThreads)
        throw AccuracyError("workers (--threads) must be in 1.." + std::to_string(DriftOptions::kMaxThreads) + ", got " +
                            std::to_string(options.threads));
    BlockPlan plan;
    const int64_t wanted = options.block_rows > 0 ? options.block_rows
                                                  : default_block_rows(report.vocab, report.reference_info.chunk_rows);
    plan.block_rows = std::min(wanted, report.tokens);  // never more rows than the dumps have
    plan.blocks = ceil_div(report.tokens, plan.block_rows);
    const int hardware_threads = static_cast<int>(std::thread::hardware_concurrency());
    const int requested = options.threads > 0 ? options.threads
                                              : std::max(1, std::min(hardware_threads, DriftOptions::kMaxAutoThreads));
    plan.workers = static_cast<int>(std::min<int64_t>(requested, plan.blocks));
    const std::string what = "block buffers (--block-rows " + std::to_string(plan.block_rows) + ", --threads " +
                             std::to_string(plan.workers) + ")";
    const int64_t row_bytes = checked_mul(report.vocab, static_cast<int64_t>(sizeof(float)), what);
    const int64_t per_dump = checked_mul(plan.block_rows, row_bytes, what);
    const int64_t per_worker = checked_mul(per_dump, static_cast<int64_t>(dumps), what);
    const int64_t total = checked_mul(per_worker, plan.workers, what);
    if (total > options.max_block_buffer_bytes)
        throw AccuracyError(what + ": " + std::to_string(plan.block_rows) + " rows x " + std::to_string(report.vocab) +
                            " floats x " + std::to_string(dumps) + " dumps x " + std::to_string(plan.workers) +
                            " workers need " + std::to_string(total) + " bytes, more than the limit of " +
                            std::to_string(options.max_block_buffer_bytes) +
                            "; give fewer rows per block or fewer threads");
    return plan;
}

using ReaderSet = std::vector<std::unique_ptr<LogitDumpReader>>;

// Opens the dumps (reference, candidate, baseline when not empty), checks their shapes and
// describes them in `report`.
ReaderSet open_dumps(const std::string& reference, const std::string& candidate, const std::string& baseline,
                     DriftReport* report) {
    ReaderSet readers;
    readers.push_back(std::make_unique<LogitDumpReader>(reference));
    readers.push_back(std::make_unique<LogitDumpReader>(candidate));
    report->has_baseline = !baseline.empty();
    if (report->has_baseline) readers.push_back(std::make_unique<LogitDumpReader>(baseline));
    report->reference_info = readers[0]->info();
    report->candidate_info = readers[1]->info();
    if (report->has_baseline) report->baseline_info = readers[2]->info();
    for (size_t i = 1; i < readers.size(); ++i) check_same_shape(report->reference_info, readers[i]->info());
    note_other_model(report->reference_info, &report->candidate_info);
    if (report->has_baseline) note_other_model(report->reference_info, &report->baseline_info);
    report->tokens = report->reference_info.tokens;
    report->vocab = report->reference_info.vocab;
    return readers;
}

// Token ids: every dump that has them must agree; the first one found is used.
std::vector<int32_t> common_tokens(const ReaderSet& readers, DriftReport* report) {
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
    report->has_tokens = !tokens_path.empty();
    return tokens;
}

// One reader per dump for each worker: the first worker's are `readers`, the others'
// another_reader()s of them, sharing their direct-read layouts (the chunk offsets are looked up
// once per file: that lookup is quadratic in the chunk count with HDF5 1.10).
std::vector<ReaderSet> worker_reader_sets(ReaderSet readers, const BlockPlan& plan) {
    std::vector<ReaderSet> sets(static_cast<size_t>(plan.workers));
    sets[0] = std::move(readers);
    for (int w = 1; w < plan.workers; ++w)
        for (const auto& reader : sets[0]) sets[w].push_back(reader->another_reader());
    for (auto& set : sets) {
        for (auto& reader : set) {
            const int64_t chunk_rows = reader->info().chunk_rows;
            // Whole-chunk reads need no chunk cache: HDF5 then reads straight into our buffers.
            if (chunk_rows > 0 && plan.block_rows % chunk_rows == 0) reader->set_chunk_cache(false);
        }
    }
    return sets;
}

// Mean +- i.i.d. standard error of the per-token candidate KL minus baseline KL; NaN when both
// are +inf at some token (+inf - +inf has no value, and NaN would not sort).
MeanWithError paired_difference(const std::vector<double>& candidate_kl, const std::vector<double>& baseline_kl) {
    std::vector<double> differences(candidate_kl.size());
    for (size_t i = 0; i < differences.size(); ++i) {
        differences[i] = candidate_kl[i] - baseline_kl[i];
        if (std::isnan(differences[i])) {
            const double nan = std::numeric_limits<double>::quiet_NaN();
            return {nan, nan};
        }
    }
    const DistributionSummary paired = summarize(differences);
    return {paired.mean, paired.stderr_mean};
}

// The workers of one drift run. Each owns readers for every dump and its block buffers; it
// takes the next block, reads it (HDF5 calls are serialised inside the reader) and computes it,
// so one worker's computation overlaps another's read without a dedicated reader thread or
// per-block barriers. Per-token results are stored by row.
class DriftWorkers {
public:
    DriftWorkers(const DriftReport& report, const std::vector<int32_t>& tokens, const BlockPlan& plan,
                 const DriftOptions& options, std::vector<ReaderSet> readers)
        : candidate_values(report.tokens, report.has_tokens),
          baseline_values(report.has_baseline ? report.tokens : 0, report.has_tokens && report.has_baseline),
          report_(report), tokens_(tokens), plan_(plan), options_(options), readers_(std::move(readers)) {
        for (size_t d = 0; d < readers_[0].size(); ++d)
            constant_rows_.push_back(std::make_unique<ConstantRows>(report.tokens));
    }

    // Runs every worker (the calling thread is the first) and rethrows the first error by row,
    // rows of one value (unless allowed) among them.
    void run() {
        std::vector<std::thread> others;
        for (int w = 1; w < plan_.workers; ++w) others.emplace_back([this, w] { work(w); });
        work(0);
        for (auto& thread : others) thread.join();
        if (!options_.allow_constant_rows) refuse_constant_rows();
        first_error_.rethrow_if_any();
    }

    // A warning for each dump with rows of one value (after a run that allowed them).
    void warn_constant_rows(DriftReport* report) const {
        LogitDumpInfo* infos[] = {&report->reference_info, &report->candidate_info, &report->baseline_info};
        for (size_t d = 0; d < constant_rows_.size(); ++d) {
            if (constant_rows_[d]->first() >= report->tokens) continue;
            infos[d]->warnings.push_back(constant_rows_text(*infos[d], *constant_rows_[d], report->tokens) +
                                         ": read as uniform distributions (--allow-constant-rows)");
        }
    }

    DriftValues candidate_values;
    DriftValues baseline_values;

private:
    void work(int worker) {
        const size_t dumps = readers_[static_cast<size_t>(worker)].size();
        std::vector<std::vector<float>> buffers;
        try {
            buffers.assign(dumps, std::vector<float>(static_cast<size_t>(plan_.block_rows * report_.vocab)));
        } catch (...) {
            first_error_.record(0, std::current_exception());
            return;
        }
        for (;;) {
            const int64_t block = next_block_.fetch_add(1);
            const int64_t first = block * plan_.block_rows;
            if (block >= plan_.blocks || !first_error_.wanted(first)) return;
            const int64_t rows = std::min(plan_.block_rows, report_.tokens - first);
            int64_t row = first;
            try {
                for (size_t d = 0; d < dumps; ++d)
                    readers_[static_cast<size_t>(worker)][d]->read_rows(first, rows, buffers[d].data());
                for (; row < first + rows; ++row) compute_row(buffers, row, row - first);
            } catch (...) {
                first_error_.record(row, std::current_exception());
                return;
            }
            report_progress(rows);
        }
    }

    // Row `row` of the dumps, held at `index` in the block buffers.
    void compute_row(const std::vector<std::vector<float>>& buffers, int64_t row, int64_t index) {
        const int64_t vocab = report_.vocab;
        const float* ref = buffers[0].data() + index * vocab;
        const float* cand = buffers[1].data() + index * vocab;
        store(&candidate_values, row_pair_drift(ref, cand, vocab), ref, cand, report_.candidate_info, row);
        if (report_.has_baseline) {
            const float* base = buffers[2].data() + index * vocab;
            store(&baseline_values, row_pair_drift(ref, base, vocab), ref, base, report_.baseline_info, row);
        }
        for (size_t d = 0; d < buffers.size(); ++d) {
            const float* logits = buffers[d].data() + index * vocab;
            if (row_is_constant(logits, vocab)) constant_rows_[d]->record(row, logits[0]);
        }
    }

    // Throws for the dump whose first row of one value comes first, when that row lies before
    // the first other error (every row before that error's was computed, so the rows named are
    // all there are up to it).
    void refuse_constant_rows() const {
        const int64_t checked = std::min(first_error_.row(), report_.tokens);
        const LogitDumpInfo* infos[] = {&report_.reference_info, &report_.candidate_info, &report_.baseline_info};
        size_t first_dump = 0;
        for (size_t d = 1; d < constant_rows_.size(); ++d)
            if (constant_rows_[d]->first() < constant_rows_[first_dump]->first()) first_dump = d;
        if (constant_rows_[first_dump]->first() >= checked) return;
        std::string message = constant_rows_text(*infos[first_dump], *constant_rows_[first_dump], checked) +
                              ": no model gives such rows; the fill values of rows never written, a zeroed buffer "
                              "or a failed copy do (--allow-constant-rows reads them, for synthetic dumps)";
        if (checked < report_.tokens)
            message += "; rows from " + std::to_string(checked) + " on were not checked (another error there)";
        throw AccuracyError(message);
    }

    void store(DriftValues* values, const RowPairDrift& drift, const float* ref, const float* other,
               const LogitDumpInfo& other_info, int64_t row) {
        if (drift.ref_problem != RowProblem::kNone)
            throw_row_problem(report_.reference_info, row, drift.ref_problem, drift.ref_problem_column);
        if (drift.cand_problem != RowProblem::kNone)
            throw_row_problem(other_info, row, drift.cand_problem, drift.cand_problem_column);
        values->kl[static_cast<size_t>(row)] = drift.kl;
        values->top1_same[static_cast<size_t>(row)] = drift.ref_argmax == drift.cand_argmax;
        if (report_.has_tokens) {
            const int32_t token = tokens_[static_cast<size_t>(row)];
            const double p_ref = std::exp(static_cast<double>(ref[token]) - drift.ref_log_normalizer);
            const double p_other = std::exp(static_cast<double>(other[token]) - drift.cand_log_normalizer);
            values->delta_p[static_cast<size_t>(row)] = p_other - p_ref;
        }
    }

    // Rows finished so far, reported by whichever worker finishes a block (a worker may get no
    // block at all), under a lock so the callback sees increasing counts from one thread at a time.
    void report_progress(int64_t rows) {
        if (!options_.progress) return;
        const std::lock_guard<std::mutex> lock(progress_mutex_);
        rows_done_ += rows;
        options_.progress(rows_done_, report_.tokens);
    }

    const DriftReport& report_;
    const std::vector<int32_t>& tokens_;
    const BlockPlan plan_;
    const DriftOptions& options_;
    std::vector<ReaderSet> readers_;
    std::vector<std::unique_ptr<ConstantRows>> constant_rows_;  // reference, candidate, baseline
    std::atomic<int64_t> next_block_{0};
    std::mutex progress_mutex_;
    int64_t rows_done_ = 0;
    FirstError first_error_;
};

}  // namespace

int64_t default_block_rows(int64_t vocab, int64_t chunk_rows) {
    const int64_t target_floats = DriftOptions::kTargetBlockBytes / static_cast<int64_t>(sizeof(float));
    int64_t block_rows = std::max<int64_t>(1, target_floats / std::max<int64_t>(1, vocab));
    if (chunk_rows > 0 && chunk_rows <= block_rows) block_rows -= block_rows % chunk_rows;
    return block_rows;
}

DriftReport compute_drift(const std::string& reference, const std::string& candidate, const std::string& baseline,
                          const DriftOptions& options) {
    DriftReport report;
    std::vector<std::unique_ptr<LogitDumpReader>> readers = open_dumps(reference, candidate, baseline, &report);
    const std::vector<int32_t> tokens = common_tokens(readers, &report);
    const BlockPlan plan = plan_blocks(options, report, readers.size());

    DriftWorkers run(report, tokens, plan, options, worker_reader_sets(std::move(readers), plan));
    run.run();
    run.warn_constant_rows(&report);
    if (options.progress) options.progress(report.tokens, report.tokens);

    report.candidate_drift = run.candidate_values.summary(report.has_tokens);
    report.candidate_kl = std::move(run.candidate_values.kl);
    if (report.has_baseline) {
        report.baseline_drift = run.baseline_values.summary(report.has_tokens);
        report.baseline_kl = std::move(run.baseline_values.kl);
        report.paired_kl_difference = paired_difference(report.candidate_kl, report.baseline_kl);
    }
    return report;
}

}  // namespace wideattn::accuracy
