// test_wgmma_layout.cpp - the Hopper-tier kernels' shared-memory operand layout against the
// wgmma matrix descriptors that read it, on the CPU: for every element a score step or a P V
// step reads, the address the descriptor selects (modelled from the PTX ISA's canonical 128-byte
// swizzled layouts, K-major and MN-major) must be the address the loader wrote that element to
// (operand_offset). Covers the bf16 and the e4m3 kernel's Q, K and V and both warpgroups, and the
// FP8 P V of wgmma_e4m3pv_d512: its e4m3 P fragment (the PTX m64nNk32 A layout) against the score
// accumulator it is packed from, and its K-major V without swizzle against where the TMA boxes of
// the transposed V cache land; and wgmma_e4m3alt_d512's full-width score steps and the P tile one
// warpgroup hands the other (its stores against the SS descriptor that reads them).
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <set>

#include "fp8/hopper_e4m3alt_d512/traits.h"
#include "fp8/hopper_e4m3pv_d512/traits.h"
#include "fp8/hopper_e4m3q_d512/traits.h"
#include "kernels/common/v_transposed.h"
#include "kernels/common/wgmma_layout.h"
#include "kernels/hopper/bf16_d512/traits.h"

using namespace wideattn;
using namespace wideattn::hopper;

namespace {

using Wt = WgmmaBf16D512Traits;
using Et = WgmmaE4m3QD512Traits;
using Pt = WgmmaE4m3PvD512Traits;

constexpr uint32_t kBase = 0x400;  // a 1024-byte aligned shared address (as after the reserved 1 KB)
constexpr int32_t kAtomRowBytes = 128;

uint32_t field(uint32_t word, int shift) { return ((word >> shift) & kDescFieldMask) << kDescUnitShift; }

// PTX ISA 128-byte swizzle: address bits [4:6] ^= bits [7:9].
uint32_t swizzled(uint32_t address) { return address ^ (((address >> 7) & 7u) << 4); }

// Element (row m, k) of a K-major operand: 8-row groups SBO apart, rows 128 bytes apart, k along
// the row; then the swizzle.
uint32_t k_major_address(SmemDescriptor d, int32_t m, int32_t k, int32_t elem_bytes) {
    const uint32_t start = field(d.low, 0), stride = field(d.high, 0);
    return swizzled(start + (m / 8) * stride + (m % 8) * kAtomRowBytes + k * elem_bytes);
}

// Element (k, n) of an MN-major 16-bit operand: 64-element blocks along n LBO apart, 8-row groups
// along k SBO apart, rows 128 bytes apart; then the swizzle.
uint32_t mn_major_address(SmemDescriptor d, int32_t k, int32_t n) {
    const uint32_t start = field(d.low, 0), leading = field(d.low, kDescLeadingShift), stride = field(d.high, 0);
    constexpr int32_t kBlock = 64;
    return swizzled(start + (n / kBlock) * leading + (n % kBlock) * 2 + (k / 8) * stride + (k % 8) * kAtomRowBytes);
}

// Where the loader puts element `dim` (of `elem_bytes`) of row `row` in an operand of kRows rows.
template <class Traits, int32_t kRows>
uint32_t loaded_address(uint32_t base, int32_t row, int32_t dim, int32_t elem_bytes) {
    const int32_t per_vec = Traits::kVecBytes / elem_bytes;
    return base + operand_offset<Traits, kRows>(row, dim / per_vec) + (dim % per_vec) * elem_bytes;
}

}  // namespace

TEST_CASE("wgmma layout: descriptors select 128-byte swizzle with the expected strides") {
    const ScoreDescriptors d = score_step_descriptors<Wt, Wt::kSlabsPerGroup>(kBase, kBase + Wt::kQBytes, 0, 0);
    CHECK((d.q.high >> 30) == 1u);
    CHECK(field(d.q.high, 0) == static_cast<uint32_t>(Wt::kAtomBytes));
    CHECK(field(d.q.low, kDescLeadingShift) == static_cast<uint32_t>(Wt::kVecBytes));
    CHECK(field(d.q.low, 0) == kBase);
    const SmemDescriptor v = pv_step_descriptor<Wt>(kBase, 1, 1);
    CHECK(field(v.low, kDescLeadingShift) == static_cast<uint32_t>(Wt::kChunkSlabBytes));
    CHECK(field(v.high, 0) == static_cast<uint32_t>(Wt::kAtomBytes));
}

