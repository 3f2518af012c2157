// test_problem.cpp - the random problem builder used by selftest, GPU tests and benchmarks.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <set>
#include <vector>

#include "accuracy/bf16.h"
#include "fp8/codec/e4m3.h"
#include "kernels/common/v_transposed.h"
#include "tools/harness/problem.h"

using namespace wideattn;

namespace {

constexpr uint8_t kE4m3MagnitudeMask = 0x7F;  // the code without its sign bit
constexpr uint8_t kE4m3NanMagnitude = 0x7F;   // S.1111.111: the only NaN code of e4m3
constexpr int64_t kNearTopCode = 0x70;        // 1.0 x 2^7: the quantiser's scale puts amax above it

bool is_power_of_two(float scale) {
    int exponent = 0;
    return std::frexp(scale, &exponent) == 0.5f;
}

// Every code is a number (never NaN) and dequantises (code * scale) to exactly the bf16 value
// the references read; returns the largest code magnitude.
int64_t check_exact_dequantisation(const std::vector<uint16_t>& bf16_values, const std::vector<uint8_t>& codes,
                                   float scale) {
    int64_t largest_code = 0;
    for (size_t i = 0; i < bf16_values.size(); ++i) {
        CHECK((codes[i] & kE4m3MagnitudeMask) != kE4m3NanMagnitude);
        CHECK(bf16_to_float(bf16_values[i]) == fp8::e4m3_to_float(codes[i]) * scale);
        largest_code = std::max<int64_t>(largest_code, codes[i] & kE4m3MagnitudeMask);
    }
    return largest_code;
}

}  // namespace

TEST_CASE("problem: shapes, shuffled block table and determinism") {
    ProblemSpec spec;
    spec.q_lens = {5, 0, 40};
    spec.contexts = {10, 3, 100};
    spec.num_q_heads = 8;
    spec.num_kv_heads = 1;
    spec.head_dim = 64;
    spec.block_size = 32;
    spec.seed = 9;
    HostProblem a, b;
    REQUIRE(make_problem(spec, &a).empty());
    REQUIRE(make_problem(spec, &b).empty());
    CHECK(a.q == b.q);
    CHECK(a.k == b.k);
    CHECK(a.block_table == b.block_table);
    CHECK(a.total_q == 45);
    CHECK(a.cu_seqlens_q == std::vector<int32_t>{0, 5, 5, 45});
    CHECK(a.seq_lens_k == std::vector<int32_t>{15, 3, 140});
    CHECK(a.table_stride == 5);  // ceil(140 / 32)
    // Used entries are distinct physical blocks, all inside the pool.
    std::set<int32_t> used;
    std::vector<int32_t> in_order;
    const int32_t blocks_per_seq[] = {1, 1, 5};
    for (int s = 0; s < 3; ++s)
        for (int i = 0; i < blocks_per_seq[s]; ++i) {
            const int32_t block = a.block_table[s * a.table_stride + i];
            CHECK(block >= 0);
            CHECK(block < a.num_blocks);
            CHECK(used.insert(block).second);
            in_order.push_back(block);
        }
    CHECK_FALSE(std::is_sorted(in_order.begin(), in_order.end()));  // shuffled
    spec.seed = 10;
    REQUIRE(make_problem(spec, &b).empty());
    CHECK(a.q != b.q);
}

TEST_CASE("problem: causal FLOP count of docs/design.md section 7") {
    ProblemSpec spec;
    spec.q_lens = {16384};
    spec.contexts = {0};
    spec.head_dim = 8;  // keep the allocation small; the formula scales with D
    spec.num_q_heads = 32;
    spec.num_kv_heads = 4;
    spec.block_size = 16;
    HostProblem h;
    REQUIRE(make_problem(spec, &h).empty());
    CHECK(h.flops() == doctest::Approx(4.0 * 8 * 32 * (16384.0 * 16385.0 / 2)));
    spec.q_lens = {3, 2};
    spec.contexts = {10, 0};
    REQUIRE(make_problem(spec, &h).empty());
    CHECK(h.flops() == doctest::Approx(4.0 * 8 * 32 * ((3 * 10 + 6) + 3)));
}

