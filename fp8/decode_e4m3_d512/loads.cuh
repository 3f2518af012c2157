// loads.cuh - the loads of the single-token e4m3 decode kernel (decode_e4m3_d512): the block's
// Q rows (bf16, scaled by one power of two per block and stored as f16, which is exact for every
// value the scores can feel; also the multi-token verify_e4m3_d512's), and each warp's K/V
// sub-tiles by cp.async into its private ring.
//
// Shared-memory layouts: a K or V half-stage is [16 keys][512 codes], a Q row [512 f16]; in both
// the 16-byte vector v of row r sits at position v ^ (r % 8), so the 8 rows an ldmatrix matrix
// (or a quad's 8-byte Q load) reads fall in distinct banks.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cfloat>
#include <cstdint>

#include "fp8/decode_e4m3_d512/traits.h"
#include "fp8/mma_e4m3_d512/fragments.cuh"
#include "kernels/common/page_bounds.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "wideattn.h"

namespace wideattn::decode_e4m3 {

constexpr uint32_t kFullMask = 0xffffffffu;

// Byte offset of 16-byte vector `vec` of row `row` in a swizzled layout of `kRowBytes` rows.
template <int32_t kRowBytes, class Traits>
__device__ __forceinline__ uint32_t swizzled(int32_t row, int32_t vec) {
    return static_cast<uint32_t>(row * kRowBytes + ((vec ^ (row % Traits::kSwizzleRows)) * Traits::kVecBytes));
}

using ptx::bf16_high;
using ptx::bf16_low;
using mma_e4m3::e4m3x4_to_f16x2x2;  // the e4m3 decode (fp8/mma_e4m3_d512/fragments.cuh)

// The largest of the block's per-warp values in shared memory (kWarps floats at `slots`, written
// before the caller's last block barrier).
template <class Traits>
__device__ __forceinline__ float max_of_warp_slots(uint32_t slots) {
    float amax = 0.0f;
#pragma unroll
    for (int32_t w = 0; w < Traits::kWarps; ++w) {
        float m;
        asm volatile("ld.shared.f32 %0, [%1];\n" : "=f"(m) : "r"(slots + 4 * w) : "memory");
        amax = fmaxf(amax, m);
    }
    return amax;
}

// The largest finite |x| of eight bf16 (NaN and inf do not set the scale; they reach the scores
// as they are).
__device__ __forceinline__ float finite_amax_bf16x8(const uint4& w) {
    const uint32_t words[4] = {w.x, w.y, w.z, w.w};
    float m = 0.0f;
#pragma unroll
    for (int32_t i = 0; i < 4; ++i) {
        const float lo = fabsf(bf16_low(words[i])), hi = fabsf(bf16_high(words[i]));
        if (lo <= FLT_MAX) m = fmaxf(m, lo);
        if (hi <= FLT_MAX) m = fmaxf(m, hi);
    }
    return m;
}

__device__ __forceinline__ uint32_t pack_f16x2(float low, float high) {
    const __half2 h = __floats2half2_rn(low, high);
    return *reinterpret_cast<const uint32_t*>(&h);
}

// The source row of block row `row`: Traits::kRows = kTileTokens x kGroup rows, row r being head
// r % kGroup of the tile's token r / kGroup (the single-token kernel: the heads of its token).
template <class Traits>
__device__ __forceinline__ int32_t row_token(int32_t row) {
    return Traits::kTileTokens == 1 ? 0 : row / Traits::kGroup;
}
template <class Traits>
__device__ __forceinline__ int32_t row_head(int32_t row) {
    return Traits::kTileTokens == 1 ? row : row % Traits::kGroup;
}

// Q vectors of a block: 16 bytes (8 bf16) each, kSourceVecsPerRow a row.
template <class Traits>
constexpr int32_t kQSourceVecsPerRow = Traits::kHeadDim * 2 / Traits::kVecBytes;

// Vector v of the block's bf16 Q rows (row v / kQSourceVecsPerRow, vector v % kQSourceVecsPerRow;
// tokens first_token .. first_token + tokens - 1, the heads of `kv_head`): its 16 bytes, zero for
// a row of a token past `tokens`.
template <class Traits>
__device__ __forceinline__ uint4 load_q_vector(const wideattn_prefill_params& p, int64_t first_token, int32_t tokens,
                                               int32_t kv_head, int32_t v) {
    const int32_t row = v / kQSourceVecsPerRow<Traits>;
    const int32_t vec = v % kQSourceVecsPerRow<Traits>;
    const int32_t token = row_token<Traits>(row);
    const __nv_bfloat16* src = static_cast<const __nv_bfloat16*>(p.q) + (first_token + token) * p.q_token_stride +
                               (int64_t{kv_head} * Traits::kGroup + row_head<Traits>(row)) * p.q_head_stride + vec * 8;
    return token < tokens ? __ldg(reinterpret_cast<const uint4*>(src)) : make_uint4(0u, 0u, 0u, 0u);
}

// Reads the block's Q rows (tokens first_token .. first_token + tokens - 1, the heads of
// `kv_head`; rows of tokens past `tokens` are zero), scales them by 2^-shift with shift chosen
// from the block's largest finite |q| (Traits::kQTopLog2) and stores them as f16 into q_shared.
// Returns 2^shift, the factor the scores take back. Every thread of the block calls it; it ends
// with a block barrier after which Q is readable.
template <class Traits>
__device__ __forceinline__ float load_q(const wideattn_prefill_params& p, uint32_t q_shared, uint32_t amax_slots,
                                        int64_t first_token, int32_t tokens, int32_t kv_head) {
    constexpr int32_t kSourceVecsPerRow = kQSourceVecsPerRow<Traits>;
    constexpr int32_t kVecs = Traits::kRows * kSourceVecsPerRow;
    constexpr int32_t kPerThread = kVecs / Traits::kThreads;
    static_assert(kVecs % Traits::kThreads == 0, "every thread converts whole vectors");
    const int32_t thread = static_cast<int32_t>(threadIdx.x);
    uint4 raw[kPerThread];
    float amax = 0.0f;
#pragma unroll
    for (int32_t i = 0; i < kPerThread; ++i) {
        raw[i] = load_q_vector<Traits>(p, first_token, tokens, kv_head, thread + i * Traits::kThreads);
        amax = fmaxf(amax, finite_amax_bf16x8(raw[i]));
    }
#pragma unroll
    for (int32_t offset = Traits::kWarpSize / 2; offset > 0; offset /= 2)
        amax = fmaxf(amax, __shfl_xor_sync(kFullMask, amax, offset));
    const int32_t warp = thread / Traits::kWarpSize;
    if (thread % Traits::kWarpSize == 0)
        asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(amax_slots + 4 * warp), "f"(amax) : "memory");
    __syncthreads();
    const float block_amax = max_of_warp_slots<Traits>(amax_slots);
    constexpr int32_t kFloatBias = 127;
    constexpr int32_t kMantissaBits = 23;
    int32_t shift = 0;
    if (block_amax > 0.0f) {
        const int32_t exponent =
            static_cast<int32_t>((__float_as_uint(block_amax) >> kMantissaBits) & 0xffu) - kFloatBias;
        shift = max(-Traits::kQShiftLimit, min(Traits::kQShiftLimit, exponent - Traits::kQTopLog2));
    }
    const float down = __uint_as_float(static_cast<uint32_t>(kFloatBias - shift) << kMantissaBits);  // 2^-shift
    const float up = __uint_as_float(static_cast<uint32_t>(kFloatBias + shift) << kMantissaBits);    // 2^shift
#pragma unroll
    for (int32_t i = 0; i < kPerThread; ++i) {
        const int32_t v = thread + i * Traits::kThreads;
        const int32_t row = v / kSourceVecsPerRow;
        const int32_t vec = v % kSourceVecsPerRow;
        const uint32_t w[4] = {raw[i].x, raw[i].y, raw[i].z, raw[i].w};
        uint32_t h[4];
#pragma unroll
        for (int32_t j = 0; j < 4; ++j) h[j] = pack_f16x2(bf16_low(w[j]) * down, bf16_high(w[j]) * down);
        const uint32_t address = q_shared + swizzled<Traits::kQRowBytes, Traits>(row, vec);
        asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(h[0]), "r"(h[1]), "r"(h[2]),
                     "r"(h[3])
                     : "memory");
    }
    __syncthreads();
    return up;
}

