// kernel.cu - fp64 reference attention, the yardstick for every other kernel.
//
// Exactly the semantics of wideattn_prefill (docs/design.md section 2): bf16 q/k/v, varlen batch,
// paged KV through the block table, bottom-right causal, GQA, scale, optional fp64 LSE, and K
// rebuilt from V (WIDEATTN_FLAG_K_FROM_V; the description is the second argument, zeros for a
// K+V call) with the arithmetic of kernels/common/k_from_v.h.
// Clarity over speed: one block per (query token, group of up to 8 query heads of one KV
// head); keys are streamed through shared memory in chunks; every product, exponential and
// sum is fp64 with an online softmax.
#include <cstdint>
#include <cuda_bf16.h>

#include "kernels/common/causal_keys.cuh"
#include "kernels/common/k_from_v.h"
#include "kernels/common/page_bounds.cuh"
#include "kernels/common/token_tiles.cuh"
#include "kernels/reference/traits.h"

namespace wideattn {
namespace {

// Copies `count` keys (starting at key_begin of the sequence) of one KV head into a
// [kKeysPerChunk][head_dim] bf16 tile, 16 bytes per thread per step; the keys of a page outside
// the cache (page_bounds.cuh) are zeros. `num_blocks` bounds the block-table entries.
template <class Traits>
__device__ void load_kv_chunk(__nv_bfloat16* tile, const __nv_bfloat16* cache, int64_t block_stride,
                              int64_t slot_stride, int64_t head_offset, const int32_t* table_row,
                              int32_t block_size, int32_t num_blocks, int32_t key_begin, int32_t count,
                              int32_t head_dim) {
    constexpr int32_t kVec = 8;  // bf16 per 16-byte vector
    const int32_t vecs_per_row = head_dim / kVec;
    for (int32_t v = threadIdx.x; v < count * vecs_per_row; v += Traits::kThreads) {
        const int32_t row = v / vecs_per_row;
        const int32_t col = (v % vecs_per_row) * kVec;
        const int32_t key = key_begin + row;
        const int32_t block = __ldg(table_row + key / block_size);
        const int64_t offset = static_cast<int64_t>(block) * block_stride + (key % block_size) * slot_stride +
                               head_offset + col;
        *reinterpret_cast<uint4*>(tile + row * head_dim + col) =
            page_in_cache(block, num_blocks) ? __ldg(reinterpret_cast<const uint4*>(cache + offset)) : uint4{0, 0, 0, 0};
    }
}

// K from V: the chunk's K tile rebuilt from its V tile (keys key_begin .. key_begin + count - 1
// of the sequence, whose index is the key's RoPE position). One thread per (key, frequency):
// the two dims i and i + D/2 that turn together; cos / sin by k_from_v_cos_sin: the description's
// table where it holds the key's position, else the formula, and for the frequencies that do not
// rotate cos 1, sin 0, which leave the scaled element as it is.
template <class Traits>
__device__ void rebuild_k_chunk(__nv_bfloat16* k_tile, const __nv_bfloat16* v_tile, const KFromV& kfv,
                                int32_t key_begin, int32_t count, int32_t head_dim) {
    const int32_t half = head_dim / 2;
    for (int32_t e = threadIdx.x; e < count * half; e += Traits::kThreads) {
        const int32_t row = e / half;
        const int32_t i = e % half;
        const float w_lo = __ldg(kfv.k_norm_scale + i), w_hi = __ldg(kfv.k_norm_scale + i + half);
        const float x_lo = k_from_v_scaled(__bfloat162float(v_tile[row * head_dim + i]), w_lo);
        const float x_hi = k_from_v_scaled(__bfloat162float(v_tile[row * head_dim + i + half]), w_hi);
        const RopeCosSin cs = k_from_v_cos_sin(kfv, key_begin + row, i, head_dim);
        k_tile[row * head_dim + i] = __float2bfloat16_rn(rope_rotate(x_lo, x_hi, cs, true));
        k_tile[row * head_dim + i + half] = __float2bfloat16_rn(rope_rotate(x_hi, x_lo, cs, false));
    }
}

__device__ double warp_sum(double value) {
    for (int32_t offset = 16; offset > 0; offset >>= 1) value += __shfl_xor_sync(0xffffffffu, value, offset);
    return value;
}

// This warp's query row in registers, fp64, lane holding dims lane, lane+32, ... (zeros for a
// warp without a head and past head_dim).
template <class Traits>
__device__ __forceinline__ void load_q_row(const wideattn_prefill_params& p, int32_t token, int32_t head0,
                                           int32_t warp, int32_t lane, bool warp_has_head, int32_t D,
                                           double (&q_reg)[Traits::kDimsPerLane]) {
    const __nv_bfloat16* q_bf16 = static_cast<const __nv_bfloat16*>(p.q);
#pragma unroll
    for (int32_t i = 0; i < Traits::kDimsPerLane; ++i) {
        const int32_t d = lane + 32 * i;
        q_reg[i] = (warp_has_head && d < D)
                       ? static_cast<double>(__bfloat162float(
                             q_bf16[token * p.q_token_stride + (head0 + warp) * p.q_head_stride + d]))
                       : 0.0;
    }
}


// Scores of head `warp` against every key of the chunk, into its row of probs.
template <class Traits>
__device__ __forceinline__ void chunk_scores(const double (&q_reg)[Traits::kDimsPerLane],
                                             const __nv_bfloat16* k_tile, double* probs, int32_t count, int32_t D,
                                             int32_t warp, int32_t lane, double scale) {
    for (int32_t j = 0; j < count; ++j) {
        double partial = 0.0;
#pragma unroll
        for (int32_t i = 0; i < Traits::kDimsPerLane; ++i) {
            const int32_t d = lane + 32 * i;
            if (d < D) partial += q_reg[i] * static_cast<double>(__bfloat162float(k_tile[j * D + d]));
        }
        const double score = warp_sum(partial) * scale;
        if (lane == 0) probs[warp * Traits::kKeysPerChunk + j] = score;
    }
}


// acc[head][d] = acc * alpha + sum_j p[head][j] v[j][d].
template <class Traits>
__device__ __forceinline__ void accumulate_values(double (&acc)[Traits::kAccPerThread], const double* probs,
                                                  const double* rescale, const __nv_bfloat16* v_tile, int32_t count,
                                                  int32_t heads, int32_t D) {
#pragma unroll
    for (int32_t i = 0; i < Traits::kAccPerThread; ++i) {
        const int32_t e = threadIdx.x + i * Traits::kThreads;
        if (e >= heads * D) continue;
        const int32_t h = e / D;
        const int32_t d = e % D;
        double sum = acc[i] * rescale[h];
        for (int32_t j = 0; j < count; ++j)
            sum += probs[h * Traits::kKeysPerChunk + j] * static_cast<double>(__bfloat162float(v_tile[j * D + d]));
        acc[i] = sum;
    }
}


// The normalised fp64 output rows and the optional LSE (rows without a visible key: zeros, -inf).
template <class Traits>
__device__ __forceinline__ void write_output(const wideattn_prefill_params& p,
                                             const double (&acc)[Traits::kAccPerThread], const double* running_max,
                                             const double* running_sum, int32_t token, int32_t head0, int32_t heads,
                                             int32_t D) {
    double* out = static_cast<double*>(p.o);
#pragma unroll
    for (int32_t i = 0; i < Traits::kAccPerThread; ++i) {
        const int32_t e = threadIdx.x + i * Traits::kThreads;
        if (e >= heads * D) continue;
        const int32_t h = e / D;
        const int32_t d = e % D;
        const double total = running_sum[h];
        out[token * p.o_token_stride + (head0 + h) * p.o_head_stride + d] = total > 0.0 ? acc[i] / total : 0.0;
    }
    if (p.lse && threadIdx.x < heads) {
        const double total = running_sum[threadIdx.x];
        static_cast<double*>(p.lse)[(head0 + threadIdx.x) * p.lse_head_stride + token] =
            total > 0.0 ? running_max[threadIdx.x] + log(total) : -INFINITY;
    }
}

// Keys visible to the tile's query: 0 .. context + i (bottom-right causal), never past the keys
// the block table can address.
__device__ __forceinline__ int32_t visible_keys(const wideattn_prefill_params& p, const TokenTile& tile) {
    const CausalKeys causal = causal_keys(p, tile);  // seq_lens_k clamped to [0, addressable]
    return causal.visible(1);
}

}  // namespace
}  // namespace wideattn

