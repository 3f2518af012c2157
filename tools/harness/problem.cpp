// problem.cpp - see problem.h.
#include "tools/harness/problem.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <numeric>
#include <random>
#include <sstream>

#include "accuracy/bf16.h"
#include "accuracy/reference_cpu.h"
#include "fp8/codec/e4m3.h"
#include "kernels/common/k_from_v.h"
#include "kernels/common/v_transposed.h"

namespace wideattn {
namespace {

// splitmix64: fast, seedable, good enough for test data.
struct Rng {
    uint64_t state;
    uint64_t next() {
        uint64_t z = (state += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        return z ^ (z >> 31);
    }
    double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }
    // Approximately standard normal (Irwin-Hall sum of four uniforms, variance-corrected).
    float normal() {
        constexpr double kTerms = 4.0;
        const double sum = uniform() + uniform() + uniform() + uniform();
        return static_cast<float>((sum - kTerms / 2) * std::sqrt(12.0 / kTerms));
    }
};

// `row` (head_dim values ~ N(0, 1)) scaled to RMS `rms`.
void normalise_row(float rms, std::vector<float>* row) {
    double squares = 0.0;
    for (float x : *row) squares += double{x} * x;
    const double factor = squares > 0.0 ? rms / std::sqrt(squares / static_cast<double>(row->size())) : 0.0;
    for (float& x : *row) x = static_cast<float>(x * factor);
}

// The GemmaInputs of spec into p's q, k, v (q's row padding stays N(0, input_scale^2)).
void fill_gemma_inputs(const ProblemSpec& spec, Rng& rng, HostProblem* p) {
    const GemmaInputs& g = spec.gemma;
    const int32_t d = spec.head_dim;
    std::vector<float> row(static_cast<size_t>(d));
    for (auto& x : p->q) x = float_to_bf16(rng.normal() * spec.input_scale);
    for (int64_t t = 0; t < p->total_q; ++t)
        for (int32_t h = 0; h < spec.num_q_heads; ++h) {
            for (float& x : row) x = rng.normal();
            normalise_row(g.q_rms, &row);
            const int64_t first = t * p->q_token_stride() + int64_t{h} * d;
            for (int32_t i = 0; i < d; ++i) p->q[first + i] = float_to_bf16(row[i]);
        }
    std::vector<float> gain(static_cast<size_t>(d), 1.0f);
    for (int32_t c = 0; c < g.k_outlier_channels && c < d; ++c) {
        int32_t channel = static_cast<int32_t>(rng.next() % d);
        while (gain[channel] != 1.0f) channel = (channel + 1) % d;
        gain[channel] = g.k_outlier_gain;
    }
    std::vector<std::vector<float>> offsets(static_cast<size_t>(spec.num_kv_heads), std::vector<float>(d, 0.0f));
    for (auto& offset : offsets) {
        for (float& x : offset) x = rng.normal();
        normalise_row(g.v_offset_rms, &offset);
    }
    const int64_t rows = p->kv_elements() / d;
    for (int64_t r = 0; r < rows; ++r) {
        const int32_t head = static_cast<int32_t>(r % spec.num_kv_heads);
        for (float& x : row) x = rng.normal();
        normalise_row(g.k_rms, &row);
        for (int32_t i = 0; i < d; ++i) p->k[r * d + i] = float_to_bf16(row[i] * gain[i]);
        for (float& x : row) x = rng.normal();
        normalise_row(1.0f, &row);
        for (int32_t i = 0; i < d; ++i) p->v[r * d + i] = float_to_bf16(row[i] + offsets[head][i]);
    }
}

template <typename Container>
std::string join(const Container& values) {
    std::ostringstream s;
    s << "[";
    const size_t shown = std::min<size_t>(values.size(), 8);
    for (size_t i = 0; i < shown; ++i) s << (i ? "," : "") << values[i];
    if (values.size() > shown) s << ",...";
    s << "]";
    return s.str();
}

// Per-tensor e4m3 quantisation with a power-of-two scale (2^ceil(log2(amax / 448))), then the
// bf16 values replaced by code * scale, which bf16 holds exactly (e4m3 codes have 4
// significant bits, the scale is a power of two): the fp64 reference then sees exactly the
// values the 8-bit kernel dequantises. Code and dequantised value depend on the bf16 bits alone
// (the scale being fixed), so both are looked up in a table of every bf16 pattern, made once.
void quantize_e4m3_exactly(std::vector<uint16_t>& values, std::vector<uint8_t>* codes, float* scale) {
    // amax over the numbers: a bf16's bits without the sign order its magnitude, infinity (0x7F80)
    // above every finite value and the NaN patterns above infinity (left out, as fmax leaves NaN).
    constexpr uint16_t kMagnitudeMask = 0x7FFF, kInfinityBits = 0x7F80;
    uint16_t amax_bits = 0;
    for (uint16_t x : values) {
        const uint16_t magnitude = x & kMagnitudeMask;
        if (magnitude <= kInfinityBits && magnitude > amax_bits) amax_bits = magnitude;
    }
    const float amax = bf16_to_float(amax_bits);
    *scale = amax > 0.0f ? std::exp2(std::ceil(std::log2(amax / fp8::kE4m3Max))) : 1.0f;
    constexpr size_t kBf16Patterns = size_t{1} << 16;
    std::vector<uint8_t> code_of(kBf16Patterns);
    std::vector<uint16_t> value_of(kBf16Patterns);
    for (size_t bits = 0; bits < kBf16Patterns; ++bits) {
        bool nonfinite = false;
        code_of[bits] = fp8::e4m3_from_float(bf16_to_float(static_cast<uint16_t>(bits)) / *scale, &nonfinite);
        value_of[bits] = float_to_bf16(fp8::e4m3_to_float(code_of[bits]) * *scale);
    }
    codes->resize(values.size());
    for (size_t i = 0; i < values.size(); ++i) {
        (*codes)[i] = code_of[values[i]];
        values[i] = value_of[values[i]];
    }
}

// NaN in every K and V element of the slots no sequence's keys occupy: past seq_lens_k[s] in
// sequence s's last page, and the blocks no table entry of a sequence's keys names.
void poison_unused_slots(const std::vector<int32_t>& seq_lens_k, const std::vector<int32_t>& block_table,
                         int32_t table_stride, HostProblem* p) {
    const int32_t bs = p->spec.block_size;
    std::vector<int32_t> used_slots(static_cast<size_t>(p->num_blocks), 0);
    for (size_t s = 0; s < seq_lens_k.size(); ++s)
        for (int32_t key0 = 0, b = 0; key0 < seq_lens_k[s]; key0 += bs, ++b)
            used_slots[block_table[s * table_stride + b]] = std::min(bs, seq_lens_k[s] - key0);
    const int64_t slot_elems = int64_t{p->spec.num_kv_heads} * p->spec.head_dim;
    const uint16_t nan = float_to_bf16(NAN);
    for (int32_t block = 0; block < p->num_blocks; ++block)
        for (int32_t slot = used_slots[block]; slot < bs; ++slot) {
            const int64_t first = (int64_t{block} * bs + slot) * slot_elems;
            std::fill_n(p->k.begin() + first, slot_elems, nan);
            std::fill_n(p->v.begin() + first, slot_elems, nan);
        }
}

}  // namespace

std::vector<uint16_t> random_bf16(size_t count, float scale, uint64_t seed) {
    Rng rng{seed};
    std::vector<uint16_t> values(count);
    for (auto& x : values) x = float_to_bf16(rng.normal() * scale);
    return values;
}

ProblemSpec problem_spec(std::vector<int32_t> q_lens, std::vector<int32_t> contexts, int32_t num_q_heads,
                         int32_t num_kv_heads, int32_t block_size, uint64_t seed) {
    ProblemSpec s;
    s.q_lens = std::move(q_lens);
    s.contexts = std::move(contexts);
    s.num_q_heads = num_q_heads;
    s.num_kv_heads = num_kv_heads;
    s.block_size = block_size;
    s.seed = seed;
    return s;
}

std::string GemmaInputs::describe() const {
    std::ostringstream s;
    s << "gemma(q " << q_rms << ", k " << k_rms;
    if (k_outlier_channels) s << ", " << k_outlier_channels << " ch x" << k_outlier_gain;
    if (v_offset_rms != 0.0f) s << ", v+" << v_offset_rms;
    s << ")";
    return s.str();
}

std::string ProblemSpec::describe() const {
    std::ostringstream s;
    s << "seqs=" << q_lens.size() << " q=" << join(q_lens) << " ctx=" << join(contexts) << " H=" << num_q_heads
      << "/" << num_kv_heads << " D=" << head_dim << " bs=" << block_size << (shuffle_blocks ? " shuffled" : "")
      << (k_outlier != 0.0f ? " k_outlier" : "") << (q_token_pad ? " padded" : "") << (e4m3_kv ? " kv=e4m3" : "")
      << (v_transposed ? " v=transposed" : "") << (e4m3_q ? " q=e4m3" : "") << (nan_unused_slots ? " nan_unused" : "")
      << (gemma.enabled() ? " " + gemma.describe() : std::string());
    return s.str();
}

int64_t HostProblem::kv_elements() const {
    return int64_t{num_blocks} * spec.block_size * spec.num_kv_heads * spec.head_dim;
}

void HostProblem::use_transposed_v(wideattn_prefill_params* p) const {
    p->flags |= WIDEATTN_FLAG_V_TRANSPOSED;
    p->v_slot_stride = 1;
    p->v_head_stride = int64_t{spec.head_dim} * spec.block_size;
    p->v_block_stride = p->v_head_stride * spec.num_kv_heads;
}

std::string transpose_v_codes(HostProblem* p) {
    if (!p->spec.e4m3_kv) return "transpose_v_codes: the problem has no e4m3 V codes (e4m3_kv)";
    if (p->spec.v_transposed) return "transpose_v_codes: the V codes are transposed already";
    const int32_t bs = p->spec.block_size, heads = p->spec.num_kv_heads, d = p->spec.head_dim;
    const int64_t head_stride = int64_t{d} * bs, block_stride = head_stride * heads;
    std::vector<uint8_t> transposed(p->v_e4m3.size());
    for (int64_t block = 0; block < p->num_blocks; ++block)
        for (int32_t slot = 0; slot < bs; ++slot)
            for (int32_t h = 0; h < heads; ++h)
                for (int32_t i = 0; i < d; ++i)
                    transposed[v_transposed_offset(block, slot, h, i, block_stride, head_stride, bs)] =
                        p->v_e4m3[((block * bs + slot) * heads + h) * d + i];
    p->v_e4m3 = std::move(transposed);
    p->spec.v_transposed = true;
    return {};
}

std::string make_problem(const ProblemSpec& spec, HostProblem* out) {
    if (spec.q_lens.empty() || spec.q_lens.size() != spec.contexts.size())
        return "make_problem: q_lens and contexts must be non-empty and of equal length";
    if (spec.v_transposed && !spec.e4m3_kv) return "make_problem: v_transposed needs e4m3_kv (an e4m3 V layout)";
    if (spec.e4m3_q && spec.q_token_pad % kE4m3QPadMultiple != 0)
        return "make_problem: q_token_pad=" + std::to_string(spec.q_token_pad) + " must be a multiple of " +
               std::to_string(kE4m3QPadMultiple) + " with e4m3 Q (16-byte rows)";
    HostProblem p;
    p.spec = spec;
    Rng rng{spec.seed};
    const int32_t num_seqs = static_cast<int32_t>(spec.q_lens.size());
    p.cu_seqlens_q.push_back(0);
    int32_t max_blocks = 1;
    for (int32_t s = 0; s < num_seqs; ++s) {
        p.cu_seqlens_q.push_back(p.cu_seqlens_q.back() + spec.q_lens[s]);
        p.seq_lens_k.push_back(spec.contexts[s] + spec.q_lens[s]);
        max_blocks = std::max(max_blocks, (p.seq_lens_k.back() + spec.block_size - 1) / spec.block_size);
    }
    p.total_q = p.cu_seqlens_q.back();
    p.table_stride = max_blocks;
    int32_t used_blocks = 0;
    for (int32_t s = 0; s < num_seqs; ++s) used_blocks += (p.seq_lens_k[s] + spec.block_size - 1) / spec.block_size;
    p.num_blocks = used_blocks + spec.spare_blocks;
    std::vector<int32_t> physical(p.num_blocks);
    std::iota(physical.begin(), physical.end(), 0);
    if (spec.shuffle_blocks)
        for (int32_t i = p.num_blocks - 1; i > 0; --i) std::swap(physical[i], physical[rng.next() % (i + 1)]);
    // Unused table entries point at a spare block, never at garbage.
    p.block_table.assign(static_cast<size_t>(num_seqs) * p.table_stride, physical.back());
    int32_t next = 0;
    for (int32_t s = 0; s < num_seqs; ++s) {
        const int32_t blocks = (p.seq_lens_k[s] + spec.block_size - 1) / spec.block_size;
        for (int32_t b = 0; b < blocks; ++b) p.block_table[s * p.table_stride + b] = physical[next++];
    }

    if (!spec.generate_data) {
        *out = std::move(p);
        return {};
    }
    const int64_t q_elems = int64_t{p.total_q} * p.q_token_stride();
    const int64_t kv_elems = p.kv_elements();
    p.q.resize(static_cast<size_t>(q_elems));
    p.k.resize(static_cast<size_t>(kv_elems));
    p.v.resize(static_cast<size_t>(kv_elems));
    if (spec.gemma.enabled()) {
        fill_gemma_inputs(spec, rng, &p);
    } else {
        for (auto& x : p.q) x = float_to_bf16(rng.normal() * spec.input_scale);
        const int32_t outlier_channel = static_cast<int32_t>(rng.next() % spec.head_dim);
        for (int64_t i = 0; i < kv_elems; ++i) {
            float k = rng.normal() * spec.input_scale;
            if (spec.k_outlier != 0.0f && i % spec.head_dim == outlier_channel) k += spec.k_outlier;
            p.k[i] = float_to_bf16(k);
            p.v[i] = float_to_bf16(rng.normal());
        }
    }
    if (spec.nan_unused_slots) poison_unused_slots(p.seq_lens_k, p.block_table, p.table_stride, &p);
    if (spec.e4m3_kv) {
        quantize_e4m3_exactly(p.k, &p.k_e4m3, &p.k_scale);
        quantize_e4m3_exactly(p.v, &p.v_e4m3, &p.v_scale);
    }
    if (spec.e4m3_q) quantize_e4m3_exactly(p.q, &p.q_e4m3, &p.q_scale);
    if (spec.v_transposed) {
        p.spec.v_transposed = false;  // generated in the engine layout, then rearranged
        if (std::string err = transpose_v_codes(&p); !err.empty()) return err;
    }
    *out = std::move(p);
    return {};
}

wideattn_prefill_params HostProblem::params(const void* q_ptr, const void* k_ptr, const void* v_ptr, void* o_ptr,
                                            void* lse_ptr, const int32_t* cu_ptr, const int32_t* seq_k_ptr,
                                            const int32_t* table_ptr, int32_t o_dtype) const {
    wideattn_prefill_params prm{};
    const int64_t D = spec.head_dim;
    prm.q = q_ptr;
    prm.q_token_stride = q_token_stride();
    prm.q_head_stride = D;
    prm.k_cache = k_ptr;
    prm.v_cache = v_ptr;
    prm.k_slot_stride = prm.v_slot_stride = spec.num_kv_heads * D;
    prm.k_head_stride = prm.v_head_stride = D;
    prm.k_block_stride = prm.v_block_stride = int64_t{spec.block_size} * spec.num_kv_heads * D;
    prm.o = o_ptr;
    prm.o_token_stride = q_token_stride();
    prm.o_head_stride = D;
    prm.lse = spec.want_lse ? lse_ptr : nullptr;
    prm.lse_head_stride = total_q;
    prm.cu_seqlens_q = cu_ptr;
    prm.seq_lens_k = seq_k_ptr;
    prm.block_table = table_ptr;
    prm.block_table_stride = table_stride;
    prm.num_seqs = static_cast<int32_t>(spec.q_lens.size());
    prm.total_q = total_q;
    prm.num_q_heads = spec.num_q_heads;
    prm.num_kv_heads = spec.num_kv_heads;
    prm.head_dim = spec.head_dim;
    prm.block_size = spec.block_size;
    prm.num_blocks = num_blocks;
    prm.q_dtype = WIDEATTN_DTYPE_BF16;
    prm.kv_dtype = WIDEATTN_DTYPE_BF16;
    prm.o_dtype = o_dtype;
    prm.softmax_scale = spec.softmax_scale;
    return prm;
}

wideattn_k_from_v gemma4_k_from_v(const float* k_norm_scale) {
    return wideattn_k_from_v{sizeof(wideattn_k_from_v), WIDEATTN_ROPE_PROPORTIONAL, k_norm_scale,
                             kGemma4GlobalRopeTheta,     kGemma4GlobalRotaryDims,   WIDEATTN_ROPE_ROTATE_HALF,
                             0,                          nullptr,                   nullptr,
                             0,                          0};
}

std::vector<float> formula_inv_freq(const wideattn_k_from_v& kfv, int32_t head_dim) {
    std::vector<float> table(static_cast<size_t>(std::max(kfv.rotary_dims / 2, 0)));
    for (size_t i = 0; i < table.size(); ++i)
        table[i] = rope_inv_freq(kfv.rope_theta, static_cast<int32_t>(i), head_dim, kfv.rotary_dims);
    return table;
}

std::string k_from_v_cos_sin_table(const wideattn_k_from_v& kfv, int32_t head_dim, int32_t positions,
                                   std::vector<uint32_t>* table) {
    table->assign(static_cast<size_t>(std::max(positions, 0)) * static_cast<size_t>(std::max(kfv.rotary_dims / 2, 0)),
                  0);
    if (wideattn_k_from_v_cos_sin(kfv.rope_theta, kfv.inv_freq, head_dim, kfv.rotary_dims, positions, table->data(),
                                  table->size() * sizeof(uint32_t)) == WIDEATTN_OK)
        return {};
    table->clear();
    return std::string("wideattn_k_from_v_cos_sin: ") + wideattn_last_error();
}

std::string cos_sin_table_rows(size_t entries, int32_t rotary_dims, int32_t* positions) {
    const int64_t row = rotary_dims / 2;
    if (row <= 0 || entries % static_cast<size_t>(row) != 0 || entries / static_cast<size_t>(row) > INT32_MAX)
        return "a cos / sin table of " + std::to_string(entries) + " entries is no whole number (up to 2^31 - 1) " +
               "of rows of rotary_dims / 2 = " + std::to_string(row);
    *positions = static_cast<int32_t>(entries / static_cast<size_t>(row));
    return {};
}

std::string attach_host_cos_sin(const std::vector<uint32_t>& table, wideattn_k_from_v* kfv) {
    int32_t positions = 0;
    if (std::string err = cos_sin_table_rows(table.size(), kfv->rotary_dims, &positions); !err.empty()) return err;
    kfv->cos_sin = table.data();
    kfv->cos_sin_positions = positions;
    return {};
}

std::vector<float> random_k_norm_weights(int32_t head_dim, uint64_t seed, KNormWeights kind) {
    constexpr float kSpread = 0.25f;
    std::vector<float> w(static_cast<size_t>(head_dim));
    const std::vector<uint16_t> noise = random_bf16(w.size(), kSpread, seed);
    for (size_t d = 0; d < w.size(); ++d) {
        w[d] = 1.0f + bf16_to_float(noise[d]);
        if (kind == KNormWeights::kBf16) w[d] = round_to_bf16(w[d]);
    }
    return w;
}

void rebuild_k_from_v(const wideattn_k_from_v& kfv, HostProblem* problem) {
    HostProblem& h = *problem;
    const ProblemSpec& s = h.spec;
    const int32_t D = s.head_dim;
    std::vector<float> v_row(static_cast<size_t>(D)), k_row(static_cast<size_t>(D));
    for (size_t seq = 0; seq < s.q_lens.size(); ++seq)
        for (int32_t j = 0; j < h.seq_lens_k[seq]; ++j) {
            const int64_t block = h.block_table[seq * h.table_stride + j / s.block_size];
            for (int32_t kvh = 0; kvh < s.num_kv_heads; ++kvh) {
                const int64_t row = ((block * s.block_size + j % s.block_size) * s.num_kv_heads + kvh) * D;
                for (int32_t d = 0; d < D; ++d) v_row[d] = bf16_to_float(h.v[row + d]);
                accuracy::k_from_v_row(v_row.data(), kfv, D, j, k_row.data());
                for (int32_t d = 0; d < D; ++d) h.k[row + d] = float_to_bf16(k_row[d]);
            }
        }
}

double HostProblem::flops() const {
    double total = 0.0;
    for (size_t s = 0; s < spec.q_lens.size(); ++s) {
        const double q = spec.q_lens[s], c = spec.contexts[s];
        total += 4.0 * spec.head_dim * spec.num_q_heads * (q * c + q * (q + 1) / 2);
    }
    return total;
}

}  // namespace wideattn
