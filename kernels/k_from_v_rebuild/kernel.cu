// kernel.cu - the K-from-V rebuild kernel (wideattn_k_from_v_rebuild, include/wideattn.h): for
// each key of a K-from-V call, its K rebuilt from its V row with the arithmetic and the rounding
// steps of kernels/common/k_from_v.h (bf16(V w), then the rotation with the caller's cos / sin
// table where it holds the key's position, else rope_cos_sin_reduced's values: the bits of the
// K-from-V decode kernels), written with the V row as bf16 into a K + V cache, so a prefill kernel
// over K + V serves the call. Per key and KV head one V row read (1 KiB bf16, 512 B e4m3) and two
// 1 KiB rows written; the K build is a few hundred fp32 operations a lane. It runs well below the
// copy bandwidth (~1.3 TB/s effective at 16k keys x 4 heads on the H200: NOTES.md), a small share
// of the attention that follows.
//
// Metadata is distrusted as in the attention kernels (docs/design.md, "Metadata the kernels
// distrust"): a sequence's length is clamped to what both block-table rows address, a source page
// outside the cache reads as zeros, and a destination page outside the out caches is skipped.
#include <cstdint>

#include "fp8/codec/e4m3.h"
#include "kernels/common/k_from_v.h"
#include "kernels/common/page_bounds.cuh"
#include "kernels/k_from_v_rebuild/traits.h"
#include "wideattn.h"

namespace wideattn::k_from_v_rebuild {

using Traits = KFromVRebuildTraits;
constexpr int32_t kDims = Traits::kDimsPerLane;

// Eight bf16 (16 bytes) as the fp32 values they stand for.
__device__ __forceinline__ void unpack_bf16x8(uint4 word, float* out) {
    const uint32_t w[4] = {word.x, word.y, word.z, word.w};
#pragma unroll
    for (int32_t i = 0; i < 4; ++i) {
        out[2 * i] = bf16_bits_value(w[i] & 0xffffu);
        out[2 * i + 1] = bf16_bits_value(w[i] >> 16);
    }
}

// Eight e4m3 codes (8 bytes) dequantised: fp32(code value x scale), one rounding.
__device__ __forceinline__ void unpack_e4m3x8(uint2 word, float scale, float* out) {
    const uint32_t w[2] = {word.x, word.y};
#pragma unroll
    for (int32_t i = 0; i < kDims; ++i)
        out[i] = fp8::e4m3_to_float(static_cast<uint8_t>(w[i / 4] >> (8 * (i % 4)))) * scale;
}

// A lane's raw V of one key: its two 16-byte bf16 vectors (dims first.., kHalfDim + first..), or
// for an e4m3 V its two 8-byte code vectors in .x / .y of each. Zero: a row outside the cache.
struct RawRow {
    uint4 lo{}, hi{};
};

// Issues the loads of a lane's V at element offset `row` of the V cache.
__device__ __forceinline__ RawRow load_row(const wideattn_prefill_params& p, bool e4m3, int64_t row, int32_t first) {
    RawRow raw;
    if (e4m3) {
        const uint8_t* v = static_cast<const uint8_t*>(p.v_cache) + row;
        const uint2 lo = __ldg(reinterpret_cast<const uint2*>(v + first));
        const uint2 hi = __ldg(reinterpret_cast<const uint2*>(v + Traits::kHalfDim + first));
        raw.lo = make_uint4(lo.x, lo.y, 0, 0);
        raw.hi = make_uint4(hi.x, hi.y, 0, 0);
    } else {
        const uint16_t* v = static_cast<const uint16_t*>(p.v_cache) + row;
        raw.lo = __ldg(reinterpret_cast<const uint4*>(v + first));
        raw.hi = __ldg(reinterpret_cast<const uint4*>(v + Traits::kHalfDim + first));
    }
    return raw;
}

// The fp32 values of a RawRow (e4m3: dequantised with `scale`).
__device__ __forceinline__ void unpack_row(const RawRow& raw, bool e4m3, float scale, float* lo, float* hi) {
    if (e4m3) {
        unpack_e4m3x8(make_uint2(raw.lo.x, raw.lo.y), scale, lo);
        unpack_e4m3x8(make_uint2(raw.hi.x, raw.hi.y), scale, hi);
    } else {
        unpack_bf16x8(raw.lo, lo);
        unpack_bf16x8(raw.hi, hi);
    }
}

// Eight values already bf16 (their low 16 bits zero) packed into 16 bytes.
__device__ __forceinline__ uint4 pack_bf16x8(const float* in) {
    uint32_t w[4];
#pragma unroll
    for (int32_t i = 0; i < 4; ++i)
        w[i] = (fp8::float_bits(in[2 * i]) >> 16) | (fp8::float_bits(in[2 * i + 1]) & 0xffff0000u);
    return make_uint4(w[0], w[1], w[2], w[3]);
}

// The bf16 cos / sin of this lane's kDims frequencies (first, first + 1, ...) for the key at
// `position`: the table's entries where it holds the position, else rope_cos_sin_reduced of the
// fp32 angle; (1, 0) from rotary_dims / 2 on (k_from_v.h's k_from_v_cos_sin with the decode
// kernels' formula).
__device__ __forceinline__ void lane_cos_sin(const KFromV& kfv, int32_t position, int32_t first,
                                             const float* inv_freq, RopeCosSin* cs) {
    const bool table = k_from_v_table_holds(kfv, position);
#pragma unroll
    for (int32_t i = 0; i < kDims; ++i) {
        const int32_t frequency = first + i;
        if (2 * frequency >= kfv.rotary_dims) {
            cs[i] = {1.0f, 0.0f};
        } else if (table) {
            cs[i] = k_from_v_table_entry(kfv, position, frequency);
        } else {
            cs[i] = rope_cos_sin_reduced(rope_angle(position, inv_freq[i]));
        }
    }
}

}  // namespace wideattn::k_from_v_rebuild

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 1200
constexpr int32_t kRebuildMinBlocks = wideattn::KFromVRebuildTraits::kMinBlocksPerSmSm120;
#else
constexpr int32_t kRebuildMinBlocks = wideattn::KFromVRebuildTraits::kMinBlocksPerSm;
#endif