// The e4m3-Q form of load_q: the block's Q rows as e4m3 codes, converted to f16 exactly into
// q_shared (rows of tokens past `tokens` zero); returns *q_scale, the factor the scores take
// back. Ends with a block barrier.
template <class Traits>
__device__ __forceinline__ float load_q_codes(const wideattn_prefill_params& p, uint32_t q_shared,
                                              int64_t first_token, int32_t tokens, int32_t kv_head) {
    constexpr int32_t kSourceVecsPerRow = Traits::kHeadDim / Traits::kVecBytes;  // 16 codes per vector
    constexpr int32_t kVecs = Traits::kRows * kSourceVecsPerRow;
    constexpr int32_t kPerThread = kVecs / Traits::kThreads;
    static_assert(kVecs % Traits::kThreads == 0, "every thread converts whole vectors");
    const int32_t thread = static_cast<int32_t>(threadIdx.x);
#pragma unroll
    for (int32_t i = 0; i < kPerThread; ++i) {
        const int32_t v = thread + i * Traits::kThreads;
        const int32_t row = v / kSourceVecsPerRow;
        const int32_t vec = v % kSourceVecsPerRow;
        const int32_t token = row_token<Traits>(row);
        const unsigned char* src = static_cast<const unsigned char*>(p.q) + (first_token + token) * p.q_token_stride +
                                   (int64_t{kv_head} * Traits::kGroup + row_head<Traits>(row)) * p.q_head_stride +
                                   vec * Traits::kVecBytes;
        const uint4 raw = token < tokens ? __ldg(reinterpret_cast<const uint4*>(src)) : make_uint4(0u, 0u, 0u, 0u);
        const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
        uint32_t h[8];
#pragma unroll
        for (int32_t j = 0; j < 4; ++j) e4m3x4_to_f16x2x2(w[j], h[2 * j], h[2 * j + 1]);
#pragma unroll
        for (int32_t half = 0; half < 2; ++half) {
            const uint32_t address = q_shared + swizzled<Traits::kQRowBytes, Traits>(row, 2 * vec + half);
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(h[4 * half]),
                         "r"(h[4 * half + 1]), "r"(h[4 * half + 2]), "r"(h[4 * half + 3])
                         : "memory");
        }
    }
    __syncthreads();
    return __ldg(p.q_scale);
}

