// metadata_model.h - the corrupted device metadata of the GPU metadata cases
// (tests/gpu/test_gpu_metadata.cpp) and a host model of what a kernel must compute under it
// (docs/design.md section 2, "Metadata the kernels distrust"): cu_seqlens_q read clamped and made monotone,
// seq_lens_k clamped to [0, block_table_stride * block_size], a block-table entry outside
// [0, num_blocks) read as a page of zeros. Host code only; tests/gpu/test_metadata_model.cpp
// checks it on the CPU against a row-by-row evaluation of those rules.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "accuracy/error_stats.h"
#include "tools/harness/problem.h"

namespace wideattn::test {

// The three device arrays a launch reads, as host copies.
struct Metadata {
    std::vector<int32_t> cu_seqlens_q, seq_lens_k, block_table;
};

// The valid metadata of a problem.
Metadata metadata_of(const HostProblem& h);

// The cu_seqlens_q corruptions change entries 0, 1, 2 and num_seqs: shapes need this many sequences.
constexpr int32_t kMinCorruptionSeqs = 3;

// One corruption: a unique name and the change it makes to a problem's valid metadata.
struct Corruption {
    const char* name;
    void (*apply)(const HostProblem& h, Metadata* m);
};

enum class CorruptionClass { kCuSeqlensQ, kBlockTable, kSeqLensK };

// The corruptions of one class, one value or one kind of damage each.
std::vector<Corruption> corruptions(CorruptionClass kind);

// One corruption per class with every bad value of the class at once (the sanitizer subset).
std::vector<Corruption> sanitizer_corruptions();

// A sequence as the kernels read it: rows [q_begin, q_end) and `keys` keys after clamping.
struct ClampedSequence {
    int32_t q_begin, q_end;
    int64_t keys;
};
std::vector<ClampedSequence> clamped_sequences(const HostProblem& h, const Metadata& m);

// What the clamped metadata makes of a query row: no sequence owns it (contents unspecified),
// its sequence owns it but it sees no key (zeros, LSE -inf), or it is owned and sees keys.
enum class RowRole : uint8_t { kUnowned, kNoKey, kOwned };

struct Expected {
    std::vector<RowRole> roles;  // per query row
    std::vector<double> out;     // dense [token][head][d]; the reference on kOwned rows
    std::vector<double> lse;     // [head][token]; the reference on kOwned rows
    int64_t owned_rows = 0, no_key_rows = 0;
};

// The fp64 CPU reference (accuracy/reference_cpu.h) on the sanitised equivalent of `m`: the
// clamped cu_seqlens_q and seq_lens_k, every bad table entry mapped to an all-zero page appended
// to the cache, a sequence with fewer keys than rows cut into its no-key rows and the rest, and
// the rows no sequence owns given zero pages of their own. Returns "" or an error.
std::string expected_outputs(const HostProblem& h, const Metadata& m, Expected* e);

// A launch's dense output and LSE (empty: not checked) against `e`.
struct Comparison {
    accuracy::ErrorStats stats;    // kOwned rows against the reference
    int64_t no_key_nonzero = 0;    // elements of kNoKey rows that are not exactly 0 (NaN included)
    int64_t no_key_lse_wrong = 0;  // kNoKey LSE values that are not -inf
    int64_t lse_nonfinite = 0;     // kOwned LSE values that are NaN or +-inf
    double lse_max_abs = 0.0;      // max |lse - reference| over kOwned rows
};
Comparison compare_outputs(const HostProblem& h, const Expected& e, const std::vector<double>& out,
                           const std::vector<double>& lse);

}  // namespace wideattn::test
