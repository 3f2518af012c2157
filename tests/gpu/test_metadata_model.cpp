// test_metadata_model.cpp - the host model of corrupted device metadata (metadata_model.h) on
// the CPU, where the GPU metadata cases cannot run: the clamped sequences of hand-worked
// examples, the expected outputs of every corruption against a direct row-by-row evaluation of
// docs/design.md's rules (no segments, no reference_attention_cpu), and the comparison's flags.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "accuracy/bf16.h"
#include "tests/gpu/metadata_model.h"

using namespace wideattn;
using namespace wideattn::test;

namespace {

constexpr double kModelAbs = 1e-12;   // the model and the direct evaluation differ in summation order only
constexpr int32_t kSmallHeadDim = 64;  // keeps the direct evaluation fast

// The GPU cases' first shape (3 sequences, 55 rows, 601 keys at most: a table of 38 pages).
ProblemSpec gpu_shape(bool with_data) {
    ProblemSpec s = problem_spec({40, 1, 14}, {0, 600, 200}, 16, 2, 16, 7);
    s.generate_data = with_data;
    return s;
}

// Small shapes for the direct evaluation: 3 and 4 sequences, group 2, head dim 64.
std::vector<ProblemSpec> small_shapes() {
    ProblemSpec a = problem_spec({12, 1, 5}, {0, 40, 9}, 4, 2, 16, 11);
    ProblemSpec b = problem_spec({1, 20, 3, 9}, {5, 30, 0, 50}, 4, 2, 16, 12);
    a.head_dim = b.head_dim = kSmallHeadDim;
    return {a, b};
}

std::vector<Corruption> every_corruption() {
    std::vector<Corruption> all;
    const CorruptionClass kinds[] = {CorruptionClass::kCuSeqlensQ, CorruptionClass::kBlockTable,
                                     CorruptionClass::kSeqLensK};
    for (CorruptionClass kind : kinds)
        for (const Corruption& c : corruptions(kind)) all.push_back(c);
    for (const Corruption& c : sanitizer_corruptions()) all.push_back(c);
    return all;
}

Metadata corrupted(const HostProblem& h, const Corruption& c) {
    Metadata m = metadata_of(h);
    c.apply(h, &m);
    return m;
}

// One row evaluated from the rules directly: walk cu_seqlens_q clamping each entry to
// [previous end, total_q], clamp seq_lens_k, read a bad page as zeros, softmax over the visible keys.
struct DirectRow {
    RowRole role = RowRole::kUnowned;
    std::vector<double> out;  // [head][d]
    std::vector<double> lse;  // [head]
};

double kv_element(const HostProblem& h, const std::vector<uint16_t>& cache, int32_t block, int64_t key,
                  int32_t kv_head, int32_t d) {
    if (block < 0 || block >= h.num_blocks) return 0.0;
    const int64_t slot = int64_t{block} * h.spec.block_size + key % h.spec.block_size;
    return bf16_to_float(cache[(slot * h.spec.num_kv_heads + kv_head) * h.spec.head_dim + d]);
}

void attend(const HostProblem& h, const Metadata& m, int32_t s, int32_t token, int64_t visible, DirectRow* r) {
    const int32_t D = h.spec.head_dim, group = h.spec.num_q_heads / h.spec.num_kv_heads;
    for (int32_t head = 0; head < h.spec.num_q_heads; ++head) {
        std::vector<double> scores(static_cast<size_t>(visible));
        for (int64_t j = 0; j < visible; ++j) {
            const int32_t block = m.block_table[s * h.table_stride + j / h.spec.block_size];
            double dot = 0.0;
            for (int32_t d = 0; d < D; ++d)
                dot += bf16_to_float(h.q[token * h.q_token_stride() + head * D + d]) *
                       kv_element(h, h.k, block, j, head / group, d);
            scores[j] = dot * h.spec.softmax_scale;
        }
        const double top = *std::max_element(scores.begin(), scores.end());
        double total = 0.0;
        for (double& x : scores) total += (x = std::exp(x - top));
        for (int32_t d = 0; d < D; ++d) {
            double acc = 0.0;
            for (int64_t j = 0; j < visible; ++j)
                acc += scores[j] * kv_element(h, h.v, m.block_table[s * h.table_stride + j / h.spec.block_size], j,
                                              head / group, d);
            r->out[head * D + d] = acc / total;
        }
        r->lse[head] = top + std::log(total);
    }
}

DirectRow direct_row(const HostProblem& h, const Metadata& m, int32_t token) {
    DirectRow r;
    r.out.assign(static_cast<size_t>(h.spec.num_q_heads) * h.spec.head_dim, 0.0);
    r.lse.assign(static_cast<size_t>(h.spec.num_q_heads), -std::numeric_limits<double>::infinity());
    const int64_t reach = int64_t{h.table_stride} * h.spec.block_size;
    int32_t begin = std::min(std::max(m.cu_seqlens_q[0], 0), h.total_q);
    for (int32_t s = 0; s < static_cast<int32_t>(m.seq_lens_k.size()); ++s) {
        const int32_t end = std::min(std::max(m.cu_seqlens_q[s + 1], begin), h.total_q);
        if (token >= begin && token < end) {
            const int64_t keys = std::min<int64_t>(std::max(m.seq_lens_k[s], 0), reach);
            const int64_t visible = keys - (end - begin) + (token - begin) + 1;
            r.role = visible > 0 ? RowRole::kOwned : RowRole::kNoKey;
            if (visible > 0) attend(h, m, s, token, visible, &r);
            return r;
        }
        begin = end;
    }
    return r;
}

}  // namespace

