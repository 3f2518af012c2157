// split_self_merge.cuh - the merge of a single-token split-KV kernel done by its own blocks
// (feature merges_splits, kernels/common/kernel_desc.h), without a merge kernel after the grid.
// A block (one token, one KV head, one split) that has stored its split partial (O normalised
// by its own row sum, natural-log LSE: split_partials.cuh) takes a ticket of its group of
// kSelfMergeGroup consecutive splits; the group's last block merges the group's partials into a
// group partial, then takes a ticket of the token's groups; the last group merges the group
// partials into o and lse. With one group the group's last block writes o and lse at once.
//
// The sums run over the parts in index order whichever block finishes last, so the bits depend
// on the inputs and the split count alone (they differ from the merge kernel's one-level sum).
// Semantics per row as the merge kernel's (kernels/merge/splits_bf16/merge.cuh): parts whose
// LSE is -inf add nothing, a row without keys gets zeros and -inf, a NaN LSE gives NaN.
//
// Tickets: one 8-byte word per (token, KV head) and group, plus one for the groups, in the
// caller's workspace, which may hold anything when the kernel starts. A word counts arrivals
// only while its high half holds kTicketTag: a word without it counts as zero, and each last
// block writes its word back to (tag, 0), so a completed launch leaves every word at zero for
// the next launch or graph replay. Two launches in flight on one workspace are the caller's
// error, as for the split partials.
#pragma once

#include <cuda_bf16.h>

#include <cstdint>

#include "kernels/common/kernel_desc.h"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/split_partials.cuh"
#include "wideattn.h"

