// batch_means.cpp - see batch_means.h.
#include "accuracy/batch_means.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>

#include "accuracy/accuracy_error.h"
#include "accuracy/student_t.h"

namespace wideattn::accuracy {
namespace {

// Largest token count tokens_to_decide searches up to (beyond it: "no finite N").
constexpr int64_t kMaxTokensToDecide = int64_t{1} << 50;

// Neumaier's compensated sum: the means stay accurate to ~1 ulp over tens of millions of terms.
class CompensatedSum {
public:
    void add(double x) {
        const double t = sum_ + x;
        compensation_ += std::fabs(sum_) >= std::fabs(x) ? (sum_ - t) + x : (x - t) + sum_;
        sum_ = t;
    }
    double value() const { return sum_ + compensation_; }

private:
    double sum_ = 0.0;
    double compensation_ = 0.0;
};

double mean_of(const double* values, int64_t n) {
    CompensatedSum sum;
    for (int64_t i = 0; i < n; ++i) sum.add(values[i]);
    return sum.value() / static_cast<double>(n);
}

// Smallest integer b with b^3 >= n.
int64_t cube_root_ceiling(int64_t n) {
    int64_t b = std::max<int64_t>(1, static_cast<int64_t>(std::llround(std::cbrt(static_cast<double>(n)))));
    while (b * b * b < n) ++b;
    while (b > 1 && (b - 1) * (b - 1) * (b - 1) >= n) --b;
    return b;
}

// Sample variance (k - 1 divisor) of the k block means of length b, around their own mean.
double block_mean_variance(const std::vector<double>& values, int64_t b, int64_t k) {
    std::vector<double> means(static_cast<size_t>(k));
    for (int64_t j = 0; j < k; ++j) means[static_cast<size_t>(j)] = mean_of(values.data() + j * b, b);
    const double grand = mean_of(means.data(), k);
    CompensatedSum squares;
    for (double m : means) squares.add((m - grand) * (m - grand));
    return squares.value() / static_cast<double>(k - 1);
}

// Whether the bound at N tokens clears the gap.
bool clears(double gap, double long_run_variance, double confidence, int64_t block_tokens, int64_t tokens) {
    const int64_t blocks = tokens / block_tokens;
    if (blocks < 2) return false;
    const double t = student_t_quantile(confidence, static_cast<double>(blocks - 1));
    return t * std::sqrt(long_run_variance / static_cast<double>(tokens)) < gap;
}

}  // namespace

const char* block_rule_name(BlockRule rule) {
    switch (rule) {
        case BlockRule::kStated: return "stated";
        case BlockRule::kCubeRoot: return "cube_root";
        case BlockRule::kAutocorrelation: return "lag1_autocorrelation";
        case BlockRule::kCapped: return "capped";
    }
    return "unknown";
}

BlockChoice default_block_length(int64_t n, double lag1) {
    BlockChoice choice;
    const int64_t cube = cube_root_ceiling(std::max<int64_t>(n, 1));
    const double r = std::isfinite(lag1) ? std::max(0.0, lag1) : 0.0;
    // b >= 2 r / (target (1 - r^2)); r at or near 1 asks for every value in one block.
    const double wanted = r < 1.0 ? std::ceil(2.0 * r / (kBlockBiasTarget * (1.0 - r * r))) : HUGE_VAL;
    const int64_t autocorrelation = wanted >= static_cast<double>(n) ? n : static_cast<int64_t>(wanted);
    choice.wanted_tokens = std::max(cube, autocorrelation);
    choice.rule = autocorrelation > cube ? BlockRule::kAutocorrelation : BlockRule::kCubeRoot;
    const int64_t cap = std::max<int64_t>(1, n / kMinBlocks);
    choice.block_tokens = std::min(choice.wanted_tokens, cap);
    if (choice.block_tokens < choice.wanted_tokens) choice.rule = BlockRule::kCapped;
    return choice;
}

double accurate_mean(const std::vector<double>& values) {
    return values.empty() ? 0.0 : mean_of(values.data(), static_cast<int64_t>(values.size()));
}

double lag1_autocorrelation(const std::vector<double>& values, double mean) {
    CompensatedSum cross, squares;
    for (size_t t = 0; t < values.size(); ++t) {
        const double x = values[t] - mean;
        squares.add(x * x);
        if (t + 1 < values.size()) cross.add(x * (values[t + 1] - mean));
    }
    return squares.value() > 0.0 ? cross.value() / squares.value() : 0.0;
}

BatchMeans batch_means(const std::vector<double>& values, int64_t block_tokens) {
    if (values.empty()) throw AccuracyError("batch means of an empty series");
    if (block_tokens < 0) throw AccuracyError("--block-tokens must be >= 1, got " + std::to_string(block_tokens));
    BatchMeans result;
    const int64_t n = static_cast<int64_t>(values.size());
    result.count = n;
    result.mean = mean_of(values.data(), n);
    result.lag1_autocorrelation = lag1_autocorrelation(values, result.mean);
    if (block_tokens > 0) {
        result.block = {block_tokens, BlockRule::kStated, block_tokens};
    } else {
        result.block = default_block_length(n, result.lag1_autocorrelation);
    }
    const int64_t b = result.block.block_tokens;
    result.blocks = n / b;
    CompensatedSum squares;
    for (double v : values) squares.add((v - result.mean) * (v - result.mean));
    const double nan = std::numeric_limits<double>::quiet_NaN();
    result.naive_stderr = n > 1 ? std::sqrt(squares.value() / static_cast<double>(n - 1) / static_cast<double>(n)) : nan;
    if (result.blocks < 2) {
        result.long_run_variance = nan;
        result.stderr_mean = nan;
        return result;
    }
    result.long_run_variance = static_cast<double>(b) * block_mean_variance(values, b, result.blocks);
    result.stderr_mean = std::sqrt(result.long_run_variance / static_cast<double>(n));
    return result;
}

int64_t tokens_to_decide(double gap, double long_run_variance, double confidence, int64_t block_tokens, int64_t n) {
    if (!(gap > 0.0) || !std::isfinite(gap) || !std::isfinite(long_run_variance) || block_tokens < 1) return 0;
    int64_t lo = std::max<int64_t>(n, 1);  // does not clear (or is where the search starts)
    if (clears(gap, long_run_variance, confidence, block_tokens, lo)) return lo;
    int64_t hi = lo;
    do {
        if (hi >= kMaxTokensToDecide) return 0;
        lo = hi;
        hi *= 2;
    } while (!clears(gap, long_run_variance, confidence, block_tokens, hi));
    while (hi - lo > 1) {  // lo does not clear, hi does; the condition is monotone in N
        const int64_t mid = lo + (hi - lo) / 2;
        if (clears(gap, long_run_variance, confidence, block_tokens, mid)) hi = mid; else lo = mid;
    }
    return hi;
}

}  // namespace wideattn::accuracy