TEST_CASE("metadata model: clamped sequences of hand-worked corruptions") {
    HostProblem h;
    REQUIRE(make_problem(gpu_shape(false), &h).empty());
    REQUIRE(h.cu_seqlens_q == std::vector<int32_t>{0, 40, 41, 55});
    REQUIRE(h.table_stride == 38);
    Metadata m = metadata_of(h);
    auto check = [&](const std::vector<ClampedSequence>& want) {
        const std::vector<ClampedSequence> got = clamped_sequences(h, m);
        REQUIRE(got.size() == want.size());
        for (size_t s = 0; s < want.size(); ++s) {
            CAPTURE(s);
            CHECK(got[s].q_begin == want[s].q_begin);
            CHECK(got[s].q_end == want[s].q_end);
            CHECK(got[s].keys == want[s].keys);
        }
    };
    check({{0, 40, 40}, {40, 41, 601}, {41, 55, 214}});
    m.cu_seqlens_q = {0, 40, 10, 55};  // docs/design.md's example of a non-monotonic one
    check({{0, 40, 40}, {40, 40, 601}, {40, 55, 214}});
    m.cu_seqlens_q = {-20, 30, 41, 1000};
    check({{0, 30, 40}, {30, 41, 601}, {41, 55, 214}});
    m.cu_seqlens_q = {60, 40, 41, 55};
    check({{55, 55, 40}, {55, 55, 601}, {55, 55, 214}});
    m.cu_seqlens_q = {0, 40, 41, 50};
    m.seq_lens_k = {-5, std::numeric_limits<int32_t>::max(), 38 * 16 + 1000};
    check({{0, 40, 0}, {40, 41, 608}, {41, 50, 608}});
}

TEST_CASE("metadata model: every corruption's expected outputs equal a row-by-row evaluation of the rules") {
    for (const ProblemSpec& spec : small_shapes()) {
        CAPTURE(spec.describe());
        HostProblem h;
        REQUIRE(make_problem(spec, &h).empty());
        for (const Corruption& c : every_corruption()) {
            CAPTURE(c.name);
            const Metadata m = corrupted(h, c);
            Expected e;
            const std::string err = expected_outputs(h, m, &e);
            REQUIRE_MESSAGE(err.empty(), err);
            REQUIRE(e.roles.size() == static_cast<size_t>(h.total_q));
            int64_t owned = 0, no_key = 0;
            const int64_t row = int64_t{h.spec.num_q_heads} * h.spec.head_dim;
            for (int32_t t = 0; t < h.total_q; ++t) {
                CAPTURE(t);
                const DirectRow d = direct_row(h, m, t);
                REQUIRE(e.roles[t] == d.role);
                owned += d.role == RowRole::kOwned;
                no_key += d.role == RowRole::kNoKey;
                if (d.role != RowRole::kOwned) continue;
                double worst = 0.0, lse_worst = 0.0;
                for (int64_t i = 0; i < row; ++i) worst = std::fmax(worst, std::fabs(e.out[t * row + i] - d.out[i]));
                for (int32_t head = 0; head < h.spec.num_q_heads; ++head)
                    lse_worst = std::fmax(lse_worst, std::fabs(e.lse[head * h.total_q + t] - d.lse[head]));
                CHECK(worst <= kModelAbs);
                CHECK(lse_worst <= kModelAbs);
            }
            CHECK(e.owned_rows == owned);
            CHECK(e.no_key_rows == no_key);
        }
    }
}

