// k_from_v_tables.cuh - the device pieces shared by the kernels that rebuild K from V
// (decode_e4m3kfv_d512, decode_bf16kfv_d512): the shared-memory tables, k_norm's weight (head_dim
// fp32) and inv_freq of the head_dim / 2 frequencies (fp32, 0 from rotary_dims / 2 on), staged
// once per block, one frequency and two weights per thread, and read back as vectors by the K
// build; the caller's cos / sin table in global memory (CosSinTable), read as 8-byte words of two
// frequencies, its rows asked of the L2 ahead of their reads; and the rotation of a lane's bf16
// pairs (rope_rotate_bf16x2, from the formula's cos / sin or from the table's).
#pragma once

#include <cstdint>

#include "kernels/common/k_from_v.h"
#include "kernels/common/ptx_mma.cuh"

namespace wideattn {

constexpr uint32_t kKFromVTableEntryBytes = sizeof(float);  // one table entry in shared memory
constexpr uint32_t kKFromVBf16EntryBytes = 2;                // one entry of a bf16 table of k_norm weights

// Whether an fp32 value is a bf16 value (its low 16 bits are zero): a k_norm weight the K-from-V
// decode kernels may multiply by in bf16x2.
__device__ __forceinline__ bool is_bf16_value(float x) { return (__float_as_uint(x) & 0xffffu) == 0; }

// How a K-from-V decode kernel builds a piece of K from V: scaled only (no dim of it rotates),
// rotated with the formula's cos / sin, rotated with the caller's table (CosSinTable).
enum class KFromVBuild { kScale, kRotate, kRotateTable };

// Stages the two tables at `weight` and `freq` (k_from_v_inv_freq: the caller's entries below
// rotary_dims / 2, or computed from rope_theta; 0 past them), read within their validated extents
// (head_dim and rotary_dims / 2 entries). Needs Traits::kThreads == head_dim / 2. Returns the
// thread's two weights. Visible to the block after its next barrier.
template <class Traits>
__device__ __forceinline__ float2 stage_k_from_v_tables(const KFromV& kfv, uint32_t weight, uint32_t freq) {
    static_assert(Traits::kHeadDim == 2 * Traits::kThreads, "one frequency and two weights per thread");
    const int32_t thread = static_cast<int32_t>(threadIdx.x);
    // Two scalar loads: the table is only 4-byte aligned (dispatch/validation.cpp).
    const float2 w = make_float2(__ldg(kfv.k_norm_scale + 2 * thread), __ldg(kfv.k_norm_scale + 2 * thread + 1));
    const float inv_freq = k_from_v_inv_freq(kfv, thread, Traits::kHeadDim);
    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n" ::"r"(weight + 2 * kKFromVTableEntryBytes * thread), "f"(w.x),
                 "f"(w.y)
                 : "memory");
    asm volatile("st.shared.f32 [%0], %1;\n" ::"r"(freq + kKFromVTableEntryBytes * thread), "f"(inv_freq) : "memory");
    return w;
}

// The description's cos / sin table (wideattn_k_from_v.cos_sin, kernels/common/k_from_v.h) as
// the decode kernels read it: a lane's two frequencies d, d + 1 (d even) of one key as one 8-byte
// word, (cos, sin) of d in .x and of d + 1 in .y, cos in the low half. The rows hold whole pairs
// (rotary_dims a multiple of 4) and the table is 8-byte aligned (dispatch/validation.cpp).
struct CosSinTable {
    const unsigned char* base;  // NULL: no table (every key takes the formula)
    int64_t row_bytes;          // rotary_dims / 2 entries of kCosSinEntryBytes
    int32_t positions;          // the rows: positions 0 .. positions - 1
    int32_t frequencies;        // rotary_dims / 2: the frequencies that rotate

    __device__ __forceinline__ static CosSinTable of(const KFromV& kfv) {
        return {static_cast<const unsigned char*>(kfv.cos_sin),
                static_cast<int64_t>(kfv.rotary_dims / 2) * static_cast<int64_t>(kCosSinEntryBytes),
                kfv.cos_sin ? kfv.cos_sin_positions : 0, kfv.rotary_dims / 2};
    }

    // Whether the table holds positions position0 .. position0 + keys - 1 (keys >= 1).
    __device__ __forceinline__ bool holds(int32_t position0, int32_t keys) const {
        return base != nullptr && position0 >= 0 &&
               static_cast<int64_t>(position0) + keys <= static_cast<int64_t>(positions);
    }

    // Asks the L2 for the rows of positions position0 .. position0 + keys - 1 that the table
    // holds (a 128-byte line a lane, the warp's lanes together), so that pair() finds them there
    // when the K build reads them: the rows of a sub-tile a step or more ahead. Only addresses
    // inside the table are named (the first line by the first row's own address); nothing is read
    // into a register and nothing waits for it.
    __device__ __forceinline__ void prefetch_rows(int32_t position0, int32_t keys, int32_t lane) const {
        constexpr int64_t kLineBytes = 128;
        constexpr int32_t kLanes = 32;
        if (base == nullptr || position0 < 0 || position0 >= positions) return;
        const int64_t begin = static_cast<int64_t>(position0) * row_bytes;
        const int64_t end = begin + static_cast<int64_t>(min(keys, positions - position0)) * row_bytes;
        const int64_t into_first_line = (reinterpret_cast<uintptr_t>(base) + begin) % kLineBytes;
        for (int64_t offset = begin - into_first_line + lane * kLineBytes; offset < end; offset += kLanes * kLineBytes)
            ptx::prefetch_l2(base + max(offset, begin));
    }