// The block's Q as f16 in q_shared, by load_q_codes (kQIsE4m3: Q already e4m3) or load_q (bf16
// Q); returns the factor the scores take back. Ends with a block barrier.
template <class Traits, bool kQIsE4m3>
__device__ __forceinline__ float load_block_q(const wideattn_prefill_params& p, uint32_t q_shared,
                                              uint32_t amax_slots, int64_t first_token, int32_t tokens,
                                              int32_t kv_head) {
    if constexpr (kQIsE4m3)
        return load_q_codes<Traits>(p, q_shared, first_token, tokens, kv_head);
    else
        return load_q<Traits>(p, q_shared, amax_slots, first_token, tokens, kv_head);
}

// One warp's key stream: sub-tiles warp, warp + kWarps, ... of the block's keys [0, kv_end),
// each 16 keys of one page, K and V codes copied by cp.async (lane l copies the 16-byte vector l
// of every key row). Keys past kv_end and pages whose block-table entry lies outside the cache
// are zero-filled without a read.
template <class Traits>
struct WarpStream {
    const unsigned char* k_base;  // k_cache at this KV head
    const unsigned char* v_base;
    const int32_t* table_row;
    int32_t kv_end;
    int32_t lane;

    __device__ __forceinline__ void init(const wideattn_prefill_params& p, int32_t kv_head, const int32_t* row,
                                         int32_t end, int32_t lane_index) {
        k_base = static_cast<const unsigned char*>(p.k_cache) + kv_head * p.k_head_stride;
        v_base = static_cast<const unsigned char*>(p.v_cache) + kv_head * p.v_head_stride;
        table_row = row;
        kv_end = end;
        lane = lane_index;
    }

    // The block-table entry of sub-tile `sub` (the page its 16 keys lie in; a sub-tile never
    // straddles a page: block_size is a multiple of 16); the page's index by a shift where
    // `page_shift` >= 0 (page_shift_of, kernels/common/page_bounds.cuh), else by the division.
    __device__ __forceinline__ int32_t page_of(const wideattn_prefill_params& p, int32_t sub,
                                               int32_t page_shift = -1) const {
        return __ldg(table_row + page_index_of(sub * Traits::kSubTileKeys, p.block_size, page_shift));
    }

    // Issues the copies of the K (kValue false) or V codes of sub-tile `sub` into `chunk`.
    template <bool kValue>
    __device__ __forceinline__ void issue(const wideattn_prefill_params& p, int32_t sub, uint32_t chunk) const {
        issue_from_page<kValue>(p, sub, chunk, page_of(p, sub));
    }

    // issue() with the sub-tile's block-table entry `page` read earlier (page_of), so the copies
    // do not wait for that load.
    template <bool kValue>
    __device__ __forceinline__ void issue_from_page(const wideattn_prefill_params& p, int32_t sub, uint32_t chunk,
                                                    int32_t page) const {
        const int32_t key0 = sub * Traits::kSubTileKeys;
        if constexpr (kValue && Traits::kVTransposed)
            copy_transposed_v(p, key0, page, chunk);
        else
            copy_rows<kValue, Traits::kSubTileKeys>(p, key0, page, chunk, 0);
    }

