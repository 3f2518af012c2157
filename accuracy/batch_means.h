// batch_means.h - the mean of a serially correlated series (per-token KL differences, whose
// tokens of one text are correlated) with a standard error from batch means: the series is cut
// into non-overlapping blocks of b consecutive values, and the spread of the block means gives
// the long-run variance b * Var(block mean), which counts the correlation inside a block. Used
// by the paired gate (accuracy/gate.h); the rules are in docs/accuracy.md section 3.
#pragma once

#include <cstdint>
#include <vector>

namespace wideattn::accuracy {

// Fewest blocks the default block length leaves (when there are that many values).
inline constexpr int64_t kMinBlocks = 10;
// Largest relative underestimate of the long-run variance the default block length accepts
// for an AR(1) series of the observed lag-1 autocorrelation r >= 0, whose batch-means bias at
// block length b is about 2 r / (b (1 - r^2)).
inline constexpr double kBlockBiasTarget = 0.05;

enum class BlockRule {
    kStated,           // given by the caller (--block-tokens)
    kCubeRoot,         // ceil(n^(1/3))
    kAutocorrelation,  // ceil(2 r / (kBlockBiasTarget (1 - r^2))), above the cube root
    kCapped,           // n / kMinBlocks, below what the two rules above asked for
};

const char* block_rule_name(BlockRule rule);  // "stated", "cube_root", "lag1_autocorrelation", "capped"

struct BlockChoice {
    int64_t block_tokens = 1;
    BlockRule rule = BlockRule::kCubeRoot;
    int64_t wanted_tokens = 1;  // what the cube-root and autocorrelation rules asked for (before the cap)
};

// Block length for n values of lag-1 autocorrelation r: max(ceil(n^(1/3)), AR(1) rule for
// max(r, 0)), at most max(1, n / kMinBlocks).
BlockChoice default_block_length(int64_t n, double lag1_autocorrelation);

// Mean of finite values by a compensated sum (accurate to ~1 ulp over tens of millions of terms).
double accurate_mean(const std::vector<double>& values);

// Sample lag-1 autocorrelation sum (x_t - m)(x_t+1 - m) / sum (x_t - m)^2; 0 for a constant series.
double lag1_autocorrelation(const std::vector<double>& values, double mean);

struct BatchMeans {
    int64_t count = 0;                  // n
    double mean = 0.0;                  // mean of all n values
    double lag1_autocorrelation = 0.0;
    BlockChoice block;
    int64_t blocks = 0;                 // k = floor(n / b); the last n - k b values count in the mean only
    // b times the sample variance (k - 1 divisor) of the k block means around their own mean.
    double long_run_variance = 0.0;
    double stderr_mean = 0.0;           // sqrt(long_run_variance / n); NaN when k < 2
    double naive_stderr = 0.0;          // sample sd / sqrt(n): right only for independent values
};

// Batch-means statistics of `values` (finite, at least one) with blocks of block_tokens
// values, or the default length when block_tokens is 0. Throws AccuracyError for an empty
// series or block_tokens < 0.
BatchMeans batch_means(const std::vector<double>& values, int64_t block_tokens = 0);

// Fewest tokens N >= n at which the one-sided bound at `confidence` would clear a margin
// `gap` away from the mean, if the mean and the long-run variance stayed as observed and the
// blocks kept their length b: t(confidence, floor(N / b) - 1) * sqrt(long_run_variance / N) < gap.
// 0 when no finite N does (gap <= 0, or a non-finite input).
int64_t tokens_to_decide(double gap, double long_run_variance, double confidence, int64_t block_tokens, int64_t n);

}  // namespace wideattn::accuracy