TEST_CASE("problem: bad specs are refused") {
    ProblemSpec spec;
    HostProblem h;
    CHECK(make_problem(spec, &h).find("non-empty") != std::string::npos);
    spec.q_lens = {1, 2};
    spec.contexts = {0};
    CHECK(make_problem(spec, &h).find("equal length") != std::string::npos);
    spec.contexts = {0, 0};
    spec.v_transposed = true;
    CHECK(make_problem(spec, &h).find("v_transposed needs e4m3_kv") != std::string::npos);
}

TEST_CASE("problem: e4m3 K/V are exactly the bf16 values the references see") {
    ProblemSpec spec = problem_spec({9}, {20}, 8, 1, ProblemSpec{}.block_size, ProblemSpec{}.seed);
    spec.head_dim = 64;
    spec.k_outlier = 12.0f;
    spec.e4m3_kv = true;
    HostProblem h;
    REQUIRE(make_problem(spec, &h).empty());
    REQUIRE(h.k_e4m3.size() == h.k.size());
    REQUIRE(h.v_e4m3.size() == h.v.size());
    CHECK(is_power_of_two(h.k_scale));
    CHECK(is_power_of_two(h.v_scale));
    CHECK(check_exact_dequantisation(h.k, h.k_e4m3, h.k_scale) > kNearTopCode);
    check_exact_dequantisation(h.v, h.v_e4m3, h.v_scale);
}

TEST_CASE("problem: e4m3 Q codes dequantise exactly to the q the references read") {
    ProblemSpec spec = problem_spec({5, 3}, {2, 0}, 8, 1, 16, 11);
    spec.head_dim = 64;
    spec.q_token_pad = kE4m3QPadMultiple;
    spec.e4m3_kv = spec.e4m3_q = true;
    HostProblem h;
    REQUIRE(make_problem(spec, &h).empty());
    REQUIRE(h.q_e4m3.size() == h.q.size());
    CHECK(is_power_of_two(h.q_scale));
    CHECK(check_exact_dequantisation(h.q, h.q_e4m3, h.q_scale) > kNearTopCode);
    CHECK(spec.describe().find("q=e4m3") != std::string::npos);

    spec.q_token_pad = 8;  // rows of e4m3 Q must stay 16-byte aligned
    HostProblem bad;
    CHECK(make_problem(spec, &bad) == "make_problem: q_token_pad=8 must be a multiple of 16 with e4m3 Q (16-byte rows)");
}

TEST_CASE("problem: Gemma-like inputs are RMS-normalised, with outlier channels and a common V offset") {
    ProblemSpec spec = problem_spec({40}, {24}, 8, 2, 16, 11);
    spec.q_token_pad = 8;
    spec.gemma.q_rms = 0.5f;
    spec.gemma.k_rms = 1.0f;
    spec.gemma.k_outlier_channels = 2;
    spec.gemma.k_outlier_gain = 40.0f;
    spec.gemma.v_offset_rms = 6.0f;
    HostProblem h;
    REQUIRE(make_problem(spec, &h).empty());
    const int32_t d = spec.head_dim;
    constexpr double kBf16Rms = 0.01;  // RMS after bf16 rounding of every element
    for (int32_t t = 0; t < h.total_q; ++t)
        for (int32_t head = 0; head < spec.num_q_heads; ++head) {
            double squares = 0.0;
            for (int32_t i = 0; i < d; ++i) {
                const double x = bf16_to_float(h.q[t * h.q_token_stride() + int64_t{head} * d + i]);
                squares += x * x;
            }
            CHECK(std::fabs(std::sqrt(squares / d) - 0.5) < kBf16Rms * 0.5);
        }
    // K: per channel the mean square over every key is ~1 except the two outlier channels (~40^2).
    const int64_t rows = h.kv_elements() / d;
    std::vector<double> channel_squares(static_cast<size_t>(d), 0.0);
    for (int64_t r = 0; r < rows; ++r)
        for (int32_t i = 0; i < d; ++i) {
            const double x = bf16_to_float(h.k[r * d + i]);
            channel_squares[i] += x * x / static_cast<double>(rows);
        }
    const int64_t outliers = std::count_if(channel_squares.begin(), channel_squares.end(),
                                           [](double ms) { return ms > 100.0; });
    CHECK(outliers == 2);
    // V: the mean over the keys of one KV head is its offset (RMS ~6), the same for every key.
    for (int32_t head = 0; head < spec.num_kv_heads; ++head) {
        double mean_squares = 0.0;
        for (int32_t i = 0; i < d; ++i) {
            double mean = 0.0;
            int64_t count = 0;
            for (int64_t r = head; r < rows; r += spec.num_kv_heads, ++count) mean += bf16_to_float(h.v[r * d + i]);
            mean /= static_cast<double>(count);
            mean_squares += mean * mean / d;
        }
        CHECK(std::sqrt(mean_squares) == doctest::Approx(6.0).epsilon(0.05));
    }
    CHECK(spec.describe().find("gemma(q 0.5") != std::string::npos);
    HostProblem again;
    REQUIRE(make_problem(spec, &again).empty());
    CHECK(again.q == h.q);
    CHECK(again.k == h.k);
    CHECK(again.v == h.v);
}