namespace {

// Every (row, k) element of every score step of both warpgroups against the loader's address;
// returns the number of mismatches. kSlabs 128-byte slabs per warpgroup, kStepK elements of
// kElemBytes per step, in the geometry of the kernel `Traits`.
template <class Traits, int32_t kSlabs, int32_t kStepK, int32_t kElemBytes>
int64_t score_step_mismatches(uint32_t q, uint32_t k, int64_t* checked) {
    constexpr int32_t kSteps = kSlabs * Traits::kStepsPerSlab;
    int64_t wrong = 0;
    for (int32_t group = 0; group < Traits::kWarpGroups; ++group)
        for (int32_t step = 0; step < kSteps; ++step) {
            const ScoreDescriptors d = score_step_descriptors<Traits, kSlabs>(q, k, group, step);
            for (int32_t kk = 0; kk < kStepK; ++kk) {
                const int32_t dim = (group * kSteps + step) * kStepK + kk;
                for (int32_t row = 0; row < Traits::kRowsPerBlock; ++row, ++*checked)
                    wrong += k_major_address(d.q, row, kk, kElemBytes) !=
                             loaded_address<Traits, Traits::kRowsPerBlock>(q, row, dim, kElemBytes);
                for (int32_t key = 0; key < Traits::kTileKeys; ++key, ++*checked)
                    wrong += k_major_address(d.k, key, kk, kElemBytes) !=
                             loaded_address<Traits, Traits::kTileKeys>(k, key, dim, kElemBytes);
            }
        }
    return wrong;
}

// Every (key, dim) element every P V step of both warpgroups reads from a 16-bit V chunk at `v`,
// in the geometry of the kernel `Traits`, against the address its loader or converter wrote;
// returns the number of mismatches.
template <class Traits>
int64_t pv_step_mismatches(uint32_t v, int64_t* checked) {
    int64_t wrong = 0;
    for (int32_t group = 0; group < Traits::kWarpGroups; ++group)
        for (int32_t kk = 0; kk < Traits::kPvSteps; ++kk) {
            const SmemDescriptor d = pv_step_descriptor<Traits>(v, group, kk);
            for (int32_t k = 0; k < Traits::kPvK; ++k)
                for (int32_t n = 0; n < Traits::kDimsPerGroup; ++n, ++*checked) {
                    const int32_t key = kk * Traits::kPvK + k, dim = group * Traits::kDimsPerGroup + n;
                    wrong += mn_major_address(d, k, n) !=
                             loaded_address<Traits, Traits::kTileKeys>(v, key, dim, Traits::kValueBytes);
                }
        }
    return wrong;
}

}  // namespace

TEST_CASE("wgmma layout: bf16 and e4m3 score steps read the Q and K elements the loaders wrote") {
    int64_t checked = 0;
    CHECK(score_step_mismatches<Wt, Wt::kSlabsPerGroup, Wt::kWgmmaK, Wt::kElemBytes>(
              kBase, kBase + Wt::kQBytes + 2 * Wt::kChunkBytes, &checked) == 0);
    CHECK(checked == int64_t{Wt::kHeadDim} * (Wt::kRowsPerBlock + Wt::kTileKeys));
    checked = 0;
    CHECK(score_step_mismatches<Et, Et::kCodeSlabsPerGroup, Et::kScoreK, Et::kCodeBytes>(kBase, kBase + Et::kQBytes,
                                                                                         &checked) == 0);
    CHECK(checked == int64_t{Et::kHeadDim} * (Et::kRowsPerBlock + Et::kTileKeys));
}

TEST_CASE("wgmma layout: P V steps read the V elements the loader (bf16) or converter (fp16) wrote") {
    int64_t checked = 0;
    CHECK(pv_step_mismatches<Wt>(kBase + Wt::SmemPlan::kRing + Wt::kChunkBytes, &checked) == 0);
    CHECK(checked == int64_t{Wt::kTileKeys} * Wt::kHeadDim);
    checked = 0;
    CHECK(pv_step_mismatches<Et>(kBase + Et::SmemPlan::kValueRing, &checked) == 0);
    CHECK(checked == int64_t{Et::kTileKeys} * Et::kHeadDim);
}

