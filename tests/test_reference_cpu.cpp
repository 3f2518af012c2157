// test_reference_cpu.cpp - the CPU fp64 reference against closed forms and against an
// independent long-double computation on a paged, shuffled, varlen problem; K from V against the
// K+V computation on rebuilt keys, hand-worked values, an inv_freq table and a cos / sin table.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "accuracy/bf16.h"
#include "accuracy/reference_cpu.h"
#include "kernels/common/k_from_v.h"
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

// The largest |got - want| over the problem's output rows (padding between rows left out).
template <typename Want>
double worst_row_error(const HostProblem& h, const std::vector<double>& got, const std::vector<Want>& want) {
    const int64_t row = int64_t{h.spec.num_q_heads} * h.spec.head_dim;
    double worst = 0.0;
    for (int t = 0; t < h.total_q; ++t)
        for (int64_t e = 0; e < row; ++e) {
            const int64_t i = t * h.q_token_stride() + e;
            worst = std::fmax(worst, std::fabs(got[i] - static_cast<double>(want[i])));
        }
    return worst;
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
    CHECK(worst_row_error(h, out, want) < kTolerance);
    const int64_t row = int64_t{spec.num_q_heads} * spec.head_dim;
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

namespace {

constexpr int32_t kGemmaHeadDim = 512;
constexpr int32_t kGemmaHalf = kGemmaHeadDim / 2;

// A paged varlen problem of Gemma 4's head dim for the K-from-V cases: 4 query heads over 2 KV heads,
// pages of 16, softmax scale 0.05; built (REQUIREd) from `seed`.
HostProblem gemma_head_problem(const std::vector<int32_t>& q_lens, const std::vector<int32_t>& contexts,
                               uint64_t seed) {
    ProblemSpec spec = problem_spec(q_lens, contexts, /*num_q_heads=*/4, /*num_kv_heads=*/2, /*block_size=*/16, seed);
    spec.head_dim = kGemmaHeadDim;
    spec.softmax_scale = 0.05f;
    HostProblem h;
    REQUIRE(make_problem(spec, &h).empty());
    return h;
}

std::vector<float> rebuilt_row(const std::vector<float>& v, const std::vector<float>& w, int32_t position) {
    const wideattn_k_from_v kfv = gemma4_k_from_v(w.data());
    std::vector<float> k(v.size());
    accuracy::k_from_v_row(v.data(), kfv, static_cast<int32_t>(v.size()), position, k.data());
    return k;
}

}  // namespace

TEST_CASE("reference_cpu: K from V equals the K+V computation on K rebuilt from V, paged varlen") {
    HostProblem h = gemma_head_problem({3, 1, 6}, {0, 45, 70}, /*seed=*/7);
    const std::vector<float> w = random_k_norm_weights(kGemmaHeadDim, 11);
    const wideattn_k_from_v kfv = gemma4_k_from_v(w.data());

    std::vector<double> from_v(static_cast<size_t>(h.out_elements()), NAN), from_v_lse(h.lse_elements(), NAN);
    wideattn_prefill_params p = h.params(h.q.data(), nullptr, h.v.data(), from_v.data(), from_v_lse.data(),
                                         h.cu_seqlens_q.data(), h.seq_lens_k.data(), h.block_table.data(),
                                         WIDEATTN_DTYPE_F64);
    p.flags = WIDEATTN_FLAG_K_FROM_V;
    p.k_from_v = &kfv;
    REQUIRE(accuracy::reference_attention_cpu(p, from_v.data(), from_v_lse.data()).empty());

    rebuild_k_from_v(kfv, &h);
    std::vector<double> with_k, with_k_lse;
    REQUIRE(run_reference(h, &with_k, &with_k_lse).empty());
    std::vector<long double> naive, naive_lse;
    naive_attention(h, &naive, &naive_lse);
    CHECK(worst_row_error(h, from_v, with_k) == 0.0);  // the same keys through the same code: the same bits
    CHECK(worst_row_error(h, from_v, naive) < kTolerance);
    for (size_t i = 0; i < from_v_lse.size(); ++i) CHECK(from_v_lse[i] == with_k_lse[i]);
}

TEST_CASE("reference_cpu: K from V, RoPE on hand-worked values") {
    const std::vector<uint16_t> v_bits = random_bf16(kGemmaHeadDim, 1.0f, 3);
    std::vector<float> v(kGemmaHeadDim);
    for (int d = 0; d < kGemmaHeadDim; ++d) v[d] = bf16_to_float(v_bits[d]);
    const std::vector<float> w = random_k_norm_weights(kGemmaHeadDim, 5);
    std::vector<float> scaled(kGemmaHeadDim);
    for (int d = 0; d < kGemmaHeadDim; ++d) scaled[d] = bf16_to_float(float_to_bf16(v[d] * w[d]));

    SUBCASE("position 0 is the identity on the scaled K, bf16(V * w)") {
        const std::vector<float> k = rebuilt_row(v, w, 0);
        for (int d = 0; d < kGemmaHeadDim; ++d) CHECK(k[d] == scaled[d]);
    }
    SUBCASE("the dims of the 192 frequency-0 pairs pass unchanged at any position") {
        for (const int32_t position : {1, 4095, 131071}) {
            const std::vector<float> k = rebuilt_row(v, w, position);
            for (int i = kGemma4GlobalRotaryDims / 2; i < kGemmaHalf; ++i) {
                CHECK(k[i] == scaled[i]);
                CHECK(k[i + kGemmaHalf] == scaled[i + kGemmaHalf]);
            }
        }
    }
    SUBCASE("inv_freq: theta^(-2i/512) for i < 64, 0 after") {
        constexpr float kTheta = kGemma4GlobalRopeTheta;
        CHECK(rope_inv_freq(kTheta, 0, kGemmaHeadDim, kGemma4GlobalRotaryDims) == 1.0f);
        CHECK(rope_inv_freq(kTheta, 1, kGemmaHeadDim, kGemma4GlobalRotaryDims) ==
              doctest::Approx(std::pow(1.0e6, -2.0 / 512)).epsilon(1e-7));
        CHECK(rope_inv_freq(kTheta, 63, kGemmaHeadDim, kGemma4GlobalRotaryDims) ==
              doctest::Approx(std::pow(1.0e6, -126.0 / 512)).epsilon(1e-7));
        CHECK(rope_inv_freq(kTheta, 64, kGemmaHeadDim, kGemma4GlobalRotaryDims) == 0.0f);
        CHECK(rope_inv_freq(kTheta, 255, kGemmaHeadDim, kGemma4GlobalRotaryDims) == 0.0f);
    }
    SUBCASE("angle 1 rad (position 1, frequency 0): bf16 cos / sin and bf16 products and sum") {
        // bf16(cos 1) = bf16(0.5403023) = 138/256 = 0.5390625, bf16(sin 1) = bf16(0.8414710) =
        // 215/256 = 0.83984375.
        constexpr float kCos1 = 0.5390625f, kSin1 = 0.83984375f;
        const RopeCosSin cs = rope_cos_sin(rope_angle(1, 1.0f));
        CHECK(cs.c == kCos1);
        CHECK(cs.s == kSin1);
        std::vector<float> ones(kGemmaHeadDim, 0.0f), unit_w(kGemmaHeadDim, 1.0f);
        ones[0] = 1.0f;  // dim 0 turns with dim 256
        std::vector<float> k = rebuilt_row(ones, unit_w, 1);
        CHECK(k[0] == kCos1);              // x0 c - x256 s = c
        CHECK(k[kGemmaHalf] == kSin1);     // x256 c + x0 s = s
        ones[kGemmaHalf] = 1.0f;
        k = rebuilt_row(ones, unit_w, 1);
        CHECK(k[0] == -0.30078125f);       // c - s = -77/256, exact in bf16
        CHECK(k[kGemmaHalf] == 1.375f);    // c + s = 1.37890625 = 176.5/128: the tie rounds to even, 176/128
    }
}

TEST_CASE("reference_cpu: K from V with the caller's inv_freq table") {
    constexpr int32_t kLargePosition = 131000;
    constexpr int32_t kPerturbed = 1;  // the frequency whose entry moves by one fp32 ulp
    const std::vector<uint16_t> v_bits = random_bf16(kGemmaHeadDim, 1.0f, 13);
    std::vector<float> v(kGemmaHeadDim);
    for (int d = 0; d < kGemmaHeadDim; ++d) v[d] = bf16_to_float(v_bits[d]);
    const std::vector<float> w = random_k_norm_weights(kGemmaHeadDim, 17);
    const wideattn_k_from_v formula = gemma4_k_from_v(w.data());
    std::vector<float> table = formula_inv_freq(formula, kGemmaHeadDim);
    REQUIRE(table.size() == static_cast<size_t>(kGemma4GlobalRotaryDims / 2));
    wideattn_k_from_v given = formula;
    given.inv_freq = table.data();
    const auto row = [&](const wideattn_k_from_v& kfv, int32_t position) {
        std::vector<float> k(kGemmaHeadDim);
        accuracy::k_from_v_row(v.data(), kfv, kGemmaHeadDim, position, k.data());
        return k;
    };

    SUBCASE("the formula's values as a table: the NULL path's bits at every position") {
        for (const int32_t position : {0, 1, 4095, 65536, kLargePosition, 131071}) {
            CAPTURE(position);
            CHECK(std::memcmp(row(given, position).data(), row(formula, position).data(), kGemmaHeadDim * sizeof(float)) ==
                  0);
        }
        // The whole attention, paged varlen, with the table: the same bits as without it.
        const HostProblem h = gemma_head_problem({3, 2}, {40, 9}, /*seed=*/19);
        std::vector<double> with_table(static_cast<size_t>(h.out_elements()), NAN), without(with_table.size(), NAN);
        wideattn_prefill_params p = h.params(h.q.data(), nullptr, h.v.data(), with_table.data(), nullptr,
                                             h.cu_seqlens_q.data(), h.seq_lens_k.data(), h.block_table.data(),
                                             WIDEATTN_DTYPE_F64);
        p.flags = WIDEATTN_FLAG_K_FROM_V;
        p.k_from_v = &given;
        REQUIRE(accuracy::reference_attention_cpu(p, with_table.data(), nullptr).empty());
        p.k_from_v = &formula;
        REQUIRE(accuracy::reference_attention_cpu(p, without.data(), nullptr).empty());
        CHECK(worst_row_error(h, with_table, without) == 0.0);
    }
    SUBCASE("one entry one fp32 ulp off: K of that frequency moves at a large position, nothing else does") {
        table[kPerturbed] = std::nextafter(table[kPerturbed], 1.0f);
        CHECK(std::memcmp(row(given, 0).data(), row(formula, 0).data(), kGemmaHeadDim * sizeof(float)) == 0);
        const std::vector<float> moved = row(given, kLargePosition), kept = row(formula, kLargePosition);
        CHECK((moved[kPerturbed] != kept[kPerturbed] || moved[kPerturbed + kGemmaHalf] != kept[kPerturbed + kGemmaHalf]));
        for (int d = 0; d < kGemmaHeadDim; ++d) {
            if (d == kPerturbed || d == kPerturbed + kGemmaHalf) continue;
            CAPTURE(d);
            CHECK(moved[d] == kept[d]);
        }
    }
    SUBCASE("a 32-byte description (C API 0.5.0) has no table: the attention ignores the bytes after it") {
        constexpr float kOtherFrequency = 0.25f;  // far from the formula's 0.947: moves every key past position 0
        table[kPerturbed] = kOtherFrequency;
        const HostProblem h = single_sequence_problem(/*q_len=*/2, /*context=*/30, /*num_q_heads=*/2,
                                                      /*head_dim=*/kGemmaHeadDim);
        std::vector<double> old(static_cast<size_t>(h.out_elements()), NAN), fresh(old.size(), NAN),
            moved(old.size(), NAN);
        wideattn_prefill_params p = h.params(h.q.data(), nullptr, h.v.data(), old.data(), nullptr,
                                             h.cu_seqlens_q.data(), h.seq_lens_k.data(), h.block_table.data(),
                                             WIDEATTN_DTYPE_F64);
        p.flags = WIDEATTN_FLAG_K_FROM_V;
        wideattn_k_from_v old_size = given;  // the perturbed table, not read
        old_size.struct_size = kKFromVSizeWithoutInvFreq;
        p.k_from_v = &old_size;
        REQUIRE(accuracy::reference_attention_cpu(p, old.data(), nullptr).empty());
        p.k_from_v = &formula;
        REQUIRE(accuracy::reference_attention_cpu(p, fresh.data(), nullptr).empty());
        p.k_from_v = &given;
        REQUIRE(accuracy::reference_attention_cpu(p, moved.data(), nullptr).empty());
        CHECK(worst_row_error(h, old, fresh) == 0.0);
        CHECK(worst_row_error(h, moved, fresh) > 0.0);
    }
}

namespace {

// The cos / sin table tests: a table of kTablePositions rows (no multiple of 16: a page boundary
// falls inside it) holding the cos / sin of another theta than the description's, so a key the
// table holds and one past it differ visibly.
constexpr int32_t kTablePositions = 37;
constexpr float kOtherTheta = 1.0e4f;

// The table of `kfv`'s frequencies for positions 0 .. positions - 1 with cos / sin by rope_cos_sin
// (the formula's host values): a key the table holds then gets exactly the K of a description
// without one (rope_cos_sin is what k_from_v_row evaluates without a table).
std::vector<uint32_t> formula_cos_sin_table(const wideattn_k_from_v& kfv, int32_t head_dim, int32_t positions) {
    std::vector<uint32_t> table;
    for (int32_t j = 0; j < positions; ++j)
        for (int32_t i = 0; i < kfv.rotary_dims / 2; ++i)
            table.push_back(k_from_v_table_bits(rope_cos_sin(rope_angle(j, k_from_v_inv_freq(kfv, i, head_dim)))));
    return table;
}

// Copies key row `j` of every KV head of sequence `seq` from `from`'s K into `to`'s (problems of one spec).
void copy_key(const HostProblem& from, size_t seq, int32_t j, HostProblem* to) {
    const ProblemSpec& s = from.spec;
    const int64_t block = from.block_table[seq * from.table_stride + j / s.block_size];
    const int64_t row = (block * s.block_size + j % s.block_size) * s.num_kv_heads * s.head_dim;
    std::copy(from.k.begin() + row, from.k.begin() + row + int64_t{s.num_kv_heads} * s.head_dim, to->k.begin() + row);
}

}  // namespace

TEST_CASE("reference_cpu: K from V with a cos / sin table holding part of the positions") {
    const HostProblem h = gemma_head_problem({3, 1, 2}, {60, 20, 40}, /*seed=*/23);
    const std::vector<float> w = random_k_norm_weights(kGemmaHeadDim, 29);
    const wideattn_k_from_v own = gemma4_k_from_v(w.data());
    wideattn_k_from_v other = own;
    other.rope_theta = kOtherTheta;
    const std::vector<uint32_t> table = formula_cos_sin_table(other, kGemmaHeadDim, kTablePositions);
    wideattn_k_from_v with_table = own;
    REQUIRE(attach_host_cos_sin(table, &with_table).empty());
    CHECK(with_table.cos_sin_positions == kTablePositions);
    const auto attention = [&](const HostProblem& problem, const wideattn_k_from_v* kfv) {
        std::vector<double> out(static_cast<size_t>(problem.out_elements()), NAN);
        wideattn_prefill_params p = problem.params(problem.q.data(), kfv ? nullptr : problem.k.data(),
                                                   problem.v.data(), out.data(), nullptr, problem.cu_seqlens_q.data(),
                                                   problem.seq_lens_k.data(), problem.block_table.data(),
                                                   WIDEATTN_DTYPE_F64);
        if (kfv) {
            p.flags = WIDEATTN_FLAG_K_FROM_V;
            p.k_from_v = kfv;
        }
        REQUIRE(accuracy::reference_attention_cpu(p, out.data(), nullptr).empty());
        return out;
    };

    SUBCASE("keys below cos_sin_positions take the table's cos / sin, the others the description's formula") {
        HostProblem expected = h, others = h;
        rebuild_k_from_v(own, &expected);
        rebuild_k_from_v(other, &others);
        for (size_t seq = 0; seq < h.spec.q_lens.size(); ++seq)
            for (int32_t j = 0; j < std::min(h.seq_lens_k[seq], kTablePositions); ++j)
                copy_key(others, seq, j, &expected);
        HostProblem rebuilt = h;
        rebuild_k_from_v(with_table, &rebuilt);  // the host rebuild honours the table too
        CHECK(rebuilt.k == expected.k);
        const std::vector<double> got = attention(h, &with_table);
        CHECK(worst_row_error(h, got, attention(expected, nullptr)) == 0.0);
        CHECK(worst_row_error(h, got, attention(h, &own)) > 0.0);
        CHECK(worst_row_error(h, got, attention(h, &other)) > 0.0);  // sequences 0 and 2 reach past the table
    }
    SUBCASE("a table over every key: the other theta's attention, bit for bit") {
        const std::vector<uint32_t> full = formula_cos_sin_table(other, kGemmaHeadDim, 64);
        wideattn_k_from_v with_full = own;
        REQUIRE(attach_host_cos_sin(full, &with_full).empty());
        CHECK(worst_row_error(h, attention(h, &with_full), attention(h, &other)) == 0.0);
    }
    SUBCASE("the entries are used as stored: wideattn_k_from_v_cos_sin's table gives rope_cos_sin_reduced's K") {
        std::vector<uint32_t> filled;
        REQUIRE(k_from_v_cos_sin_table(own, kGemmaHeadDim, kTablePositions, &filled).empty());
        wideattn_k_from_v with_filled = own;
        REQUIRE(attach_host_cos_sin(filled, &with_filled).empty());
        const std::vector<uint16_t> v_bits = random_bf16(kGemmaHeadDim, 1.0f, 31);
        std::vector<float> v(kGemmaHeadDim), k(kGemmaHeadDim);
        for (int d = 0; d < kGemmaHeadDim; ++d) v[d] = bf16_to_float(v_bits[d]);
        for (int32_t position = 0; position < kTablePositions; ++position) {
            CAPTURE(position);
            accuracy::k_from_v_row(v.data(), with_filled, kGemmaHeadDim, position, k.data());
            for (int32_t i = 0; i < kGemmaHalf; ++i) {
                const float x_lo = k_from_v_scaled(v[i], w[i]);
                const float x_hi = k_from_v_scaled(v[i + kGemmaHalf], w[i + kGemmaHalf]);
                const float angle = rope_angle(position, k_from_v_inv_freq(own, i, kGemmaHeadDim));
                const RopeCosSin cs = 2 * i < own.rotary_dims ? rope_cos_sin_reduced(angle) : RopeCosSin{1.0f, 0.0f};
                CHECK(k[i] == rope_rotate(x_lo, x_hi, cs, true));
                CHECK(k[i + kGemmaHalf] == rope_rotate(x_hi, x_lo, cs, false));
            }
        }
    }
    SUBCASE("a 40-byte description (C API 0.6.0) has no table: the attention ignores the bytes after it") {
        wideattn_k_from_v old_size = with_table;
        old_size.struct_size = kKFromVSizeWithoutCosSin;
        CHECK(worst_row_error(h, attention(h, &old_size), attention(h, &own)) == 0.0);
    }
}

TEST_CASE("reference_cpu: K from V refuses what it cannot rebuild") {
    const HostProblem h = single_sequence_problem(/*q_len=*/2, /*context=*/3, /*num_q_heads=*/2, /*head_dim=*/16);
    std::vector<double> out(static_cast<size_t>(h.out_elements()));
    const std::vector<float> w(16, 1.0f);
    wideattn_k_from_v kfv = gemma4_k_from_v(w.data());
    kfv.rotary_dims = 8;
    wideattn_prefill_params p = h.params(h.q.data(), nullptr, h.v.data(), out.data(), nullptr, h.cu_seqlens_q.data(),
                                         h.seq_lens_k.data(), h.block_table.data(), WIDEATTN_DTYPE_F64);
    p.flags = WIDEATTN_FLAG_K_FROM_V;
    p.k_from_v = &kfv;
    CHECK(accuracy::reference_attention_cpu(p, out.data(), nullptr).empty());
    p.kv_dtype = WIDEATTN_DTYPE_F32;
    CHECK(accuracy::reference_attention_cpu(p, out.data(), nullptr).find("kv_dtype=2") != std::string::npos);
    p.kv_dtype = WIDEATTN_DTYPE_BF16;
    p.k_from_v = nullptr;
    CHECK(accuracy::reference_attention_cpu(p, out.data(), nullptr).find("WIDEATTN_FLAG_K_FROM_V needs k_from_v") !=
          std::string::npos);
}