TEST_CASE("problem: the transposed V codes are the engine layout's, page rows [kv_head][d][slot position]") {
    ProblemSpec spec = problem_spec({9}, {40}, 16, 2, 32, ProblemSpec{}.seed);
    spec.head_dim = 64;
    spec.e4m3_kv = true;
    HostProblem engine, transposed;
    REQUIRE(make_problem(spec, &engine).empty());
    spec.v_transposed = true;
    REQUIRE(make_problem(spec, &transposed).empty());
    CHECK(transposed.k_e4m3 == engine.k_e4m3);
    CHECK(transposed.v == engine.v);  // the references' dequantised values do not move
    REQUIRE(transposed.v_e4m3.size() == engine.v_e4m3.size());
    wideattn_prefill_params p = transposed.params(nullptr, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                                  nullptr, WIDEATTN_DTYPE_BF16);
    CHECK(p.flags == 0);  // the references read the engine layout
    transposed.use_transposed_v(&p);
    CHECK(p.flags == WIDEATTN_FLAG_V_TRANSPOSED);
    CHECK(p.v_slot_stride == 1);
    CHECK(p.v_head_stride == 64 * 32);
    CHECK(p.v_block_stride == 2 * 64 * 32);
    int64_t wrong = 0;
    for (int64_t block = 0; block < engine.num_blocks; ++block)
        for (int32_t slot = 0; slot < spec.block_size; ++slot)
            for (int32_t h = 0; h < spec.num_kv_heads; ++h)
                for (int32_t d = 0; d < spec.head_dim; ++d)
                    wrong += engine.v_e4m3[((block * spec.block_size + slot) * spec.num_kv_heads + h) * spec.head_dim +
                                           d] !=
                             transposed.v_e4m3[v_transposed_offset(block, slot, h, d, p.v_block_stride,
                                                                   p.v_head_stride, spec.block_size)];
    CHECK(wrong == 0);
}

TEST_CASE("problem: transpose_v_codes gives make_problem's transposed problem from the engine layout") {
    ProblemSpec spec = problem_spec({3, 9}, {40, 0}, 16, 2, 32, ProblemSpec{}.seed);
    spec.head_dim = 64;
    spec.e4m3_kv = spec.e4m3_q = true;
    HostProblem engine, made;
    REQUIRE(make_problem(spec, &engine).empty());
    spec.v_transposed = true;
    REQUIRE(make_problem(spec, &made).empty());
    HostProblem moved = engine;
    REQUIRE(transpose_v_codes(&moved).empty());
    CHECK(moved.spec.v_transposed);
    CHECK(moved.spec.describe() == made.spec.describe());
    CHECK(moved.v_e4m3 == made.v_e4m3);
    CHECK(moved.v_e4m3 != engine.v_e4m3);
    CHECK(moved.k_e4m3 == made.k_e4m3);
    CHECK(moved.q_e4m3 == made.q_e4m3);
    CHECK(moved.v == made.v);
    CHECK(transpose_v_codes(&moved) == "transpose_v_codes: the V codes are transposed already");
    spec.e4m3_kv = spec.e4m3_q = spec.v_transposed = false;
    HostProblem plain;
    REQUIRE(make_problem(spec, &plain).empty());
    CHECK(transpose_v_codes(&plain) == "transpose_v_codes: the problem has no e4m3 V codes (e4m3_kv)");
}