TEST_CASE("wgmma layout: operand offsets tile each operand exactly once, atoms 1024-byte aligned") {
    std::set<uint32_t> chunk;
    for (int32_t row = 0; row < Wt::kTileKeys; ++row)
        for (int32_t vec = 0; vec < Wt::kHeadDim * Wt::kElemBytes / Wt::kVecBytes; ++vec)
            chunk.insert(operand_offset<Wt, Wt::kTileKeys>(row, vec));
    CHECK(chunk.size() == static_cast<size_t>(Wt::kChunkBytes / Wt::kVecBytes));
    CHECK(*chunk.rbegin() == static_cast<uint32_t>(Wt::kChunkBytes - Wt::kVecBytes));
    std::set<uint32_t> q;
    for (int32_t row = 0; row < Wt::kRowsPerBlock; ++row)
        for (int32_t vec = 0; vec < Wt::kHeadDim * Wt::kElemBytes / Wt::kVecBytes; ++vec)
            q.insert(operand_offset<Wt, Wt::kRowsPerBlock>(row, vec));
    CHECK(q.size() == static_cast<size_t>(Wt::kQBytes / Wt::kVecBytes));
    for (int32_t bytes : {Wt::kQBytes, Wt::kChunkBytes, Et::kQBytes, Et::kCodeChunkBytes, Et::kHalfChunkBytes})
        CHECK(bytes % Wt::kAtomBytes == 0);
    // The shared-memory plans put every swizzled operand region on an atom boundary of the aligned
    // base, and the allocation covers the plan plus the alignment slack.
    for (int32_t offset : {Wt::SmemPlan::kQ, Wt::SmemPlan::kRing, Et::SmemPlan::kQ, Et::SmemPlan::kKeyRing,
                           Et::SmemPlan::kValueRing})
        CHECK(offset % Wt::kAtomBytes == 0);
    CHECK(Wt::kSmemBytes == Wt::SmemPlan::kEnd + Wt::kSmemAlign);
    CHECK(Et::kSmemBytes == Et::SmemPlan::kEnd + Et::kSmemAlign);
    CHECK(Wt::SmemPlan::kBarriers % Wt::kBarrierBytes == 0);
}

namespace {

constexpr int32_t kCoreRows = 8;       // rows of a core matrix
constexpr int32_t kCoreRowBytes = 16;  // bytes of a core-matrix row
constexpr int32_t kLanesPerRow = 4;    // lanes sharing an accumulator row (t = lane % 4)

// Element (n, k) of a K-major 8-bit operand without swizzle (PTX ISA, canonical layouts; CUTLASS
// INTERLEAVE ((8,n),(16,2)):((16 B,SBO),(1 B,LBO))): 8-row core matrices of 16-byte rows, SBO
// apart along n, LBO apart along k.
uint32_t interleaved_k_major_address(SmemDescriptor d, int32_t n, int32_t k) {
    const uint32_t start = field(d.low, 0), leading = field(d.low, kDescLeadingShift), stride = field(d.high, 0);
    return start + (n / kCoreRows) * stride + (n % kCoreRows) * kCoreRowBytes + (k / kCoreRowBytes) * leading +
           k % kCoreRowBytes;
}

// The key of the score tile that A column k of the FP8 P V holds: the PTX m64nNk32 8-bit A
// fragment gives lane t's register r, byte i column 16 (r / 2) + 4t + i; the kernel packs into
// it s[2 (r / 2) + i / 2][2 (r % 2) + i % 2] (softmax_e4m3_step), and accumulator quad n,
// element e of lane t is key 8n + 2t + e % 2.
int32_t pv_column_key(int32_t k) {
    const int32_t half = k / 16, t = (k % 16) / kLanesPerRow, i = k % kLanesPerRow;
    const int32_t n = 2 * half + i / 2, e = i % 2;
    return Pt::kAccumN * n + 2 * t + e;
}

// Where the TMA boxes of the transposed V cache put V(key, dim) in a ring chunk at `v`: the
// warpgroup's half, the key's 16-key sub-tile, the box of kVtBoxDims dims, its [dim][16 positions]
// rows (the box starts at the sub-tile's first slot, a 16-slot group boundary).
uint32_t transposed_value_address(uint32_t v, int32_t key, int32_t dim) {
    const int32_t group = dim / Pt::kDimsPerGroup, local = dim % Pt::kDimsPerGroup;
    return v + group * Pt::kGroupChunkBytes + (key / Pt::kPageKeys) * Pt::kVtSubTileBytes +
           (local / kVtBoxDims) * Pt::kVtBoxBytes + (local % kVtBoxDims) * kVtBoxSlots +
           v_slot_position(key % Pt::kPageKeys);
}

}  // namespace

