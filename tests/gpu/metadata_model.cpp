// metadata_model.cpp - see metadata_model.h.
#include "tests/gpu/metadata_model.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "accuracy/reference_cpu.h"

namespace wideattn::test {
namespace {

constexpr int32_t kInt32Min = std::numeric_limits<int32_t>::min();
constexpr int32_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int32_t kNegativeStart = -20;          // a first cu_seqlens_q entry below 0
constexpr int32_t kPastTotalQ = 5;               // a first entry this far past total_q
constexpr int32_t kLongLastEntry = 16;           // a last entry this far past total_q
constexpr int32_t kShortLastEntry = 5;           // a last entry this far below total_q
constexpr int32_t kNonMonotoneDivisor = 4;       // cu_seqlens_q[2] = cu_seqlens_q[1] / 4
constexpr int32_t kBeyondTableKeys = 1000;       // seq_lens_k this far past the table's reach
constexpr int32_t kFarPastTotalQ = 1000;         // a last entry this far past total_q (sanitizer set)
constexpr int32_t kHugeBlock = int32_t{1} << 30;

int64_t table_keys(const HostProblem& h) { return int64_t{h.table_stride} * h.spec.block_size; }

int32_t q_len(const Metadata& m, size_t s) { return m.cu_seqlens_q[s + 1] - m.cu_seqlens_q[s]; }

// Entries 0, used/2 and used-1 of every sequence's used table prefix (valid seq_lens_k) set to `value`.
void set_used_entries(const HostProblem& h, Metadata* m, int32_t value) {
    for (size_t s = 0; s < m->seq_lens_k.size(); ++s) {
        const int32_t used = (m->seq_lens_k[s] + h.spec.block_size - 1) / h.spec.block_size;
        if (used == 0) continue;
        for (const int32_t b : {0, used / 2, used - 1}) m->block_table[s * h.table_stride + b] = value;
    }
}

// Every bad value at once in every sequence's used prefix: entries at 0, 1/4, 1/2, 3/4 and the last.
void set_every_bad_entry(const HostProblem& h, Metadata* m) {
    const int32_t values[] = {-1, kInt32Min, h.num_blocks, kHugeBlock, kInt32Max};
    constexpr int32_t kQuarters = 4;
    for (size_t s = 0; s < m->seq_lens_k.size(); ++s) {
        const int32_t used = (m->seq_lens_k[s] + h.spec.block_size - 1) / h.spec.block_size;
        if (used == 0) continue;
        const int32_t positions[] = {0, used / kQuarters, used / 2, used * 3 / kQuarters, used - 1};
        for (size_t i = 0; i < std::size(values); ++i) m->block_table[s * h.table_stride + positions[i]] = values[i];
    }
}

std::vector<Corruption> cu_seqlens_q_corruptions() {
    return {
        {"cu_seqlens_q non-monotonic: [2] = [1] / 4",
         [](const HostProblem&, Metadata* m) { m->cu_seqlens_q[2] = m->cu_seqlens_q[1] / kNonMonotoneDivisor; }},
        {"cu_seqlens_q[0] = -20", [](const HostProblem&, Metadata* m) { m->cu_seqlens_q[0] = kNegativeStart; }},
        {"cu_seqlens_q[0] = INT32_MIN", [](const HostProblem&, Metadata* m) { m->cu_seqlens_q[0] = kInt32Min; }},
        {"cu_seqlens_q[0] = total_q + 5 (no row owned)",
         [](const HostProblem& h, Metadata* m) { m->cu_seqlens_q[0] = h.total_q + kPastTotalQ; }},
        {"cu_seqlens_q[1] = INT32_MAX", [](const HostProblem&, Metadata* m) { m->cu_seqlens_q[1] = kInt32Max; }},
        {"cu_seqlens_q[num_seqs] = total_q - 5",
         [](const HostProblem& h, Metadata* m) { m->cu_seqlens_q.back() = h.total_q - kShortLastEntry; }},
        {"cu_seqlens_q[num_seqs] = total_q + 16",
         [](const HostProblem& h, Metadata* m) { m->cu_seqlens_q.back() = h.total_q + kLongLastEntry; }},
        {"cu_seqlens_q[num_seqs] = INT32_MAX",
         [](const HostProblem&, Metadata* m) { m->cu_seqlens_q.back() = kInt32Max; }},
    };
}

std::vector<Corruption> block_table_corruptions() {
    return {
        {"block_table entries -1", [](const HostProblem& h, Metadata* m) { set_used_entries(h, m, -1); }},
        {"block_table entries INT32_MIN", [](const HostProblem& h, Metadata* m) { set_used_entries(h, m, kInt32Min); }},
        {"block_table entries num_blocks",
         [](const HostProblem& h, Metadata* m) { set_used_entries(h, m, h.num_blocks); }},
        {"block_table entries 2^30", [](const HostProblem& h, Metadata* m) { set_used_entries(h, m, kHugeBlock); }},
        {"block_table entries INT32_MAX", [](const HostProblem& h, Metadata* m) { set_used_entries(h, m, kInt32Max); }},
    };
}

std::vector<Corruption> seq_lens_k_corruptions() {
    return {
        {"seq_lens_k = q_len / 2 (below q_len)",
         [](const HostProblem&, Metadata* m) {
             for (size_t s = 0; s < m->seq_lens_k.size(); ++s) m->seq_lens_k[s] = q_len(*m, s) / 2;
         }},
        {"seq_lens_k negative: -1 and INT32_MIN",
         [](const HostProblem&, Metadata* m) {
             m->seq_lens_k.front() = -1;
             m->seq_lens_k.back() = kInt32Min;
         }},
        {"seq_lens_k = stride * block_size + 1000",
         [](const HostProblem& h, Metadata* m) {
             m->seq_lens_k.front() = static_cast<int32_t>(table_keys(h) + kBeyondTableKeys);
         }},
        {"seq_lens_k = INT32_MAX and stride * block_size + 1",
         [](const HostProblem& h, Metadata* m) {
             m->seq_lens_k[1] = kInt32Max;
             m->seq_lens_k.back() = static_cast<int32_t>(table_keys(h) + 1);
         }},
    };
}

}  // namespace

Metadata metadata_of(const HostProblem& h) { return Metadata{h.cu_seqlens_q, h.seq_lens_k, h.block_table}; }

std::vector<Corruption> corruptions(CorruptionClass kind) {
    switch (kind) {
        case CorruptionClass::kCuSeqlensQ: return cu_seqlens_q_corruptions();
        case CorruptionClass::kBlockTable: return block_table_corruptions();
        case CorruptionClass::kSeqLensK: return seq_lens_k_corruptions();
    }
    return {};
}

std::vector<Corruption> sanitizer_corruptions() {
    return {
        {"sanitizer cu_seqlens_q: [0] = -20, [2] = [1] / 4, [num_seqs] = total_q + 1000",
         [](const HostProblem& h, Metadata* m) {
             m->cu_seqlens_q[0] = kNegativeStart;
             m->cu_seqlens_q[2] = m->cu_seqlens_q[1] / kNonMonotoneDivisor;
             m->cu_seqlens_q.back() = h.total_q + kFarPastTotalQ;
         }},
        {"sanitizer block_table: -1, INT32_MIN, num_blocks, 2^30, INT32_MAX", set_every_bad_entry},
        {"sanitizer seq_lens_k: q_len / 2, INT32_MAX, INT32_MIN",
         [](const HostProblem&, Metadata* m) {
             m->seq_lens_k[0] = q_len(*m, 0) / 2;
             m->seq_lens_k[1] = kInt32Max;
             m->seq_lens_k.back() = kInt32Min;
         }},
    };
}

std::vector<ClampedSequence> clamped_sequences(const HostProblem& h, const Metadata& m) {
    std::vector<ClampedSequence> seqs;
    int32_t begin = std::clamp(m.cu_seqlens_q[0], 0, h.total_q);
    for (size_t s = 0; s + 1 < m.cu_seqlens_q.size(); ++s) {
        const int32_t end = std::clamp(m.cu_seqlens_q[s + 1], begin, h.total_q);
        seqs.push_back({begin, end, std::clamp<int64_t>(m.seq_lens_k[s], 0, table_keys(h))});
        begin = end;
    }
    return seqs;
}

namespace {

// The sanitised problem in the reference's terms: contiguous segments over [0, total_q), each a
// reference sequence with its keys and table row (indices into the cache with the zero page).
struct Sanitised {
    int32_t zero_page = 0, stride = 0;
    std::vector<int32_t> cu_seqlens_q{0}, seq_lens_k, block_table;
    std::vector<RowRole> roles;

