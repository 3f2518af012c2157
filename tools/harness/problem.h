// problem.h - random attention problems on the host: varlen batches with context, a paged
// KV cache with a (shuffled) block table, and the matching wideattn_prefill_params. Used by
// `wideattn selftest`, the GPU test suite and the benchmarks, so they all test one layout.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "wideattn.h"

namespace wideattn {

// e4m3 Q rows must start on 16 bytes (validation): the padding is a multiple of 16 codes.
constexpr int32_t kE4m3QPadMultiple = 16;

// Inputs as QK-norm makes them (docs/design.md section 1): every Q and K head vector is
// RMS-normalised (to q_rms, k_rms), K's outlier channels then take a gain (a learned k_norm
// weight, the same channels in every head), V head vectors are RMS-normalised to 1 plus an offset
// vector common to every key of a KV head. At softmax scale 1.0 the softmax is peaked: the output
// is carried by a few keys. q_rms = 0 leaves the N(0, input_scale^2) inputs of ProblemSpec.
struct GemmaInputs {
    float q_rms = 0.0f;
    float k_rms = 1.0f;
    int32_t k_outlier_channels = 0;
    float k_outlier_gain = 1.0f;
    float v_offset_rms = 0.0f;
    bool enabled() const { return q_rms > 0.0f; }
    std::string describe() const;  // e.g. "gemma(q 0.5, k 1, 1 ch x40, v+4)"
};

struct ProblemSpec {
    std::vector<int32_t> q_lens;    // new tokens per sequence (0 allowed)
    std::vector<int32_t> contexts;  // cached keys before the new tokens, per sequence
    int32_t num_q_heads = 32;
    int32_t num_kv_heads = 4;
    int32_t head_dim = 512;
    int32_t block_size = 16;
    bool shuffle_blocks = true;     // random physical order of KV blocks
    int32_t spare_blocks = 3;       // unused blocks in the pool (catch wrong table reads)
    int32_t q_token_pad = 0;        // extra elements per q/o token row (caller strides), multiple of 8
    float input_scale = 0.21f;      // q and k ~ N(0, input_scale^2); v ~ N(0, 1)
    float softmax_scale = 1.0f;     // Gemma 4 uses 1.0 (QK-norm carries the scale)
    float k_outlier = 0.0f;         // added to one K channel (a large-magnitude outlier)
    GemmaInputs gemma;              // QK-normed inputs as Gemma 4's global layers produce (off by default)
    bool want_lse = true;
    bool generate_data = true;      // false: shapes and index arrays only (q, k, v left empty)
    bool e4m3_kv = false;           // also quantise K and V to e4m3 (k_e4m3, v_e4m3; k and v then
                                    // hold the exactly dequantised values for the references)
    bool e4m3_q = false;            // also quantise Q to e4m3 (q_e4m3, q_scale; q then holds the
                                    // dequantised values); q_token_pad must be a multiple of 16
    bool v_transposed = false;      // the e4m3 V codes (v_e4m3) in the transposed layout of
                                    // WIDEATTN_FLAG_V_TRANSPOSED (kernels/common/v_transposed.h),
                                    // for the kernels that read it; needs e4m3_kv
    bool nan_unused_slots = false;  // every K/V slot no sequence uses (past a sequence's keys in
                                    // its last page, spare blocks) holds NaN: a kernel must never
                                    // let them reach O (with e4m3_kv their codes are NaN)
    uint64_t seed = 1;

    std::string describe() const;   // one line, e.g. "seqs=5 q=[1,7,...] ctx=[...] H=32/4 bs=16"
};

// A spec with the given batch and heads (head dim 512 and the other defaults of ProblemSpec).
ProblemSpec problem_spec(std::vector<int32_t> q_lens, std::vector<int32_t> contexts, int32_t num_q_heads,
                         int32_t num_kv_heads, int32_t block_size, uint64_t seed);

struct HostProblem {
    ProblemSpec spec;
    int32_t total_q = 0;
    int32_t num_blocks = 0;
    int32_t table_stride = 0;        // block table columns
    std::vector<uint16_t> q, k, v;   // bf16 bits
    std::vector<uint8_t> k_e4m3, v_e4m3;  // e4m3 codes when spec.e4m3_kv (value = code * scale); V
                                          // transposed when spec.v_transposed
    std::vector<uint8_t> q_e4m3;          // e4m3 codes when spec.e4m3_q
    float k_scale = 1.0f, v_scale = 1.0f, q_scale = 1.0f;
    std::vector<int32_t> cu_seqlens_q, seq_lens_k, block_table;

