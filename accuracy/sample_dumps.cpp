// sample_dumps.cpp - see sample_dumps.h.
//
// Reference logits of token t, vocab entry i:
//   rank = permutation[(i + offset_t) mod vocab]
//   z    = kPeakLogit - kZipfSlope * confidence_t * log(1 + rank) + kTokenNoise * n(t, i)
//   logit = kSoftcap * tanh(z / kSoftcap)
// with confidence_t uniform in [kMinConfidence, kMaxConfidence]. A perturbed role adds
// sample_perturbation(role) * n_role(t, i) to z before the softcap. n(...) are approximately
// standard normal (Irwin-Hall sum of four uniforms from a counter-based hash), so every value
// depends only on (seed, role, t, i). The token ids are sampled from the reference softmax.
#include "accuracy/sample_dumps.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <memory>
#include <numeric>

#include "accuracy/accuracy_error.h"

namespace wideattn::accuracy {
namespace {

constexpr double kPeakLogit = 20.0;
constexpr double kZipfSlope = 3.0;
constexpr double kMinConfidence = 0.6;
constexpr double kMaxConfidence = 1.6;
constexpr double kTokenNoise = 1.0;
constexpr double kSoftcap = 30.0;
constexpr double kBaselinePerturbation = 0.05;
constexpr double kPassPerturbation = 0.7 * kBaselinePerturbation;
constexpr double kFailPerturbation = 1.5 * kBaselinePerturbation;
constexpr int64_t kRowsPerWrite = 16;

// Stream ids of the hash: one per role's perturbation plus the reference's own randomness.
constexpr uint64_t kStreamReferenceNoise = 11;
constexpr uint64_t kStreamTokenSetup = 12;
constexpr uint64_t kStreamPermutation = 13;
constexpr uint64_t kStreamTokenSampling = 14;

uint64_t mix(uint64_t x) {  // splitmix64 finaliser
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

uint64_t hash(uint64_t seed, uint64_t stream, uint64_t a, uint64_t b) {
    return mix(mix(mix(seed ^ (stream << 56)) ^ a) ^ (b * 0xd1b54a32d192ed03ull));
}

double uniform(uint64_t bits) { return static_cast<double>(bits >> 11) * 0x1.0p-53; }

// Approximately N(0, 1): four 16-bit uniforms in [0, 1), each of variance 1/12, summed,
// centred and scaled by sqrt(3).
double normal(uint64_t bits) {
    constexpr double kUnit = 1.0 / 65536.0;
    constexpr double kMeanOfSum = 2.0 * (65535.0 / 65536.0);
    constexpr double kSqrt3 = 1.7320508075688772;
    const double sum = static_cast<double>((bits & 0xffff) + ((bits >> 16) & 0xffff) + ((bits >> 32) & 0xffff) +
                                           (bits >> 48)) * kUnit;
    return (sum - kMeanOfSum) * kSqrt3;
}

uint64_t role_stream(SampleRole role) { return static_cast<uint64_t>(role) + 1; }

}  // namespace

const char* sample_role_name(SampleRole role) {
    switch (role) {
        case SampleRole::kReference: return "reference";
        case SampleRole::kBaseline: return "baseline";
        case SampleRole::kCandidatePass: return "candidate_pass";
        case SampleRole::kCandidateFail: return "candidate_fail";
    }
    return "unknown";
}

bool parse_sample_role(const std::string& name, SampleRole* role) {
    for (SampleRole r : {SampleRole::kReference, SampleRole::kBaseline, SampleRole::kCandidatePass,
                         SampleRole::kCandidateFail}) {
        if (name == sample_role_name(r)) {
            *role = r;
            return true;
        }
    }
    return false;
}

std::string sample_file_name(SampleRole role) { return std::string("sample_") + sample_role_name(role) + ".h5"; }

double sample_perturbation(SampleRole role) {
    switch (role) {
        case SampleRole::kReference: return 0.0;
        case SampleRole::kBaseline: return kBaselinePerturbation;
        case SampleRole::kCandidatePass: return kPassPerturbation;
        case SampleRole::kCandidateFail: return kFailPerturbation;
    }
    return 0.0;
}

std::vector<std::string> make_sample_dumps(const std::string& outdir, const SampleOptions& options) {
    if (options.tokens < 1 || options.tokens > kMaxSampleTokens)
        throw AccuracyError("--tokens must be in 1.." + std::to_string(kMaxSampleTokens) + ", got " +
                            std::to_string(options.tokens));
    if (options.vocab < 2 || options.vocab > kMaxSampleVocab)
        throw AccuracyError("--vocab must be in 2.." + std::to_string(kMaxSampleVocab) + ", got " +
                            std::to_string(options.vocab));
    if (options.roles.empty()) throw AccuracyError("make-sample: no roles to write");
    std::error_code mkdir_error;
    std::filesystem::create_directories(outdir, mkdir_error);
    if (mkdir_error)
        throw AccuracyError("cannot create OUTDIR '" + outdir + "': " + mkdir_error.message());
    const int64_t vocab = options.vocab;
    const uint64_t seed = options.seed;

    // A fixed random permutation of ranks (Fisher-Yates with the hash) and log(1 + rank).
    std::vector<int32_t> permutation(static_cast<size_t>(vocab));
    std::iota(permutation.begin(), permutation.end(), 0);
    for (int64_t i = vocab - 1; i > 0; --i) {
        const int64_t j = static_cast<int64_t>(hash(seed, kStreamPermutation, static_cast<uint64_t>(i), 0) %
                                               static_cast<uint64_t>(i + 1));
        std::swap(permutation[i], permutation[j]);
    }
    std::vector<double> log_rank(static_cast<size_t>(vocab));
    for (int64_t r = 0; r < vocab; ++r) log_rank[r] = std::log1p(static_cast<double>(r));

    std::vector<std::string> paths;
    std::vector<std::unique_ptr<LogitDumpWriter>> writers;
    for (SampleRole role : options.roles) {
        const std::string path = outdir + "/" + sample_file_name(role);
        DumpMetadata metadata{"synthetic-zipf-v1", sample_role_name(role),
                              "wideattn accuracy make-sample seed=" + std::to_string(seed)};
        writers.push_back(std::make_unique<LogitDumpWriter>(path, vocab, options.type, metadata));
        paths.push_back(path);
    }

    std::vector<double> pre_softcap(static_cast<size_t>(vocab));
    std::vector<std::vector<float>> rows(options.roles.size(), std::vector<float>(static_cast<size_t>(kRowsPerWrite * vocab)));
    std::vector<int32_t> tokens(static_cast<size_t>(options.tokens));
    std::vector<double> probabilities(static_cast<size_t>(vocab));
    for (int64_t t = 0; t < options.tokens; ++t) {
        const uint64_t setup = hash(seed, kStreamTokenSetup, static_cast<uint64_t>(t), 0);
        const int64_t offset = static_cast<int64_t>(setup % static_cast<uint64_t>(vocab));
        const double confidence = kMinConfidence + (kMaxConfidence - kMinConfidence) * uniform(mix(setup));
        for (int64_t i = 0; i < vocab; ++i) {
            const int32_t rank = permutation[static_cast<size_t>((i + offset) % vocab)];
            pre_softcap[i] = kPeakLogit - kZipfSlope * confidence * log_rank[rank] +
                             kTokenNoise * normal(hash(seed, kStreamReferenceNoise, static_cast<uint64_t>(t), static_cast<uint64_t>(i)));
        }
        // Next token sampled from the reference distribution.
        double max_logit = -INFINITY;
        for (int64_t i = 0; i < vocab; ++i) max_logit = std::max(max_logit, kSoftcap * std::tanh(pre_softcap[i] / kSoftcap));
        double total = 0.0;
        for (int64_t i = 0; i < vocab; ++i) {
            probabilities[i] = std::exp(kSoftcap * std::tanh(pre_softcap[i] / kSoftcap) - max_logit);
            total += probabilities[i];
        }
        double target = uniform(hash(seed, kStreamTokenSampling, static_cast<uint64_t>(t), 0)) * total;
        int64_t token = vocab - 1;
        for (int64_t i = 0; i < vocab; ++i) {
            target -= probabilities[i];
            if (target < 0.0) {
                token = i;
                break;
            }
        }
        tokens[static_cast<size_t>(t)] = static_cast<int32_t>(token);

        const int64_t slot = t % kRowsPerWrite;
        for (size_t w = 0; w < options.roles.size(); ++w) {
            const double sigma = sample_perturbation(options.roles[w]);
            const uint64_t stream = role_stream(options.roles[w]);
            float* row = rows[w].data() + slot * vocab;
            for (int64_t i = 0; i < vocab; ++i) {
                double z = pre_softcap[i];
                if (sigma > 0.0) z += sigma * normal(hash(seed, stream, static_cast<uint64_t>(t), static_cast<uint64_t>(i)));
                row[i] = static_cast<float>(kSoftcap * std::tanh(z / kSoftcap));
            }
        }
        if (slot == kRowsPerWrite - 1 || t == options.tokens - 1) {
            for (size_t w = 0; w < writers.size(); ++w) writers[w]->append_rows(rows[w].data(), slot + 1);
            if (options.progress) options.progress(t + 1, options.tokens);
        }
    }
    for (auto& writer : writers) {
        writer->write_tokens(tokens);
        writer->close();
    }
    return paths;
}

}  // namespace wideattn::accuracy