extern "C" __global__ void __launch_bounds__(wideattn::KFromVRebuildTraits::kThreads, kRebuildMinBlocks)
wideattn_k_from_v_rebuild_kernel(const wideattn::KFromVRebuildArgs args) {
    using namespace wideattn;
    using namespace wideattn::k_from_v_rebuild;
    const wideattn_prefill_params& p = args.params;
    const KFromV& kfv = args.kfv;
    const wideattn_k_from_v_rebuild_out& out = args.out;
    const int32_t lane = static_cast<int32_t>(threadIdx.x) % Traits::kWarpSize;
    const int32_t warp = static_cast<int32_t>(threadIdx.x) / Traits::kWarpSize;
    const int32_t first = lane * kDims;  // dims first .. first + 7 and their partners + kHalfDim
    const bool e4m3 = p.kv_dtype == WIDEATTN_DTYPE_E4M3;

    // The lane's weights and frequencies, the same for every key it builds.
    float w_lo[kDims], w_hi[kDims], inv_freq[kDims];
#pragma unroll
    for (int32_t i = 0; i < kDims; ++i) {
        w_lo[i] = __ldg(kfv.k_norm_scale + first + i);
        w_hi[i] = __ldg(kfv.k_norm_scale + Traits::kHalfDim + first + i);
        inv_freq[i] = k_from_v_inv_freq(kfv, first + i, Traits::kHeadDim);
    }
    const float v_scale = e4m3 ? __ldg(p.v_scale) : 1.0f;

    // Pages both rows address; a key past them has no page in one of the tables.
    const int64_t pages_per_row = min(p.block_table_stride, out.block_table_stride);
    const int64_t row_keys = pages_per_row * p.block_size;
    const int64_t pairs = static_cast<int64_t>(p.num_seqs) * pages_per_row;
    for (int64_t pair = blockIdx.x; pair < pairs; pair += gridDim.x) {
        const int32_t seq = static_cast<int32_t>(pair / pages_per_row);
        const int64_t page_index = pair % pages_per_row;
        const int64_t keys = min(static_cast<int64_t>(max(__ldg(p.seq_lens_k + seq), 0)), row_keys);
        const int64_t first_key = page_index * p.block_size;
        if (first_key >= keys) continue;
        const int32_t src_page = __ldg(p.block_table + seq * p.block_table_stride + page_index);
        const int32_t dst_page = __ldg(out.block_table + seq * out.block_table_stride + page_index);
        if (!page_in_cache(dst_page, out.num_blocks)) continue;
        const bool src_ok = page_in_cache(src_page, p.num_blocks);  // else its rows read as zeros
        const int32_t page_keys = static_cast<int32_t>(min(static_cast<int64_t>(p.block_size), keys - first_key));
        // The page's rows (slot, head), slot-major, in groups of kRowsInFlight a warp: every row's
        // loads of a group are issued before the first row's arithmetic, and the rows of one slot
        // (the KV heads of a key) share its cos / sin.
        const int32_t heads = p.num_kv_heads;
        const int32_t rows = page_keys * heads;
        int32_t cs_slot = -1;
        RopeCosSin cs[kDims];
        for (int32_t row0 = warp * Traits::kRowsInFlight; row0 < rows;
             row0 += Traits::kWarps * Traits::kRowsInFlight) {
            RawRow raw[Traits::kRowsInFlight];
#pragma unroll
            for (int32_t k = 0; k < Traits::kRowsInFlight; ++k) {
                const int32_t row = row0 + k, slot = row / heads, head = row % heads;
                raw[k] = row < rows && src_ok ? load_row(p, e4m3,
                                                         src_page * p.v_block_stride + slot * p.v_slot_stride +
                                                             head * p.v_head_stride,
                                                         first)
                                              : RawRow{};
            }
#pragma unroll
            for (int32_t k = 0; k < Traits::kRowsInFlight; ++k) {
                const int32_t row = row0 + k, slot = row / heads, head = row % heads;
                if (row >= rows) break;
                if (slot != cs_slot) {
                    lane_cos_sin(kfv, static_cast<int32_t>(first_key + slot), first, inv_freq, cs);
                    cs_slot = slot;
                }
                float v_lo[kDims], v_hi[kDims];
                unpack_row(raw[k], e4m3, v_scale, v_lo, v_hi);
                float k_lo[kDims], k_hi[kDims];
#pragma unroll
                for (int32_t i = 0; i < kDims; ++i) {
                    const float x_lo = k_from_v_scaled(v_lo[i], w_lo[i]);
                    const float x_hi = k_from_v_scaled(v_hi[i], w_hi[i]);
                    k_lo[i] = rope_rotate(x_lo, x_hi, cs[i], true);
                    k_hi[i] = rope_rotate(x_hi, x_lo, cs[i], false);
                    v_lo[i] = round_to_bf16(v_lo[i]);  // exact for a bf16 V
                    v_hi[i] = round_to_bf16(v_hi[i]);
                }
                uint16_t* k_row = static_cast<uint16_t*>(out.k_cache) + dst_page * out.k_block_stride +
                                  slot * out.k_slot_stride + head * out.k_head_stride;
                uint16_t* v_row = static_cast<uint16_t*>(out.v_cache) + dst_page * out.v_block_stride +
                                  slot * out.v_slot_stride + head * out.v_head_stride;
                *reinterpret_cast<uint4*>(k_row + first) = pack_bf16x8(k_lo);
                *reinterpret_cast<uint4*>(k_row + Traits::kHalfDim + first) = pack_bf16x8(k_hi);
                *reinterpret_cast<uint4*>(v_row + first) = pack_bf16x8(v_lo);
                *reinterpret_cast<uint4*>(v_row + Traits::kHalfDim + first) = pack_bf16x8(v_hi);
            }
        }
    }
}