TEST_CASE("wgmma layout: the FP8 P V reads, for each P column, the V row of the key that column holds") {
    std::set<int32_t> keys;
    for (int32_t k = 0; k < Pt::kPvK; ++k) keys.insert(pv_column_key(k));
    CHECK(keys.size() == static_cast<size_t>(Pt::kTileKeys));  // P holds each key of the tile once
    const uint32_t v = kBase + Pt::SmemPlan::kRing + Pt::kChunkBytes;
    int64_t wrong = 0, checked = 0;
    for (int32_t group = 0; group < Pt::kWarpGroups; ++group) {
        const SmemDescriptor d = fp8_pv_descriptor<Pt>(v, group);
        CHECK((d.high >> 30) == 0u);  // no swizzle
        for (int32_t n = 0; n < Pt::kDimsPerGroup; ++n)
            for (int32_t k = 0; k < Pt::kPvK; ++k, ++checked)
                wrong += interleaved_k_major_address(d, n, k) !=
                         transposed_value_address(v, pv_column_key(k), group * Pt::kDimsPerGroup + n);
    }
    CHECK(wrong == 0);
    CHECK(checked == int64_t{Pt::kTileKeys} * Pt::kHeadDim);
    // The boxes of one chunk tile it exactly once, and P V's core matrices are 16-byte aligned.
    std::set<uint32_t> bytes;
    for (int32_t key = 0; key < Pt::kTileKeys; ++key)
        for (int32_t dim = 0; dim < Pt::kHeadDim; ++dim) bytes.insert(transposed_value_address(v, key, dim));
    CHECK(bytes.size() == static_cast<size_t>(Pt::kChunkBytes));
    CHECK(*bytes.begin() == v);
    CHECK(*bytes.rbegin() == v + Pt::kChunkBytes - 1);
}

TEST_CASE("wgmma layout: the FP8 P V kernel's score steps, shared-memory plan and K boxes") {
    int64_t checked = 0;
    CHECK(score_step_mismatches<Pt, Pt::kSlabsPerGroup, Pt::kScoreK, Pt::kElemBytes>(kBase, kBase + Pt::kQBytes,
                                                                                     &checked) == 0);
    CHECK(checked == int64_t{Pt::kHeadDim} * (Pt::kRowsPerBlock + Pt::kTileKeys));
    for (int32_t offset : {Pt::SmemPlan::kQ, Pt::SmemPlan::kRing, Pt::SmemPlan::kExchange})
        CHECK(offset % Pt::kAtomBytes == 0);
    CHECK(Pt::kChunkBytes % Pt::kAtomBytes == 0);
    CHECK(Pt::kSmemBytes == Pt::SmemPlan::kEnd + Pt::kSmemAlign);
    // A K box (128 codes x 16 slots, 128-byte swizzle) at slab s, sub-tile u of a chunk is
    // rows 16u .. 16u + 15 of the slab: the operand layout's offsets of those rows, in order.
    constexpr int32_t kSubTileBytes = Pt::kPageKeys * Pt::kSwizzleBytes;
    for (int32_t slab = 0; slab < Pt::kHeadDim / Pt::kSlabDims; ++slab)
        for (int32_t sub = 0; sub < Pt::kSubTiles; ++sub) {
            const uint32_t box = slab * Pt::kChunkSlabBytes + sub * kSubTileBytes;
            for (int32_t row = 0; row < Pt::kPageKeys; ++row)
                for (int32_t vec = 0; vec < Pt::kVecsPerSlabRow; ++vec)
                    CHECK(swizzled(kBase + box + row * Pt::kSwizzleBytes + vec * Pt::kVecBytes) - kBase ==
                          operand_offset<Pt, Pt::kTileKeys>(sub * Pt::kPageKeys + row,
                                                            slab * Pt::kVecsPerSlabRow + vec));
        }
}

