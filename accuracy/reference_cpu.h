// reference_cpu.h - fp64 attention on the CPU (Eigen) with exactly the semantics of
// wideattn_prefill (docs/design.md section 2). The yardstick for small shapes; the bundle's fp64
// GPU kernel is the one for large shapes, and the GPU tests check the two against each other.
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
// message naming the bad argument (nothing is written then).
std::string reference_attention_cpu(const wideattn_prefill_params& p, double* o, double* lse);

}  // namespace wideattn::accuracy
