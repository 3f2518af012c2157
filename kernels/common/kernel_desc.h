// kernel_desc.h - the compile-time description every kernel's traits struct exports.
//
// One KernelDesc per kernel, defined in the kernel's traits header, is read by three
// consumers: the kernel itself (tile sizes, threads), the manifest generator (which writes
// manifest.json at build time) and, through the manifest, the dispatcher. Host and device
// therefore cannot disagree. This header is plain C++17 constexpr so host code includes it.
#pragma once

#include <cstdint>

#include "wideattn.h"

#if defined(__CUDACC__)
#define WIDEATTN_HOST_DEVICE __host__ __device__
#else
#define WIDEATTN_HOST_DEVICE
#endif

namespace wideattn {

// Element types of KernelDesc: the values of wideattn_dtype (include/wideattn.h, the one source).
enum DType : int32_t {
    kBF16 = WIDEATTN_DTYPE_BF16,
    kF16 = WIDEATTN_DTYPE_F16,
    kF32 = WIDEATTN_DTYPE_F32,
    kF64 = WIDEATTN_DTYPE_F64,
    kE4M3 = WIDEATTN_DTYPE_E4M3
};

// Every KV block size (wideattn_prefill_params::block_size, slots per page) is a multiple of this
// many keys: a run of kPageSizeMultiple consecutive keys starting at a multiple of it never
// straddles a page. The kernels' key tiles, page runs and TMA boxes are sized from it.
constexpr int32_t kPageSizeMultiple = 16;

struct KernelDesc {
    const char* name;         // stable kernel name, also the cubin file stem
    const char* symbol;       // extern "C" __global__ entry point
    int32_t q_dtype;
    int32_t kv_dtype;
    int32_t o_dtype;
    int32_t head_dim_min;     // supported head dims: min..max in steps of head_dim_step
    int32_t head_dim_max;
    int32_t head_dim_step;
    int32_t group_min;        // supported num_q_heads / num_kv_heads
    int32_t group_max;
    int32_t tile_tokens;      // query tokens of one sequence per block
    int32_t tile_keys;        // keys per inner-loop tile
    int32_t heads_per_block_max;  // query heads (of one KV head) per block
    int32_t threads;          // threads per block
    int32_t dynamic_smem;     // bytes of dynamic shared memory per block
    int32_t min_sm;           // lowest compute capability (major*10+minor) it is built for
    const char* features;     // comma-separated feature list
    const char* kind;         // what the kernel computes: kKindPrefill, kKindMergeSplits, kKindQuantizeE4m3,
                              // kKindAmaxE4m3 or kKindKFromVRebuild
    // The split-KV entry point (grid.z = key splits, partials into the workspace: docs/design.md
    // "Split-KV"), a second function of the same cubin with the same arguments; nullptr if none.
    // Its own function, so the unsplit entry's registers and code stay those of the kernel alone.
    const char* split_symbol = nullptr;
};

// Kernel kinds (manifest "kind"): the dispatcher picks prefill kernels for wideattn_prefill (and
// a merge kernel after a split-KV launch), quantise kernels for wideattn_quantize_to_cache, amax
// kernels for wideattn_compute_scale and K-from-V rebuild kernels for wideattn_k_from_v_rebuild.
constexpr const char* kKindPrefill = "prefill";
constexpr const char* kKindMergeSplits = "merge_splits";
constexpr const char* kKindQuantizeE4m3 = "quantize_e4m3";
constexpr const char* kKindAmaxE4m3 = "amax_e4m3";
constexpr const char* kKindKFromVRebuild = "k_from_v_rebuild";

// Feature of a kernel made for calls of at most one query token per sequence (decode): it is
// correct for any call (one block per token), but selection considers it on its own only when
// total_q <= num_seqs; pinned by name it serves every call.
constexpr char kFeatureSingleToken[] = "single_token";

// Whether a call of total_q query tokens over num_seqs sequences has at most one token per
// sequence: the calls a single_token kernel serves on its own, the tuning class decode_single.
WIDEATTN_HOST_DEVICE constexpr bool single_token_call(int64_t total_q, int64_t num_seqs) { return total_q <= num_seqs; }

// Feature of a kernel made for calls of a few query tokens per sequence (speculative verification
// steps): correct for any call, considered on its own by selection only when total_q <=
// kFewTokensPerSeq x num_seqs (the tuning class decode); pinned by name it serves every call.
constexpr char kFeatureFewTokens[] = "few_tokens";
constexpr int32_t kFewTokensPerSeq = 8;
WIDEATTN_HOST_DEVICE constexpr bool few_tokens_call(int64_t total_q, int64_t num_seqs) {
    return total_q <= kFewTokensPerSeq * num_seqs;
}

// The query tokens per sequence (on average) up to which selection considers a kernel with these
// features on its own: 1 (single_token), kFewTokensPerSeq (few_tokens), 0 for no limit.
constexpr int32_t alone_tokens_per_seq(bool single_token, bool few_tokens) {
    return single_token ? 1 : few_tokens ? kFewTokensPerSeq : 0;
}

// Whether a call of total_q query tokens over num_seqs sequences is within a kernel's limit.
constexpr bool within_alone_limit(int32_t tokens_per_seq, int64_t total_q, int64_t num_seqs) {
    return tokens_per_seq == 0 || total_q <= tokens_per_seq * num_seqs;
}

// Feature of a kernel made for calls whose every sequence has many query tokens (prefill and
// prompt chunks): correct for any call, considered on its own by selection only when the shortest
// sequence, as total_q, num_seqs and the max_seqlen_q hint bound it, has more than
// kFewTokensPerSeq query tokens (many_tokens_call); pinned by name it serves every call. The
// two-CTA kernels carry it: their token tile is two row groups of kFewTokensPerSeq tokens, and a
// sequence of fewer tokens leaves a row group without rows that still runs the whole key loop.
constexpr char kFeatureManyTokens[] = "many_tokens";

// A lower bound on the query tokens of the shortest of num_seqs sequences that hold total_q
// together when none holds more than max_seqlen_q (0: unknown, which bounds only one sequence).
constexpr int64_t shortest_seq_lower_bound(int64_t total_q, int64_t num_seqs, int64_t max_seqlen_q) {
    if (num_seqs <= 0) return 0;
    if (num_seqs == 1) return total_q;
    if (max_seqlen_q <= 0) return 0;
    const int64_t bound = total_q - (num_seqs - 1) * max_seqlen_q;
    return bound > 0 ? bound : 0;
}

// Whether a call's shortest sequence provably has more than kFewTokensPerSeq query tokens: the
// calls a many_tokens kernel serves on its own. Never a few_tokens call (its average, an upper
// bound of the shortest, is at most kFewTokensPerSeq).
constexpr bool many_tokens_call(int64_t total_q, int64_t num_seqs, int64_t max_seqlen_q) {
    return shortest_seq_lower_bound(total_q, num_seqs, max_seqlen_q) > kFewTokensPerSeq;
}

// Feature of a kernel whose blocks run as clusters of kCtaPairSize CTAs (fixed on the entry point by
// __cluster_dims__, sm_90 and later) that share one token tile: grid.x is kCtaPairSize x the token
// tiles, the CTAs of a tile next to each other (blockIdx.x / kCtaPairSize is the tile's rank).
constexpr char kFeatureCtaPair[] = "cta_pair";
constexpr int32_t kCtaPairSize = 2;
constexpr int32_t kMinSmClusters = 90;

// Feature of the amax kernel that rounds the scale up to a power of two: wideattn_compute_scale_pow2
// selects only kernels with it, wideattn_compute_scale only kernels without it.
constexpr char kFeaturePowerOfTwo[] = "power_of_two";

// Launch geometry shared by every prefill kernel and the dispatcher.
//   grid.x = token tiles: enough for every sequence's ceil(q_len / tile_tokens) tiles (times
//            kCtaPairSize for "cta_pair" kernels); blocks past the last tile exit at once.
//   grid.y = num_q_heads / heads_per_block.
//   block  = desc.threads, dynamic shared memory desc.dynamic_smem.
WIDEATTN_HOST_DEVICE constexpr int32_t ceil_div(int64_t a, int64_t b) { return static_cast<int32_t>((a + b - 1) / b); }

// Largest divisor of `group` that is <= max_heads: the query heads one block handles.
WIDEATTN_HOST_DEVICE constexpr int32_t heads_per_block(int32_t group, int32_t max_heads) {
    int32_t best = 1;
    for (int32_t h = 1; h <= max_heads && h <= group; ++h)
        if (group % h == 0) best = h;
    return best;
}

// Upper bound of sum over sequences of ceil(q_len_s / tile_tokens): the ceiling of
// (total_q + num_seqs (tile_tokens - 1)) / tile_tokens, one more than the tightest bound (its
// floor) whenever that quotient is whole. The floor measured 1.7% slower at one 5-token verify
// step on 20k keys (its split grid without the row of empty blocks the ceiling adds; 2026-12-07,
// kernels/hopper/NOTES.md "Decode and small batches"), so the ceiling stays.
WIDEATTN_HOST_DEVICE constexpr int64_t token_tile_count(int64_t total_q, int64_t num_seqs, int32_t tile_tokens) {
    return (total_q + num_seqs * (tile_tokens - 1) + tile_tokens - 1) / tile_tokens;
}

// Split-KV workspace (docs/design.md "Split-KV"; the host sizes it in dispatch/split_plan.h):
// fp32 partial O [splits][total_q][num_q_heads][head_dim] from the start, then fp32 partial LSE
// [splits][total_q][num_q_heads] at this offset, each region a multiple of kSplitWorkspaceAlign.
constexpr int64_t kSplitWorkspaceAlign = 256;
WIDEATTN_HOST_DEVICE constexpr int64_t split_workspace_round(int64_t bytes) {
    return (bytes + kSplitWorkspaceAlign - 1) / kSplitWorkspaceAlign * kSplitWorkspaceAlign;
}
WIDEATTN_HOST_DEVICE constexpr int64_t split_lse_offset(int64_t splits, int64_t total_q, int64_t num_q_heads,
                                                        int64_t head_dim) {
    return split_workspace_round(splits * total_q * num_q_heads * head_dim * static_cast<int64_t>(sizeof(float)));
}

constexpr int32_t kSmemLimitSm120 = 99 * 1024;  // opt-in dynamic shared memory per block, sm_120/sm_89/sm_86
constexpr int32_t kSmemLimitSm80 = 163 * 1024;
constexpr int32_t kSmemLimitSm90 = 227 * 1024;

}  // namespace wideattn