    // Params with the problem's shapes/strides and the given data pointers (host or device).
    wideattn_prefill_params params(const void* q_ptr, const void* k_ptr, const void* v_ptr, void* o_ptr,
                                   void* lse_ptr, const int32_t* cu_ptr, const int32_t* seq_k_ptr,
                                   const int32_t* table_ptr, int32_t o_dtype) const;
    int64_t q_token_stride() const { return int64_t{spec.num_q_heads} * spec.head_dim + spec.q_token_pad; }
    int64_t kv_elements() const;  // elements of k_cache (and of v_cache)
    // The v_cache strides and flag of the transposed V layout (dense pages [kv_head][d][slot]) in
    // *p, in place of the engine layout's.
    void use_transposed_v(wideattn_prefill_params* p) const;
    int64_t out_elements() const { return int64_t{total_q} * q_token_stride(); }
    int64_t lse_elements() const { return int64_t{spec.num_q_heads} * total_q; }
    // Causal FLOPs of docs/design.md section 7: 4 D Hq (q_len*context + q_len*(q_len+1)/2).
    double flops() const;
};

// K from V (WIDEATTN_FLAG_K_FROM_V): Gemma 4's global-layer description with a host or device
// k_norm_scale pointer (rope_theta 1e6, 128 rotated dims, proportional, rotate-half; inv_freq NULL:
// the frequencies from rope_theta).
constexpr float kGemma4GlobalRopeTheta = 1.0e6f;
constexpr int32_t kGemma4GlobalRotaryDims = 128;
wideattn_k_from_v gemma4_k_from_v(const float* k_norm_scale);

// The rotary_dims / 2 frequencies rope_inv_freq computes from kfv.rope_theta: as kfv.inv_freq, a
// table that gives the bits of the NULL path.
std::vector<float> formula_inv_freq(const wideattn_k_from_v& kfv, int32_t head_dim);

// The cos / sin table (wideattn_k_from_v.cos_sin) of kfv's frequencies for positions 0 ..
// positions - 1 into *table, filled by wideattn_k_from_v_cos_sin from kfv.inv_freq (a host pointer)
// when set, else kfv.rope_theta: positions x rotary_dims / 2 entries, the bf16 cos in the low and
// the bf16 sin in the high half of each. Such a table gives the K-from-V decode kernels' outputs of
// a call without one. Returns "" or the library's refusal.
std::string k_from_v_cos_sin_table(const wideattn_k_from_v& kfv, int32_t head_dim, int32_t positions,
                                   std::vector<uint32_t>* table);

// The rows of a cos / sin table of `entries` entries for a description of rotary_dims rotated dims
// into *positions. Returns "" or why they are no whole number of rows (or more than int32 holds).
std::string cos_sin_table_rows(size_t entries, int32_t rotary_dims, int32_t* positions);

// Points kfv->cos_sin at the host table `table` (k_from_v_cos_sin_table's entries for
// kfv->rotary_dims, alive while kfv is used) and sets cos_sin_positions to its rows: for the CPU
// reference and rebuild_k_from_v. Returns "" or why the table does not fit the description.
std::string attach_host_cos_sin(const std::vector<uint32_t>& table, wideattn_k_from_v* kfv);

// How the k_norm weights of a test layer are drawn. kFp32: 1 + a bf16 draw of N(0, 0.25^2), summed
// in fp32, so most weights are not bf16 values (the kernels' general path). kBf16: the same rounded
// to bf16, as a bf16 checkpoint holds them (Gemma 4's k_norm multiplies by the weight itself; the
// BF16 K-from-V kernel scales by bf16 products for such weights).
enum class KNormWeights { kFp32, kBf16 };

// k_norm weights of a test layer of the given kind, deterministic in `seed`.
std::vector<float> random_k_norm_weights(int32_t head_dim, uint64_t seed, KNormWeights kind = KNormWeights::kFp32);

// Overwrites every key the problem's sequences address in problem->k with K rebuilt from its row
// of problem->v (accuracy::k_from_v_row at the key's index in its sequence), so that a K+V call on
// the result computes what the K-from-V call on problem->v does. kfv.k_norm_scale, kfv.inv_freq
// and kfv.cos_sin (when set; keys at positions past its rows take the formula): host pointers.
void rebuild_k_from_v(const wideattn_k_from_v& kfv, HostProblem* problem);

// `count` bf16 values ~ N(0, scale^2), deterministic in `seed`.
std::vector<uint16_t> random_bf16(size_t count, float scale, uint64_t seed);

// Builds the problem deterministically from spec.seed. Returns an empty string or an error.
std::string make_problem(const ProblemSpec& spec, HostProblem* out);

// Rearranges the e4m3 V codes of a problem made in the engine layout into the transposed layout
// of use_transposed_v and sets spec.v_transposed: make_problem's result for that spec, without
// generating the inputs again (the values, and so the references, do not change). Needs
// spec.e4m3_kv. Returns an empty string or an error.
std::string transpose_v_codes(HostProblem* p);

// Packs the valid output rows ([token][head][d], skipping q_token_pad) into a dense vector.
template <typename T>
std::vector<T> dense_rows(const HostProblem& problem, const std::vector<T>& strided) {
    std::vector<T> dense;
    const int64_t row = int64_t{problem.spec.num_q_heads} * problem.spec.head_dim;
    dense.reserve(static_cast<size_t>(problem.total_q * row));
    for (int32_t t = 0; t < problem.total_q; ++t)
        dense.insert(dense.end(), strided.begin() + t * problem.q_token_stride(),
                     strided.begin() + t * problem.q_token_stride() + row);
    return dense;
}

}  // namespace wideattn
