// attn_error_file.h - attention test cases in HDF5 (schema in docs/accuracy.md): the inputs of
// one wideattn_prefill call (q, paged k/v cache, cu_seqlens_q, seq_lens_k, block_table,
// softmax_scale) and a kernel's output `out` (optionally `lse`). Reads a case, runs the fp64
// CPU reference on it and reports the error statistics of `out` against it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "accuracy/error_stats.h"

namespace wideattn::accuracy {

enum class TensorType { kFloat32, kBFloat16 };

// A float32 or bfloat16 (raw uint16 bits) tensor with its shape.
struct AttnTensor {
    std::vector<int64_t> dims;
    TensorType type = TensorType::kFloat32;
    std::vector<float> f32;
    std::vector<uint16_t> bf16;

    int64_t elements() const;
    const void* data() const;
};

struct AttnCase {
    AttnTensor q;        // [total_q, num_q_heads, head_dim]
    AttnTensor k_cache;  // [num_blocks, block_size, num_kv_heads, head_dim]
    AttnTensor v_cache;  // same shape and type as k_cache
    AttnTensor out;      // [total_q, num_q_heads, head_dim]
    std::vector<int32_t> cu_seqlens_q;  // [num_seqs + 1]
    std::vector<int32_t> seq_lens_k;    // [num_seqs]
    std::vector<int32_t> block_table;   // [num_seqs, block_table_stride]
    int64_t block_table_stride = 0;
    double softmax_scale = 1.0;
    bool has_lse = false;
    std::vector<float> lse;             // [num_q_heads, total_q] natural-log LSE of the scaled scores
};

// Reads and validates a case; throws AccuracyError naming the file, dataset and problem. The
// whole read first runs in a child process (probe_in_child): a corrupt file that crashes or
// hangs libhdf5 there is an error here.
AttnCase read_attn_case(const std::string& path);
// The same read in this process only.
AttnCase read_attn_case_here(const std::string& path);
void write_attn_case(const std::string& path, const AttnCase& attn_case);

struct AttnErrorResult {
    ErrorStats out_stats;
    TokenHeadDim max_abs_at;             // location of out_stats.max_abs
    std::vector<ErrorStats> per_head;    // out errors of each query head
    bool has_lse = false;
    ErrorStats lse_stats;                // over rows with a finite reference LSE
    std::vector<double> reference_out;   // fp64 reference o[token][head][dim]
    std::vector<double> reference_lse;   // fp64 reference lse[head][token]
};

// Runs accuracy::reference_attention_cpu on the case and compares `out` (and `lse`).
AttnErrorResult evaluate_attn_case(const AttnCase& attn_case);

// A small deterministic case (2 sequences with cached context, 4 query / 2 KV heads, head dim
// 512, block size 16, shuffled block table, bf16 inputs) whose `out` is the fp64 reference
// rounded to bfloat16 and whose `lse` is the reference LSE rounded to float.
AttnCase make_sample_attn_case(uint64_t seed);

}  // namespace wideattn::accuracy
