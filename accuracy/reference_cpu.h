// reference_cpu.h - fp64 attention on the CPU (Eigen) with exactly the semantics of
// wideattn_prefill (docs/design.md section 2). The yardstick for small shapes; the bundle's fp64
// GPU kernel is the one for large shapes, and the GPU tests check the two against each other.
// With WIDEATTN_FLAG_K_FROM_V each key's K is rebuilt from its V row (k_from_v_row) first.
#pragma once

#include <cstdint>
#include <string>

#include "wideattn.h"

namespace wideattn::accuracy {

// Runs attention for `p`, whose pointers are HOST pointers: q, k_cache and v_cache hold
// p.q_dtype / p.kv_dtype elements (BF16, F32 or F64), the index arrays are int32. Writes
// o[token][q_head][d] as double using p.o_token_stride / p.o_head_stride, and, when `lse` is
// not null, lse[q_head * p.lse_head_stride + token] as double (natural log; -inf for a row
// with no visible key, whose output is zeros). Returns an empty string on success, else a
// message naming the bad argument (nothing is written then). With WIDEATTN_FLAG_K_FROM_V in
// p.flags, p.k_from_v (and its k_norm_scale, inv_freq and cos_sin tables) is a HOST pointer too,
// read as the library reads it (its struct_size bytes: a 32-byte struct has no inv_freq, a 40-byte
// one no cos_sin), k_cache is not read and V must be BF16.
std::string reference_attention_cpu(const wideattn_prefill_params& p, double* o, double* lse);

// K of one key rebuilt from its bf16 V row (values as floats, head_dim of them) at `position`
// (the key's index in its sequence), as WIDEATTN_FLAG_K_FROM_V defines it (include/wideattn.h;
// kernels/common/k_from_v.h): bf16 values into k_row. kfv.k_norm_scale, kfv.inv_freq (the model's
// frequencies, fp32 [rotary_dims / 2], or NULL: from rope_theta) and kfv.cos_sin (the bf16 (cos, sin)
// table [cos_sin_positions][rotary_dims / 2], or NULL: cos / sin by the formula; a position past its
// rows takes the formula too) are host pointers.
void k_from_v_row(const float* v_row, const wideattn_k_from_v& kfv, int32_t head_dim, int32_t position,
                  float* k_row);

}  // namespace wideattn::accuracy