TEST_CASE("problem: every e4m3 code is the codec's rounding of the bf16 input over the scale, NaN slots too") {
    // The same seed without e4m3 gives the inputs before quantisation (the random stream is the same).
    ProblemSpec spec = problem_spec({5, 2}, {30, 7}, 8, 1, 16, 23);
    spec.head_dim = 64;
    spec.q_token_pad = kE4m3QPadMultiple;
    spec.k_outlier = 12.0f;
    spec.nan_unused_slots = true;
    HostProblem plain, quantised;
    REQUIRE(make_problem(spec, &plain).empty());
    spec.e4m3_kv = spec.e4m3_q = true;
    REQUIRE(make_problem(spec, &quantised).empty());
    struct Tensor {
        const char* name;
        const std::vector<uint16_t>& inputs;
        const std::vector<uint8_t>& codes;
        float scale;
    } tensors[] = {{"q", plain.q, quantised.q_e4m3, quantised.q_scale},
                   {"k", plain.k, quantised.k_e4m3, quantised.k_scale},
                   {"v", plain.v, quantised.v_e4m3, quantised.v_scale}};
    int64_t nan_codes = 0;
    for (const Tensor& t : tensors) {
        CAPTURE(t.name);
        REQUIRE(t.codes.size() == t.inputs.size());
        int64_t wrong = 0;
        for (size_t i = 0; i < t.inputs.size(); ++i) {
            bool nonfinite = false;
            wrong += t.codes[i] != fp8::e4m3_from_float(bf16_to_float(t.inputs[i]) / t.scale, &nonfinite);
            nan_codes += nonfinite;
        }
        CHECK(wrong == 0);
    }
    CHECK(nan_codes > 0);  // the unused slots' NaN went through the codec as well
}

TEST_CASE("problem: K from V's cos / sin table of a description, and its host attachment") {
    constexpr int32_t kPositions = 5;
    wideattn_k_from_v kfv = gemma4_k_from_v(nullptr);
    std::vector<uint32_t> table;
    REQUIRE(k_from_v_cos_sin_table(kfv, ProblemSpec{}.head_dim, kPositions, &table).empty());
    CHECK(table.size() == static_cast<size_t>(kPositions * kGemma4GlobalRotaryDims / 2));
    CHECK(table[0] == 0x00003f80u);  // position 0: cos 1, sin 0
    REQUIRE(attach_host_cos_sin(table, &kfv).empty());
    CHECK(kfv.cos_sin == table.data());
    CHECK(kfv.cos_sin_positions == kPositions);

    // From the description's own frequencies when it has them (host pointer): all 1 rad apart.
    std::vector<float> ones(kGemma4GlobalRotaryDims / 2, 1.0f);
    wideattn_k_from_v given = gemma4_k_from_v(nullptr);
    given.inv_freq = ones.data();
    std::vector<uint32_t> same;
    REQUIRE(k_from_v_cos_sin_table(given, ProblemSpec{}.head_dim, 2, &same).empty());
    CHECK(std::all_of(same.begin() + kGemma4GlobalRotaryDims / 2, same.end(),
                      [&](uint32_t e) { return e == same[kGemma4GlobalRotaryDims / 2]; }));

    wideattn_k_from_v odd = gemma4_k_from_v(nullptr);
    odd.rotary_dims = 2;
    CHECK(k_from_v_cos_sin_table(odd, ProblemSpec{}.head_dim, kPositions, &table) ==
          "wideattn_k_from_v_cos_sin: rotary_dims=2 must be a multiple of 4 in 4..head_dim=512 (the table's rows "
          "hold whole 8-byte pairs of frequencies)");
    CHECK(table.empty());
    table.assign(65, 0);
    CHECK(attach_host_cos_sin(table, &kfv) ==
          "a cos / sin table of 65 entries is no whole number (up to 2^31 - 1) of rows of rotary_dims / 2 = 64");
    CHECK(kfv.cos_sin_positions == kPositions);  // left as it was
}