extern "C" __global__ void __launch_bounds__(wideattn::ReferenceF64Traits::kThreads, 1)
wideattn_reference_f64(const wideattn_prefill_params p, const wideattn::KFromV kfv) {
    using namespace wideattn;
    using Traits = ReferenceF64Traits;
    using Plan = Traits::SmemPlan;
    extern __shared__ __align__(16) unsigned char smem[];
    __nv_bfloat16* k_tile = reinterpret_cast<__nv_bfloat16*>(smem + Plan::kKvChunks);
    __nv_bfloat16* v_tile = k_tile + Traits::kKeysPerChunk * p.head_dim;
    double* probs = reinterpret_cast<double*>(smem + Plan::kProbs);  // [head][key]
    double* running_max = reinterpret_cast<double*>(smem + Plan::kRunningMax);
    double* running_sum = reinterpret_cast<double*>(smem + Plan::kRunningSum);
    double* rescale = reinterpret_cast<double*>(smem + Plan::kRescale);

    const TokenTile tile = find_token_tile(p, 1, blockIdx.x);
    if (!tile.found) return;

    const int32_t group = p.num_q_heads / p.num_kv_heads;
    const int32_t heads = heads_per_block(group, Traits::kMaxHeadsPerBlock);
    const int32_t head0 = blockIdx.y * heads;
    const int32_t kv_head = head0 / group;
    const int32_t D = p.head_dim;
    const int32_t token = tile.q_begin + tile.tile_begin;
    const int32_t visible = visible_keys(p, tile);

    const int32_t warp = threadIdx.x / 32;
    const int32_t lane = threadIdx.x % 32;
    const bool warp_has_head = warp < heads;

    double q_reg[Traits::kDimsPerLane];
    load_q_row<Traits>(p, token, head0, warp, lane, warp_has_head, D, q_reg);

    double acc[Traits::kAccPerThread];
#pragma unroll
    for (int32_t i = 0; i < Traits::kAccPerThread; ++i) acc[i] = 0.0;
    if (threadIdx.x < Traits::kMaxHeadsPerBlock) {
        running_max[threadIdx.x] = -INFINITY;
        running_sum[threadIdx.x] = 0.0;
    }

    const int32_t* table_row = p.block_table + tile.seq * p.block_table_stride;
    const double scale = static_cast<double>(p.softmax_scale);
    const bool rebuild_k = k_from_v_call(p.flags);
    for (int32_t key_begin = 0; key_begin < visible; key_begin += Traits::kKeysPerChunk) {
        const int32_t count = min(Traits::kKeysPerChunk, visible - key_begin);
        __syncthreads();  // previous chunk fully consumed
        if (!rebuild_k)
            load_kv_chunk<Traits>(k_tile, static_cast<const __nv_bfloat16*>(p.k_cache), p.k_block_stride,
                                  p.k_slot_stride, kv_head * p.k_head_stride, table_row, p.block_size, p.num_blocks,
                                  key_begin, count, D);
        load_kv_chunk<Traits>(v_tile, static_cast<const __nv_bfloat16*>(p.v_cache), p.v_block_stride,
                      p.v_slot_stride, kv_head * p.v_head_stride, table_row, p.block_size, p.num_blocks, key_begin,
                      count, D);
        __syncthreads();
        if (rebuild_k) {
            rebuild_k_chunk<Traits>(k_tile, v_tile, kfv, key_begin, count, D);
            __syncthreads();
        }

        if (warp_has_head) chunk_scores<Traits>(q_reg, k_tile, probs, count, D, warp, lane, scale);
        __syncthreads();

        // Online softmax update, one thread per head.
        if (threadIdx.x < heads) {
            double* row = probs + threadIdx.x * Traits::kKeysPerChunk;
            double chunk_max = -INFINITY;
            for (int32_t j = 0; j < count; ++j) chunk_max = fmax(chunk_max, row[j]);
            const double new_max = fmax(running_max[threadIdx.x], chunk_max);
            const double alpha = exp(running_max[threadIdx.x] - new_max);  // exp(-inf) = 0 at start
            double chunk_sum = 0.0;
            for (int32_t j = 0; j < count; ++j) {
                row[j] = exp(row[j] - new_max);
                chunk_sum += row[j];
            }
            running_sum[threadIdx.x] = running_sum[threadIdx.x] * alpha + chunk_sum;
            running_max[threadIdx.x] = new_max;
            rescale[threadIdx.x] = alpha;
        }
        __syncthreads();

        accumulate_values<Traits>(acc, probs, rescale, v_tile, count, heads, D);
    }
    __syncthreads();

    write_output<Traits>(p, acc, running_max, running_sum, token, head0, heads, D);
}
