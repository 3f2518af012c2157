// metadata_check.h - checked mode (WIDEATTN_FLAG_CHECK_METADATA, WIDEATTN_CHECK_METADATA=1): the
// rules a prefill call's device metadata (cu_seqlens_q, seq_lens_k, block_table) must follow,
// as pure functions over host arrays (no driver: unit-testable on any machine), and the thin
// wrapper that copies the metadata from the device on the caller's stream and applies them.
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "dispatch/driver.h"
#include "wideattn.h"

namespace wideattn {

// The environment variable that puts every prefill of a context in checked mode.
constexpr const char* kCheckMetadataEnv = "WIDEATTN_CHECK_METADATA";

// block_table entries the wrapper copies between two stream synchronisations (4 MiB of host
// staging): a longer table is copied and checked in pieces, so host memory stays bounded.
constexpr int64_t kMetadataStagingEntries = int64_t{1} << 20;

// Reads the value of WIDEATTN_CHECK_METADATA (NULL: unset) into *on: unset, "" and "0" are off,
// "1" is on. Any other value returns false with *message naming the variable and the value.
bool parse_check_metadata_env(const char* value, bool* on, std::string* message);

// Whether a call runs in checked mode: its flags ask for it, or its context does
// (`context_default`, from WIDEATTN_CHECK_METADATA at wideattn_open).
bool checked_mode(const wideattn_prefill_params& p, bool context_default);

// The block_table entries of one sequence with `seq_len_k` keys the kernels read:
// ceil(seq_len_k / block_size) (0 for seq_len_k <= 0).
int64_t used_blocks(const wideattn_prefill_params& p, int32_t seq_len_k);

// The rules of cu_seqlens_q[0 .. num_seqs] and seq_lens_k[0 .. num_seqs-1] (host copies):
// cu_seqlens_q[0] == 0, non-decreasing, no entry above total_q, cu_seqlens_q[num_seqs] ==
// total_q; q_len <= seq_lens_k[s] <= block_table_stride * block_size. The first bad entry
// returns WIDEATTN_ERROR_INVALID_ARGUMENT with *message naming the array, index, value and rule.
wideattn_status check_sequence_lengths(const wideattn_prefill_params& p, const int32_t* cu_seqlens_q,
                                       const int32_t* seq_lens_k, std::string* message);

// The rule of block_table entries: entries[i] = block_table[seq][first + i], i < count, each in
// [0, num_blocks). The first bad entry returns WIDEATTN_ERROR_INVALID_ARGUMENT naming it.
wideattn_status check_block_entries(const wideattn_prefill_params& p, int32_t seq, int64_t first,
                                    const int32_t* entries, int64_t count, std::string* message);

// Every rule over host copies: check_sequence_lengths, then the used prefix of each row of the
// host table `block_table` (rows block_table_stride entries apart).
wideattn_status check_host_metadata(const wideattn_prefill_params& p, const int32_t* cu_seqlens_q,
                                    const int32_t* seq_lens_k, const int32_t* block_table, std::string* message);

// Checked mode of one launch: refuses a stream that is capturing a CUDA graph, copies the
// lengths with cuMemcpyDtoHAsync on `stream` and synchronises it, checks them, then copies and
// checks the rows' used prefixes (at most kMetadataStagingEntries per synchronisation). A
// failed driver call returns WIDEATTN_ERROR_CUDA naming it; a rule broken, INVALID_ARGUMENT.
wideattn_status check_device_metadata(const Driver& drv, const wideattn_prefill_params& p, CUstream stream,
                                      std::string* message);

}  // namespace wideattn