    // Copies the V codes of the 16 keys key0 .. key0 + 15 (one interleaved group of one page, whose
    // block-table entry is `page`) from the transposed layout (kernels/common/v_transposed.h): the
    // group's 16 bytes of dim d land at byte d x 16 of `chunk` ([dims][16 positions], unswizzled),
    // lane l copying dims l, l + 32, ... A page outside the cache lands as zeros without a read;
    // positions of keys past kv_end are copied as they are (the page is the call's) and masked
    // where they are read (subtile_pv_transposed).
    __device__ __forceinline__ void copy_transposed_v(const wideattn_prefill_params& p, int32_t key0, int32_t page,
                                                      uint32_t chunk) const {
        const int32_t slot0 = key0 % p.block_size;  // a multiple of 16: the group's first position
        const bool in_cache = page_in_cache(page, p.num_blocks);
        const int64_t page_safe = in_cache ? page : 0;
        const unsigned char* src = v_base + page_safe * p.v_block_stride + int64_t{lane} * p.block_size + slot0;
        const int64_t lane_step = int64_t{Traits::kWarpSize} * p.block_size;
#pragma unroll
        for (int32_t i = 0; i < Traits::kHeadDim / Traits::kWarpSize; ++i) {
            const int32_t dim = lane + i * Traits::kWarpSize;
            ptx::cp_async_16(chunk + dim * Traits::kVecBytes, in_cache ? src : v_base,
                             in_cache ? Traits::kVecBytes : 0);
            src += lane_step;
        }
    }

    // copy_rows of a sub-tile's V codes (engine layout) with fewer instructions where its 16 keys
    // are all valid and in the cache: the first key's slot by a mask where the page holds a power
    // of two of keys (`page_shift` >= 0), no per-key zero-fill selects. Any other sub-tile by
    // copy_rows. The same copies.
    __device__ __forceinline__ void copy_value_rows_lean(const wideattn_prefill_params& p, int32_t key0, int32_t page,
                                                         uint32_t chunk, int32_t page_shift) const {
        if (!page_in_cache(page, p.num_blocks) || kv_end - key0 < Traits::kSubTileKeys) {
            copy_rows<true, Traits::kSubTileKeys>(p, key0, page, chunk, 0);
            return;
        }
        const unsigned char* src = v_base + int64_t{page} * p.v_block_stride +
                                   int64_t{page_slot_of(key0, p.block_size, page_shift)} * p.v_slot_stride +
                                   lane * Traits::kVecBytes;
#pragma unroll
        for (int32_t key = 0; key < Traits::kSubTileKeys; ++key) {
            ptx::cp_async_16_full(chunk + swizzled<Traits::kRowBytes, Traits>(key, lane), src);
            src += p.v_slot_stride;
        }
    }

    // Copies keys key0 .. key0 + kKeys - 1 (in one page, whose block-table entry is `page`) of the K
    // (kValue false) or V codes into rows first_row .. first_row + kKeys - 1 of `chunk`.
    template <bool kValue, int32_t kKeys>
    __device__ __forceinline__ void copy_rows(const wideattn_prefill_params& p, int32_t key0, int32_t page,
                                              uint32_t chunk, int32_t first_row) const {
        const int32_t page_index = key0 / p.block_size;
        const int32_t slot0 = key0 - page_index * p.block_size;
        const bool in_cache = page_in_cache(page, p.num_blocks);
        const int32_t keys = in_cache ? min(kKeys, kv_end - key0) : 0;
        const int64_t page_safe = in_cache ? page : 0;
        const unsigned char* base = kValue ? v_base : k_base;
        const int64_t slot_stride = kValue ? p.v_slot_stride : p.k_slot_stride;
        const unsigned char* src = base + page_safe * (kValue ? p.v_block_stride : p.k_block_stride) +
                                   int64_t{slot0} * slot_stride + lane * Traits::kVecBytes;
#pragma unroll
        for (int32_t key = 0; key < kKeys; ++key) {
            const bool valid = key < keys;
            ptx::cp_async_16(chunk + swizzled<Traits::kRowBytes, Traits>(first_row + key, lane), valid ? src : base,
                             valid ? Traits::kVecBytes : 0);
            src += slot_stride;
        }
    }
};

}  // namespace wideattn::decode_e4m3