TEST_CASE("metadata model: every corruption changes the metadata and leaves rows to check") {
    HostProblem h;
    REQUIRE(make_problem(small_shapes().front(), &h).empty());
    for (const Corruption& c : every_corruption()) {
        CAPTURE(c.name);
        const Metadata m = corrupted(h, c);
        CHECK_MESSAGE((m.cu_seqlens_q != h.cu_seqlens_q || m.seq_lens_k != h.seq_lens_k ||
                       m.block_table != h.block_table), "the corruption changes nothing");
        Expected e;
        REQUIRE(expected_outputs(h, m, &e).empty());
        const bool owns_none = std::string(c.name).find("no row owned") != std::string::npos;
        CHECK((e.owned_rows == 0) == owns_none);
    }
}

TEST_CASE("metadata model: the comparison flags wrong owned rows, written no-key rows and their LSE") {
    HostProblem h;
    REQUIRE(make_problem(small_shapes().front(), &h).empty());
    const Corruption below = corruptions(CorruptionClass::kSeqLensK).front();  // q_len / 2 keys
    const Metadata m = corrupted(h, below);
    Expected e;
    REQUIRE(expected_outputs(h, m, &e).empty());
    REQUIRE(e.owned_rows > 0);
    REQUIRE(e.no_key_rows > 0);
    const int64_t row = int64_t{h.spec.num_q_heads} * h.spec.head_dim;
    const auto first_of = [&](RowRole role) {
        return static_cast<int32_t>(std::find(e.roles.begin(), e.roles.end(), role) - e.roles.begin());
    };
    const int32_t owned = first_of(RowRole::kOwned), no_key = first_of(RowRole::kNoKey);
    std::vector<double> out = e.out, lse = e.lse;
    for (int32_t t = 0; t < h.total_q; ++t)
        if (e.roles[t] == RowRole::kNoKey) {
            std::fill_n(out.begin() + t * row, row, 0.0);
            for (int32_t head = 0; head < h.spec.num_q_heads; ++head)
                lse[head * h.total_q + t] = -std::numeric_limits<double>::infinity();
        }
    Comparison exact = compare_outputs(h, e, out, lse);
    CHECK(exact.stats.count == e.owned_rows * row);
    CHECK(exact.stats.rel_l2 == 0.0);
    CHECK(exact.no_key_nonzero == 0);
    CHECK(exact.no_key_lse_wrong == 0);
    CHECK(exact.lse_nonfinite == 0);
    CHECK(exact.lse_max_abs == 0.0);

    std::vector<double> bad_out = out, bad_lse = lse;
    bad_out[owned * row + 3] = NAN;
    bad_out[no_key * row + 5] = 1.0;
    bad_out[no_key * row + 6] = NAN;
    bad_lse[no_key] = 0.0;
    bad_lse[owned] = NAN;
    const Comparison flagged = compare_outputs(h, e, bad_out, bad_lse);
    CHECK(flagged.stats.nonfinite == 1);
    CHECK(flagged.no_key_nonzero == 2);
    CHECK(flagged.no_key_lse_wrong == 1);
    CHECK(flagged.lse_nonfinite == 1);

    std::vector<double> off = out;
    off[owned * row] += 1.0;
    CHECK(compare_outputs(h, e, off, lse).stats.max_abs == doctest::Approx(1.0));

    // Rows no sequence owns are not looked at.
    Metadata short_last = metadata_of(h);
    short_last.cu_seqlens_q.back() = h.total_q - 1;
    Expected tail;
    REQUIRE(expected_outputs(h, short_last, &tail).empty());
    REQUIRE(tail.roles.back() == RowRole::kUnowned);
    std::vector<double> garbage_out = tail.out, garbage_lse = tail.lse;
    std::fill_n(garbage_out.end() - row, row, NAN);
    for (int32_t head = 0; head < h.spec.num_q_heads; ++head) garbage_lse[head * h.total_q + h.total_q - 1] = NAN;
    const Comparison ignored = compare_outputs(h, tail, garbage_out, garbage_lse);
    CHECK(ignored.stats.nonfinite == 0);
    CHECK(ignored.stats.count == (h.total_q - 1) * row);
    CHECK(ignored.lse_nonfinite == 0);
}
