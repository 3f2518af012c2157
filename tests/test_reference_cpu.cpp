// test_reference_cpu.cpp - the CPU fp64 reference against closed forms and against an
// independent long-double computation on a paged, shuffled, varlen problem.
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "accuracy/bf16.h"
#include "accuracy/reference_cpu.h"
#include "tools/harness/problem.h"

using namespace wideattn;

namespace {

// fp64 against long double on these small problems: agreement to the last few bits.
constexpr double kTolerance = 1e-12;

// Independent straight-loop attention in long double over the HostProblem's layout.
void naive_attention(const HostProblem& h, std::vector<long double>* out, std::vector<long double>* lse) {
    const auto& s = h.spec;
    const int group = s.num_q_heads / s.num_kv_heads;
    out->assign(static_cast<size_t>(h.out_elements()), 0.0L);
    lse->assign(static_cast<size_t>(h.lse_elements()), 0.0L);
    for (size_t seq = 0; seq < s.q_lens.size(); ++seq) {
        for (int i = 0; i < s.q_lens[seq]; ++i) {
            const int token = h.cu_seqlens_q[seq] + i;
            const int visible = s.contexts[seq] + i + 1;
            for (int head = 0; head < s.num_q_heads; ++head) {
                const int kvh = head / group;
                std::vector<long double> scores(visible);
                long double max_score = -INFINITY;
                for (int j = 0; j < visible; ++j) {
                    const int64_t block = h.block_table[seq * h.table_stride + j / s.block_size];
                    const int64_t k_row = ((block * s.block_size + j % s.block_size) * s.num_kv_heads + kvh) * s.head_dim;
                    long double dot = 0.0L;
                    for (int d = 0; d < s.head_dim; ++d)
                        dot += static_cast<long double>(bf16_to_float(h.q[token * h.q_token_stride() + head * s.head_dim + d])) *
                               bf16_to_float(h.k[k_row + d]);
                    scores[j] = dot * s.softmax_scale;
                    max_score = std::fmax(max_score, scores[j]);
                }
                long double total = 0.0L;
                for (auto& x : scores) total += (x = std::exp(x - max_score));
                for (int j = 0; j < visible; ++j) {
                    const int64_t block = h.block_table[seq * h.table_stride + j / s.block_size];
                    const int64_t v_row = ((block * s.block_size + j % s.block_size) * s.num_kv_heads + kvh) * s.head_dim;
                    for (int d = 0; d < s.head_dim; ++d)
                        (*out)[token * h.q_token_stride() + head * s.head_dim + d] +=
                            scores[j] / total * bf16_to_float(h.v[v_row + d]);
                }
                (*lse)[head * h.total_q + token] = max_score + std::log(total);
            }
        }
    }
}

std::string run_reference(const HostProblem& h, std::vector<double>* out, std::vector<double>* lse) {
    out->assign(static_cast<size_t>(h.out_elements()), NAN);
    lse->assign(static_cast<size_t>(h.lse_elements()), NAN);
    const wideattn_prefill_params p = h.params(h.q.data(), h.k.data(), h.v.data(), out->data(), lse->data(),
                                               h.cu_seqlens_q.data(), h.seq_lens_k.data(), h.block_table.data(),
                                               WIDEATTN_DTYPE_F64);
    return accuracy::reference_attention_cpu(p, out->data(), lse->data());
}

// One sequence of `q_len` new tokens after `context` cached keys, a single KV head, pages of
// ProblemSpec's default size; built (REQUIREd) with ProblemSpec's default seed.
HostProblem single_sequence_problem(int32_t q_len, int32_t context, int32_t num_q_heads, int32_t head_dim) {
    ProblemSpec spec = problem_spec({q_len}, {context}, num_q_heads, /*num_kv_heads=*/1, ProblemSpec{}.block_size,
                                    ProblemSpec{}.seed);
    spec.head_dim = head_dim;
    HostProblem h;
    REQUIRE(make_problem(spec, &h).empty());
    return h;
}

}  // namespace