TEST_CASE("wgmma layout: wgmma_e4m3alt_d512's full-width score steps, its P tile hand-off and shared-memory plan") {
    using At = WgmmaE4m3AltD512Traits;
    // Scores over all 512 dims from warpgroup 0's descriptors: the Q tile as both warpgroups'
    // halves load it, the K tile as the full-width stream's boxes land (the operand layout).
    const uint32_t q = kBase + At::SmemPlan::kQ, k = kBase + At::SmemPlan::kKeyRing;
    int64_t wrong = 0, checked = 0;
    for (int32_t step = 0; step < At::kFullSlabs * At::kStepsPerSlab; ++step) {
        const ScoreDescriptors d = score_step_descriptors<At, At::kFullSlabs>(q, k, 0, step);
        for (int32_t kk = 0; kk < At::kScoreK; ++kk) {
            const int32_t dim = step * At::kScoreK + kk;
            for (int32_t row = 0; row < At::kRowsPerBlock; ++row, ++checked)
                wrong += k_major_address(d.q, row, kk, At::kElemBytes) !=
                         loaded_address<At, At::kRowsPerBlock>(q, row, dim, At::kElemBytes);
            for (int32_t key = 0; key < At::kTileKeys; ++key, ++checked)
                wrong += k_major_address(d.k, key, kk, At::kElemBytes) !=
                         loaded_address<At, At::kTileKeys>(k, key, dim, At::kElemBytes);
        }
    }
    CHECK(wrong == 0);
    CHECK(checked == int64_t{At::kHeadDim} * (At::kRowsPerBlock + At::kTileKeys));

    // The P tile: where each lane stores byte i of its A register r (row 16 w + g + 8 (r % 2),
    // column 16 (r / 2) + 4 t + i) is where the SS descriptor reads that element.
    const uint32_t tile = kBase + At::SmemPlan::kProbs;
    const SmemDescriptor a = interleaved_descriptor(tile, At::kProbCoreBytes, At::kProbRowGroupBytes);
    constexpr int32_t kWarpsPerGroup = At::kWarpGroupThreads / At::kWarpSize;
    std::set<uint32_t> stored;
    wrong = 0;
    for (int32_t warp = 0; warp < kWarpsPerGroup; ++warp)
        for (int32_t lane = 0; lane < At::kWarpSize; ++lane)
            for (int32_t reg = 0; reg < At::kProbRegs; ++reg)
                for (int32_t byte = 0; byte < 4; ++byte) {
                    const int32_t row = warp * At::kRowsPerWarp + lane / kLanesPerRow + (reg % 2) * kCoreRows;
                    const int32_t column = (reg / 2) * kCoreRowBytes + (lane % kLanesPerRow) * 4 + byte;
                    const uint32_t address = tile + At::prob_fragment_offset(warp, lane, reg) + byte;
                    wrong += interleaved_k_major_address(a, row, column) != address;
                    stored.insert(address);
                }
    CHECK(wrong == 0);
    CHECK(stored.size() == static_cast<size_t>(At::kProbTileBytes));
    CHECK(*stored.rbegin() == tile + At::kProbTileBytes - 1);

    // The plan: swizzled operands on 1024-byte atoms, V and P chunks on 16 bytes, mbarriers on 8.
    for (int32_t offset : {At::SmemPlan::kQ, At::SmemPlan::kKeyRing, At::SmemPlan::kValueRing})
        CHECK(offset % At::kAtomBytes == 0);
    CHECK(At::SmemPlan::kProbs % At::kVecBytes == 0);
    CHECK(At::SmemPlan::kBarriers % At::kBarrierBytes == 0);
    CHECK(At::kSmemBytes == At::SmemPlan::kEnd + At::kSmemAlign);
}