    // The word of frequencies d, d + 1 (d even) at `position`, clamped to the table's last row (a
    // key past kv_end in a sub-tile the table holds up to kv_end: its V is zero-filled and its
    // score masked, so the entry it reads does not matter). From rotary_dims / 2 on, (cos 1, sin 0):
    // the formula's angle 0.
    __device__ __forceinline__ uint2 pair(int32_t position, int32_t d) const {
        constexpr uint32_t kCosOneSinZero = 0x3f80u;  // bf16 1.0 in the low half, +0 in the high
        if (d >= frequencies) return make_uint2(kCosOneSinZero, kCosOneSinZero);
        const int64_t row = min(position, positions - 1);
        return __ldg(reinterpret_cast<const uint2*>(base + row * row_bytes + d * static_cast<int64_t>(kCosSinEntryBytes)));
    }
};

// At step i of a K-from-V decode warp's key loop (its sub-tiles warp, warp + kWarps, ..., `count`
// of them; position first_position + key), the table rows of its sub-tile i + kCosSinRowsAhead
// asked of the L2 (CosSinTable::prefetch_rows), when that sub-tile exists; nothing when the
// kernel's Traits::kCosSinRowsAhead is 0.
template <class Traits>
__device__ __forceinline__ void prefetch_cos_sin_ahead(const CosSinTable& table, int32_t first_position, int32_t warp,
                                                       int32_t i, int32_t count, int32_t lane) {
    if constexpr (Traits::kCosSinRowsAhead > 0) {
        const int32_t local = i + Traits::kCosSinRowsAhead;
        if (local < count)
            table.prefetch_rows(first_position + (warp + local * Traits::kWarps) * Traits::kSubTileKeys,
                                Traits::kSubTileKeys, lane);
    }
}

// The low halves of words a and b as one word (a's low half in its low half), and their high
// halves likewise: two PRMTs.
__device__ __forceinline__ void low_and_high_halves(uint32_t a, uint32_t b, uint32_t* lows, uint32_t* highs) {
    constexpr uint32_t kLowHalves = 0x5410u, kHighHalves = 0x7632u;
    *lows = __byte_perm(a, b, kLowHalves);
    *highs = __byte_perm(a, b, kHighHalves);
}

// The bf16x2 cos pair (c_d low, c_d+1 high) and sin pair of a CosSinTable word.
__device__ __forceinline__ void cos_sin_pairs(uint2 word, uint32_t* c, uint32_t* s) {
    low_and_high_halves(word.x, word.y, c, s);
}

// k_from_v.h's rope_rotate of two RoPE pairs with their bf16x2 cos pair c and sin pair s: K of the
// first dims bf16(bf16(x c) - bf16(x' s)) in *k_first, of the partners bf16(bf16(x' c) +
// bf16(x s)) in *k_second (rotate_half's bf16(-x' s) is -bf16(x' s): round to nearest even is
// odd-symmetric), each step by mul / sub / add.rn.bf16x2 (the exact result rounded once, as the
// fp32 step then round_to_bf16 for bf16 operands).
__device__ __forceinline__ void rope_rotate_bf16x2(uint32_t x_first, uint32_t x_second, uint32_t c, uint32_t s,
                                                   uint32_t* k_first, uint32_t* k_second) {
    *k_first = ptx::sub_bf16x2(ptx::mul_bf16x2(x_first, c), ptx::mul_bf16x2(x_second, s));
    *k_second = ptx::add_bf16x2(ptx::mul_bf16x2(x_second, c), ptx::mul_bf16x2(x_first, s));
}

// The same with the table's word for the two frequencies.
__device__ __forceinline__ void rope_rotate_bf16x2(uint32_t x_first, uint32_t x_second, uint2 cos_sin,
                                                   uint32_t* k_first, uint32_t* k_second) {
    uint32_t c, s;
    cos_sin_pairs(cos_sin, &c, &s);
    rope_rotate_bf16x2(x_first, x_second, c, s, k_first, k_second);
}

// k_from_v.h's rope_rotate of two RoPE pairs at once: x_first holds x of dims d, d + 1 (bf16
// pair), x_second their partners d + D/2, d + D/2 + 1; inv_freq0 / inv_freq1 the frequencies of
// dims d and d + 1. Returns K of the first dims in *k_first and of the partners in *k_second:
// K as above, with cos / sin by the formula: rope_cos_sin_reduced, the cos and the sin of the two
// frequencies rounded by one cvt each.
__device__ __forceinline__ void rope_rotate_bf16x2(uint32_t x_first, uint32_t x_second, int32_t position,
                                                   float inv_freq0, float inv_freq1, uint32_t* k_first,
                                                   uint32_t* k_second) {
    const RopeCosSin cs0 = rope_cos_sin_reduced_unrounded(rope_angle(position, inv_freq0));
    const RopeCosSin cs1 = rope_cos_sin_reduced_unrounded(rope_angle(position, inv_freq1));
    rope_rotate_bf16x2(x_first, x_second, ptx::pack_bf16x2(cs0.c, cs1.c), ptx::pack_bf16x2(cs0.s, cs1.s), k_first,
                       k_second);
}

}  // namespace wideattn
