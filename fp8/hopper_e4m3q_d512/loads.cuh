// loads.cuh - loads of the Hopper-tier 8-bit kernel (wgmma_e4m3q_d512; its e4m3 Q tile and the
// page walk are kernels/common/wgmma_loads.cuh): cp.async of paged e4m3 K tiles into the
// 128-byte-swizzled layout the e4m3 wgmma reads, of paged e4m3 V tiles into a plain staging
// buffer, and the conversion of staged V codes into the 16-bit layout of the P V wgmma (fp16).
// Each thread converts exactly the vectors it loaded, so staging needs no barrier. Each
// warpgroup handles its half of the dims.
#pragma once

#include <cstdint>

#include "fp8/mma_e4m3_d512/fragments.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/wgmma_layout.h"
#include "kernels/common/page_bounds.cuh"
#include "kernels/common/wgmma_loads.cuh"
#include "wideattn.h"

namespace wideattn::hopper::e4m3q {

// Consecutive e4m3 K or V tiles of one warpgroup (TilePages), into the swizzled operand layout
// (K) or the plain [key][512 bytes] staging layout (V). Keys >= kv_end are zero-filled, and so
// are the keys of a page outside the cache (page_bounds.cuh: read as page 0, copying nothing).
template <class Traits, bool kSwizzled>
struct CodeTileStream {
    static constexpr int32_t kRowsPerPass = Traits::kWarpGroupThreads / Traits::kCodeVecsPerGroupRow;
    static constexpr int32_t kPassesPerSubTile = Traits::kPageKeys / kRowsPerPass;
    static constexpr int32_t kPasses = Traits::kSubTiles * kPassesPerSubTile;
    // Bytes between a thread's consecutive rows (kRowsPerPass apart) in the destination.
    static constexpr uint32_t kSharedPassBytes =
        kRowsPerPass * (kSwizzled ? Traits::kSwizzleBytes : Traits::kCodeRowBytes);
    static_assert(Traits::kPageKeys % kRowsPerPass == 0, "whole passes per sub-tile");
    static_assert(kRowsPerPass == Traits::kAtomRows, "a thread's rows share one swizzle phase");

    const char* head_base;   // cache + kv_head * head_stride + first_row * slot_stride + vec * 16 B
    int64_t block_stride;    // bytes between pages
    int64_t slot_stride;     // bytes between the keys of a page
    uint32_t shared_offset;  // the thread's first row in the destination chunk
    int32_t first_row;
    TilePages<Traits> pages;

    __device__ __forceinline__ void init(const wideattn_prefill_params& p, bool is_value, int32_t kv_head,
                                         int32_t group, int32_t thread, const int32_t* table_row, int32_t kv_end) {
        const int32_t vec = group * Traits::kCodeVecsPerGroupRow + thread % Traits::kCodeVecsPerGroupRow;
        first_row = thread / Traits::kCodeVecsPerGroupRow;
        slot_stride = (is_value ? p.v_slot_stride : p.k_slot_stride) * Traits::kCodeBytes;
        block_stride = (is_value ? p.v_block_stride : p.k_block_stride) * Traits::kCodeBytes;
        head_base = static_cast<const char*>(is_value ? p.v_cache : p.k_cache) +
                    kv_head * (is_value ? p.v_head_stride : p.k_head_stride) * Traits::kCodeBytes +
                    first_row * slot_stride + vec * Traits::kVecBytes;
        shared_offset = kSwizzled ? operand_offset<Traits, Traits::kTileKeys>(first_row, vec)
                                  : static_cast<uint32_t>(first_row * Traits::kCodeRowBytes + vec * Traits::kVecBytes);
        pages.start(p, table_row, kv_end);
    }

    // Issues (does not commit) the next tile into `chunk` and reads the pages of the one after.
    __device__ __forceinline__ void issue(const wideattn_prefill_params& p, const int32_t* table_row, int32_t kv_end,
                                          uint32_t chunk) {
        const int32_t tile_key0 = pages.tile_key0();
#pragma unroll
        for (int32_t sub = 0; sub < Traits::kSubTiles; ++sub) {
            const bool in_cache = page_in_cache(pages.page[sub], p.num_blocks);
            const char* src =
                head_base + (in_cache ? pages.page[sub] : 0) * block_stride + pages.page_slots[sub] * slot_stride;
            const int32_t rows_valid = in_cache ? kv_end - tile_key0 - sub * Traits::kPageKeys : 0;
#pragma unroll
            for (int32_t i = 0; i < kPassesPerSubTile; ++i) {
                const int32_t pass = sub * kPassesPerSubTile + i;
                ptx::cp_async_16(chunk + shared_offset + pass * kSharedPassBytes, src + i * kRowsPerPass * slot_stride,
                                 first_row + i * kRowsPerPass < rows_valid ? Traits::kVecBytes : 0);
            }
        }
        pages.read_ahead(p, table_row, kv_end);
    }
};

// Converts the V codes this thread staged (its passes of `staged`, written by its own cp.async,
// already waited for) into fp16 in `values`, the MN-major layout of the P V wgmma. Exact: every
// e4m3 value is an fp16 value; the per-tensor scale is applied to O at the end.
template <class Traits>
__device__ __forceinline__ void convert_values(uint32_t staged, uint32_t values, int32_t group, int32_t thread) {
    using Stream = CodeTileStream<Traits, false>;
    const int32_t vec = group * Traits::kCodeVecsPerGroupRow + thread % Traits::kCodeVecsPerGroupRow;
    const int32_t first_row = thread / Traits::kCodeVecsPerGroupRow;
    const uint32_t staged_first = staged + first_row * Traits::kCodeRowBytes + vec * Traits::kVecBytes;
    constexpr int32_t kHalfVecsPerCodeVec = Traits::kVecBytes / Traits::kValueVecElems;  // 16 codes -> 2 fp16 vecs
#pragma unroll
    for (int32_t pass = 0; pass < Stream::kPasses; ++pass) {
        const int32_t row = first_row + pass * Stream::kRowsPerPass;
        uint32_t codes[4];
        asm volatile("ld.shared.v4.b32 {%0, %1, %2, %3}, [%4];\n"
                     : "=r"(codes[0]), "=r"(codes[1]), "=r"(codes[2]), "=r"(codes[3])
                     : "r"(staged_first + pass * Stream::kSharedPassBytes)
                     : "memory");
        uint32_t halves[8];
#pragma unroll
        for (int32_t w = 0; w < 4; ++w) mma_e4m3::e4m3x4_to_f16x2x2(codes[w], halves[2 * w], halves[2 * w + 1]);
#pragma unroll
        for (int32_t h = 0; h < kHalfVecsPerCodeVec; ++h) {
            const uint32_t address =
                values + operand_offset<Traits, Traits::kTileKeys>(row, kHalfVecsPerCodeVec * vec + h);
            asm volatile("st.shared.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"r"(address), "r"(halves[4 * h]),
                         "r"(halves[4 * h + 1]), "r"(halves[4 * h + 2]), "r"(halves[4 * h + 3])
                         : "memory");
        }
    }
}

}  // namespace wideattn::hopper::e4m3q
