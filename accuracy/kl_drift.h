// kl_drift.h - logit drift between HDF5 logit dumps of the same tokens: per-token
// KL(reference || candidate) in float64, streamed in row blocks with bounded memory, and the
// statistics llama.cpp's --kl-divergence prints, plus a paired comparison with a baseline dump.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "accuracy/distribution_stats.h"
#include "accuracy/logit_dump.h"

namespace wideattn::accuracy {

struct DriftOptions {
    // Rows per read; 0 picks about kTargetBlockBytes of float per dump. More rows than the dumps
    // have are clamped to their rows.
    int64_t block_rows = 0;
    // Workers, at most kMaxThreads; each reads a block of every dump and computes it, so one
    // worker's computation overlaps another's read. 0 picks the hardware concurrency, at most
    // kMaxAutoThreads. Never more workers than blocks.
    int threads = 0;
    // Most memory the block buffers (block rows x vocab floats, per dump, per worker) may take;
    // a run that needs more is refused, naming the rows per block and the workers.
    int64_t max_block_buffer_bytes = kMaxBlockBufferBytes;
    // A row whose logits all have one value (row_is_constant) is an error naming the dump and
    // the rows: no model gives one, fill values, a zeroed buffer or a failed copy do. Set, such
    // rows are read (as the uniform distributions they are) and each dump that has them gets a
    // warning naming them; for synthetic dumps.
    bool allow_constant_rows = false;
    // Called from the calling thread after some blocks and once at the end.
    std::function<void(int64_t rows_done, int64_t rows_total)> progress;

    // Small blocks keep the rows in cache between the read and the computation.
    static constexpr int64_t kTargetBlockBytes = int64_t{1} << 20;
    static constexpr int kMaxAutoThreads = 8;
    static constexpr int kMaxThreads = 64;
    static constexpr int64_t kMaxBlockBufferBytes = int64_t{8} << 30;
};

// Drift of one dump (candidate or baseline) against the reference.
struct DriftSummary {
    DistributionSummary kl;           // nats
    MeanWithError top1_agreement;     // fraction of tokens whose argmax equals the reference's
    bool has_tokens = false;          // the fields below are set only with token ids
    DistributionSummary delta_p;      // p_dump(token) - p_reference(token)
    MeanWithError rms_delta_p;
};

struct DriftReport {
    LogitDumpInfo reference_info;
    LogitDumpInfo candidate_info;
    bool has_baseline = false;
    LogitDumpInfo baseline_info;
    int64_t tokens = 0;
    int64_t vocab = 0;
    bool has_tokens = false;

    std::vector<double> candidate_kl;   // per token
    std::vector<double> baseline_kl;    // per token (with a baseline)
    DriftSummary candidate_drift;
    DriftSummary baseline_drift;
    // Per-token candidate KL minus baseline KL (paired): mean +- standard error.
    MeanWithError paired_kl_difference;
};

// Rows per block for DriftOptions::block_rows == 0: about kTargetBlockBytes of float per dump,
// rounded down to a multiple of the file's chunk rows when a chunk is smaller than that.
int64_t default_block_rows(int64_t vocab, int64_t chunk_rows);

// Compares `candidate` (and `baseline`, when not empty) to `reference`. Throws AccuracyError
// for options out of range (block_rows < 0, threads outside 0..kMaxThreads, block buffers over
// kMaxBlockBufferBytes), mismatched shapes, different token ids, NaN/+inf logits (naming file,
// row and column), rows of one value unless allowed (naming file, dataset and row ranges), and
// the errors of LogitDumpReader (rows never written among them). The error reported is that of
// the first row at fault: rows of one value before another error's row are reported instead of
// it. A per-token KL of +inf (the dump gives probability 0 where the reference does not) is a
// result, not an error; where both dumps' KL are +inf at one token the paired difference is NaN.
DriftReport compute_drift(const std::string& reference, const std::string& candidate,
                          const std::string& baseline, const DriftOptions& options = {});

}  // namespace wideattn::accuracy