namespace wideattn::self_merge {

constexpr unsigned long long kTicketTag = 0x7769646eull;  // "widn"
constexpr int32_t kTagShift = 32;
constexpr int32_t kVecFloats = 4;
// The most parts one merge takes: a group's splits, or a token's groups at WIDEATTN_MAX_SPLITS.
constexpr int32_t kMaxParts = (WIDEATTN_MAX_SPLITS + kSelfMergeGroup - 1) / kSelfMergeGroup;
constexpr int32_t kPartsInFlight = 4;  // parts whose O rows are loaded before any is added
static_assert(kSelfMergeGroup <= kMaxParts, "a group's splits fit the merge");

// The arrivals at `word` before this one (0 for the first), counting a word without the tag as 0.
__device__ __forceinline__ uint32_t take_ticket(unsigned long long* word) {
    unsigned long long seen = *reinterpret_cast<volatile unsigned long long*>(word);
    for (;;) {
        const unsigned long long want = (seen >> kTagShift) == kTicketTag ? seen + 1 : (kTicketTag << kTagShift) | 1ull;
        const unsigned long long got = atomicCAS(word, seen, want);
        if (got == seen) return static_cast<uint32_t>(want) - 1u;
        seen = got;
    }
}

// Whether this block is the last of `members` to arrive at `word` (every thread gets the answer).
// Every thread's stores before the call are visible to the block that gets true, past the call.
__device__ __forceinline__ bool last_to_arrive(unsigned long long* word, uint32_t members) {
    __threadfence();
    bool last = false;
    if (threadIdx.x == 0) {
        last = take_ticket(word) == members - 1u;
        if (last) atomicExch(word, kTicketTag << kTagShift);  // zero for the next launch
    }
    last = __syncthreads_or(last) != 0;
    if (last) __threadfence();
    return last;
}

// Parts [first, first + count) of the rows of one (token, KV head): part s, row r at
// o_parts + ((s * total_q + token) * num_q_heads + head) * head_dim, its LSE likewise. Thread i
// takes row i / kThreadsPerRow (head kv_head * kRows + row) and 4 dims of each kDimsPerPass.
// kFinal: bf16 into o and the LSE into lse (if any); else the fp32 group partial into
// (o_out, lse_out) at part index `out_part`. Latency, not bytes, is what this costs (one block,
// 2 KB a row per part from L2): every LSE is loaded at once (count <= kMaxParts), then the O rows
// of kPartsInFlight parts at a time, their loads issued before any is added.
template <class Traits, bool kFinal>
__device__ __forceinline__ void merge_parts(const wideattn_prefill_params& p, const float* o_parts,
                                            const float* lse_parts, int32_t first, int32_t count, int64_t token,
                                            int32_t kv_head, float* o_out, float* lse_out, int32_t out_part) {
    constexpr int32_t kThreadsPerRow = Traits::kThreads / Traits::kRows;
    constexpr int32_t kDimsPerPass = kVecFloats * kThreadsPerRow;
    constexpr int32_t kPasses = Traits::kHeadDim / kDimsPerPass;
    static_assert(Traits::kThreads % Traits::kRows == 0 && Traits::kHeadDim % kDimsPerPass == 0,
                  "the threads cover the rows and dims evenly");
    static_assert(kMaxParts % kPartsInFlight == 0, "the parts go kPartsInFlight at a time");
    const int32_t thread = static_cast<int32_t>(threadIdx.x);
    const int32_t head = kv_head * Traits::kRows + thread / kThreadsPerRow;
    const int32_t first_dim = kVecFloats * (thread % kThreadsPerRow);
    const int64_t rows = static_cast<int64_t>(p.total_q) * p.num_q_heads;
    const int64_t row = token * p.num_q_heads + head;

    float lse[kMaxParts];
#pragma unroll
    for (int32_t u = 0; u < kMaxParts; ++u)
        lse[u] = u < count ? __ldcg(lse_parts + (first + u) * rows + row) : -INFINITY;
    float m = -INFINITY;
    bool nan_part = false;
#pragma unroll
    for (int32_t u = 0; u < kMaxParts; ++u) {
        m = fmaxf(m, lse[u]);  // fmaxf drops a NaN: nan_part keeps it
        nan_part = nan_part || isnan(lse[u]);
    }
    if (nan_part) m = NAN;
    float weights = 0.0f;
    float4 acc[kPasses];
#pragma unroll
    for (int32_t j = 0; j < kPasses; ++j) acc[j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if (m != -INFINITY) {
#pragma unroll
        for (int32_t c = 0; c < kMaxParts; c += kPartsInFlight) {
            if (c >= count) break;
            float4 x[kPartsInFlight][kPasses];
            // A part without keys of this row (LSE -inf) adds nothing: its O is not read.
#pragma unroll
            for (int32_t u = 0; u < kPartsInFlight; ++u) {
                const float* part = o_parts + ((first + c + u) * rows + row) * p.head_dim + first_dim;
#pragma unroll
                for (int32_t j = 0; j < kPasses; ++j)
                    x[u][j] = lse[c + u] != -INFINITY
                                  ? __ldcg(reinterpret_cast<const float4*>(part + j * kDimsPerPass))
                                  : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            }
#pragma unroll
            for (int32_t u = 0; u < kPartsInFlight; ++u) {
                if (lse[c + u] == -INFINITY) continue;
                const float w = expf(lse[c + u] - m);
                weights += w;
#pragma unroll
                for (int32_t j = 0; j < kPasses; ++j) {
                    acc[j].x += w * x[u][j].x;
                    acc[j].y += w * x[u][j].y;
                    acc[j].z += w * x[u][j].z;
                    acc[j].w += w * x[u][j].w;
                }
            }
        }
    }
    // m NaN: the NaN part's weight and the sum are NaN, and so is every O element (the part is
    // summed), which inv = 0 keeps NaN.
    const float inv = weights > 0.0f ? 1.0f / weights : 0.0f;
    const float row_lse = weights == 0.0f ? -INFINITY : m + logf(weights);
    if constexpr (kFinal) {
        __nv_bfloat16* out = static_cast<__nv_bfloat16*>(p.o) + token * p.o_token_stride + head * p.o_head_stride;
#pragma unroll
        for (int32_t j = 0; j < kPasses; ++j) {
            uint2 packed;
            packed.x = ptx::pack_bf16x2(acc[j].x * inv, acc[j].y * inv);
            packed.y = ptx::pack_bf16x2(acc[j].z * inv, acc[j].w * inv);
            *reinterpret_cast<uint2*>(out + first_dim + j * kDimsPerPass) = packed;
        }
        if (p.lse != nullptr && thread % kThreadsPerRow == 0)
            static_cast<float*>(p.lse)[head * p.lse_head_stride + token] = row_lse;
    } else {
        float* out = o_out + (out_part * rows + row) * p.head_dim + first_dim;
#pragma unroll
        for (int32_t j = 0; j < kPasses; ++j)
            *reinterpret_cast<float4*>(out + j * kDimsPerPass) =
                make_float4(acc[j].x * inv, acc[j].y * inv, acc[j].z * inv, acc[j].w * inv);
        if (thread % kThreadsPerRow == 0) lse_out[out_part * rows + row] = row_lse;
    }
}

// After the block's split partial is stored (every thread): the group's and then the token's
// merge, by the blocks that arrive last.
template <class Traits>
__device__ __forceinline__ void merge_own_splits(const wideattn_prefill_params& p, int64_t token, int32_t kv_head) {
    const int32_t splits = static_cast<int32_t>(gridDim.z);
    const int32_t split = static_cast<int32_t>(blockIdx.z);
    const int32_t groups = static_cast<int32_t>(self_merge_groups(splits));
    const int32_t group = split / kSelfMergeGroup;
    const int32_t first = group * kSelfMergeGroup;
    const int32_t members = min(kSelfMergeGroup, splits - first);
    char* const workspace = static_cast<char*>(p.workspace);
    const float* o_parts = static_cast<const float*>(p.workspace);
    const float* lse_parts =
        reinterpret_cast<const float*>(workspace + split_lse_offset(splits, p.total_q, p.num_q_heads, p.head_dim));
    float* o_groups = reinterpret_cast<float*>(
        workspace + self_merge_group_o_offset(splits, p.total_q, p.num_q_heads, p.head_dim));
    float* lse_groups = reinterpret_cast<float*>(
        workspace + self_merge_group_lse_offset(splits, p.total_q, p.num_q_heads, p.head_dim));
    unsigned long long* tickets = reinterpret_cast<unsigned long long*>(
        workspace + self_merge_ticket_offset(splits, p.total_q, p.num_q_heads, p.head_dim)) +
        (token * p.num_kv_heads + kv_head) * (groups + 1);

    if (!last_to_arrive(tickets + group, static_cast<uint32_t>(members))) return;
    if (groups == 1) {
        merge_parts<Traits, true>(p, o_parts, lse_parts, first, members, token, kv_head, nullptr, nullptr, 0);
        return;
    }
    merge_parts<Traits, false>(p, o_parts, lse_parts, first, members, token, kv_head, o_groups, lse_groups, group);
    if (!last_to_arrive(tickets + groups, static_cast<uint32_t>(groups))) return;
    merge_parts<Traits, true>(p, o_groups, lse_groups, 0, groups, token, kv_head, nullptr, nullptr, 0);
}

}  // namespace wideattn::self_merge