    // Rows [begin, end) as one segment; `row` is its table row, or null for zero pages only
    // (then it sees end - begin keys, every one zero).
    void add(int32_t begin, int32_t end, int64_t keys, const int32_t* row, RowRole role) {
        if (end <= begin) return;
        cu_seqlens_q.push_back(end);
        seq_lens_k.push_back(row ? static_cast<int32_t>(keys) : end - begin);
        for (int32_t b = 0; b < stride; ++b) block_table.push_back(row ? row[b] : zero_page);
        std::fill(roles.begin() + begin, roles.begin() + end, role);
    }
};

// Sequence s's table row with every entry outside [0, num_blocks) replaced by the zero page.
std::vector<int32_t> sanitised_row(const HostProblem& h, const Metadata& m, size_t s, int32_t stride) {
    std::vector<int32_t> row(static_cast<size_t>(stride), h.num_blocks);
    for (int32_t b = 0; b < h.table_stride; ++b) {
        const int32_t block = m.block_table[s * h.table_stride + b];
        row[b] = block >= 0 && block < h.num_blocks ? block : h.num_blocks;
    }
    return row;
}

Sanitised sanitise(const HostProblem& h, const Metadata& m) {
    Sanitised z;
    z.zero_page = h.num_blocks;
    const int32_t rows_in_pages = (h.total_q + h.spec.block_size - 1) / h.spec.block_size;
    z.stride = std::max({h.table_stride, rows_in_pages, 1});
    z.roles.assign(static_cast<size_t>(h.total_q), RowRole::kUnowned);
    const std::vector<ClampedSequence> seqs = clamped_sequences(h, m);
    z.add(0, seqs.front().q_begin, 0, nullptr, RowRole::kUnowned);
    for (size_t s = 0; s < seqs.size(); ++s) {
        const ClampedSequence& q = seqs[s];
        const std::vector<int32_t> row = sanitised_row(h, m, s, z.stride);
        // Rows i < q_len - keys see no key; the others see keys - q_len + i + 1, as the first
        // rows of a sequence with `keys` rows and no context do.
        const int32_t first_seeing = static_cast<int32_t>(std::max<int64_t>(q.q_begin, q.q_end - q.keys));
        z.add(q.q_begin, first_seeing, 0, nullptr, RowRole::kNoKey);
        z.add(first_seeing, q.q_end, q.keys, row.data(), RowRole::kOwned);
    }
    z.add(seqs.back().q_end, h.total_q, 0, nullptr, RowRole::kUnowned);
    return z;
}

}  // namespace

std::string expected_outputs(const HostProblem& h, const Metadata& m, Expected* e) {
    if (m.cu_seqlens_q.size() != h.cu_seqlens_q.size() || m.seq_lens_k.size() != h.seq_lens_k.size() ||
        m.block_table.size() != h.block_table.size())
        return "expected_outputs: metadata sizes differ from the problem's";
    if (h.q.empty()) return "expected_outputs: the problem has no data (spec.generate_data is false)";
    if (h.total_q == 0) return "expected_outputs: total_q=0, no row to check";
    const Sanitised z = sanitise(h, m);
    // The cache with one all-zero page appended: the page every bad table entry reads.
    const int64_t page = int64_t{h.spec.block_size} * h.spec.num_kv_heads * h.spec.head_dim;
    std::vector<uint16_t> k(h.k), v(h.v);
    k.resize(k.size() + static_cast<size_t>(page), 0);
    v.resize(v.size() + static_cast<size_t>(page), 0);
    std::vector<double> strided(static_cast<size_t>(h.out_elements()), 0.0);
    e->lse.assign(static_cast<size_t>(h.lse_elements()), 0.0);
    wideattn_prefill_params p =
        h.params(h.q.data(), k.data(), v.data(), strided.data(), e->lse.data(), z.cu_seqlens_q.data(),
                 z.seq_lens_k.data(), z.block_table.data(), WIDEATTN_DTYPE_F64);
    p.lse = e->lse.data();
    p.num_seqs = static_cast<int32_t>(z.seq_lens_k.size());
    p.block_table_stride = z.stride;
    p.num_blocks = h.num_blocks + 1;
    const std::string err = accuracy::reference_attention_cpu(p, strided.data(), e->lse.data());
    if (!err.empty()) return "expected_outputs: " + err;
    e->out = dense_rows(h, strided);
    e->roles = z.roles;
    e->owned_rows = std::count(z.roles.begin(), z.roles.end(), RowRole::kOwned);
    e->no_key_rows = std::count(z.roles.begin(), z.roles.end(), RowRole::kNoKey);
    return {};
}

Comparison compare_outputs(const HostProblem& h, const Expected& e, const std::vector<double>& out,
                           const std::vector<double>& lse) {
    Comparison c;
    const int64_t row = int64_t{h.spec.num_q_heads} * h.spec.head_dim;
    std::vector<double> owned_ref, owned_out;
    owned_ref.reserve(static_cast<size_t>(e.owned_rows * row));
    owned_out.reserve(static_cast<size_t>(e.owned_rows * row));
    for (int32_t t = 0; t < h.total_q; ++t) {
        const auto first = static_cast<size_t>(t * row);
        if (e.roles[t] == RowRole::kOwned) {
            owned_ref.insert(owned_ref.end(), e.out.begin() + first, e.out.begin() + first + row);
            owned_out.insert(owned_out.end(), out.begin() + first, out.begin() + first + row);
        } else if (e.roles[t] == RowRole::kNoKey) {
            c.no_key_nonzero += std::count_if(out.begin() + first, out.begin() + first + row,
                                              [](double x) { return !(x == 0.0); });
        }
        if (lse.empty()) continue;
        for (int32_t head = 0; head < h.spec.num_q_heads; ++head) {
            const size_t i = static_cast<size_t>(head) * h.total_q + t;
            if (e.roles[t] == RowRole::kNoKey && !(std::isinf(lse[i]) && lse[i] < 0)) ++c.no_key_lse_wrong;
            if (e.roles[t] != RowRole::kOwned) continue;
            if (!std::isfinite(lse[i]))
                ++c.lse_nonfinite;
            else
                c.lse_max_abs = std::fmax(c.lse_max_abs, std::fabs(lse[i] - e.lse[i]));
        }
    }
    c.stats = accuracy::compute_error_stats(owned_ref.data(), owned_out.data(), accuracy::OutputType::kF64,
                                            static_cast<int64_t>(owned_ref.size()));
    return c;
}

}  // namespace wideattn::test