TEST_CASE("reference_cpu: matches an independent computation on a paged varlen batch") {
    ProblemSpec spec;
    spec.q_lens = {3, 0, 17, 1};
    spec.contexts = {0, 5, 20, 40};
    spec.num_q_heads = 4;
    spec.num_kv_heads = 2;
    spec.head_dim = 32;
    spec.block_size = 16;
    spec.q_token_pad = 8;
    spec.k_outlier = 6.0f;
    spec.input_scale = 0.7f;
    spec.softmax_scale = 0.3f;
    spec.seed = 42;
    HostProblem h;
    REQUIRE(make_problem(spec, &h).empty());
    std::vector<double> out, lse;
    REQUIRE(run_reference(h, &out, &lse).empty());
    std::vector<long double> want, want_lse;
    naive_attention(h, &want, &want_lse);
    const int64_t row = int64_t{spec.num_q_heads} * spec.head_dim;
    double worst = 0.0;
    for (int t = 0; t < h.total_q; ++t)
        for (int64_t e = 0; e < row; ++e) {
            const int64_t i = t * h.q_token_stride() + e;
            worst = std::fmax(worst, std::fabs(out[i] - static_cast<double>(want[i])));
        }
    CHECK(worst < kTolerance);
    for (size_t i = 0; i < lse.size(); ++i)
        CHECK(lse[i] == doctest::Approx(static_cast<double>(want_lse[i])).epsilon(kTolerance));
    // Padding between token rows is never written.
    CHECK(std::isnan(out[row]));
}

TEST_CASE("reference_cpu: equal keys give the mean of V and lse = score + log(n)") {
    constexpr float kKeyValue = 0.5f;  // every score equals sum(q) * kKeyValue
    HostProblem h = single_sequence_problem(/*q_len=*/4, /*context=*/6, /*num_q_heads=*/2, /*head_dim=*/16);
    const ProblemSpec& s = h.spec;
    for (auto& k : h.k) k = float_to_bf16(kKeyValue);
    std::vector<double> out, lse;
    REQUIRE(run_reference(h, &out, &lse).empty());
    for (int i = 0; i < s.q_lens[0]; ++i) {
        const int visible = s.contexts[0] + i + 1;
        for (int head = 0; head < s.num_q_heads; ++head) {
            const int64_t q_row = i * h.q_token_stride() + head * s.head_dim;
            double q_sum = 0.0;
            for (int d = 0; d < s.head_dim; ++d) q_sum += bf16_to_float(h.q[q_row + d]);
            const double want_lse = kKeyValue * q_sum + std::log(visible);
            CHECK(lse[head * h.total_q + i] == doctest::Approx(want_lse).epsilon(kTolerance));
            for (int d = 0; d < s.head_dim; ++d) {
                double mean = 0.0;
                for (int j = 0; j < visible; ++j) {
                    const int64_t block = h.block_table[j / s.block_size];
                    mean += bf16_to_float(h.v[(block * s.block_size + j % s.block_size) * s.head_dim + d]);
                }
                CHECK(out[q_row + d] == doctest::Approx(mean / visible).epsilon(kTolerance));
            }
        }
    }
}

TEST_CASE("reference_cpu: the first new token of a prompt sees exactly one key") {
    const HostProblem h = single_sequence_problem(/*q_len=*/2, /*context=*/0, /*num_q_heads=*/1, /*head_dim=*/8);
    const ProblemSpec& s = h.spec;
    std::vector<double> out, lse;
    REQUIRE(run_reference(h, &out, &lse).empty());
    const int64_t first_key_row = int64_t{h.block_table[0]} * s.block_size * s.head_dim;
    for (int d = 0; d < s.head_dim; ++d) CHECK(out[d] == bf16_to_float(h.v[first_key_row + d]));
}

TEST_CASE("reference_cpu: bad inputs are refused with a message") {
    const HostProblem h = single_sequence_problem(/*q_len=*/2, /*context=*/0, /*num_q_heads=*/2, /*head_dim=*/8);
    std::vector<double> out(static_cast<size_t>(h.out_elements()));
    wideattn_prefill_params p = h.params(h.q.data(), h.k.data(), h.v.data(), out.data(), nullptr, h.cu_seqlens_q.data(),
                                         h.seq_lens_k.data(), h.block_table.data(), WIDEATTN_DTYPE_F64);
    auto with = [&](auto mutate) {
        wideattn_prefill_params q = p;
        mutate(q);
        return accuracy::reference_attention_cpu(q, out.data(), nullptr);
    };
    CHECK(with([](auto&) {}).empty());
    CHECK(with([](auto& q) { q.q = nullptr; }).find("is null") != std::string::npos);
    CHECK(with([](auto& q) { q.kv_dtype = WIDEATTN_DTYPE_E4M3; }).find("kv_dtype=4") != std::string::npos);
    CHECK(with([](auto& q) { q.num_kv_heads = 2, q.num_q_heads = 3; }).find("num_q_heads=3") != std::string::npos);
    std::vector<int32_t> bad_table = h.block_table;
    bad_table[0] = h.num_blocks;
    CHECK(with([&](auto& q) { q.block_table = bad_table.data(); }).find("outside 0..") != std::string::npos);
    std::vector<int32_t> short_keys = {1};
    CHECK(with([&](auto& q) { q.seq_lens_k = short_keys.data(); }).find("seq_lens_k=1") != std::string::npos);
}
