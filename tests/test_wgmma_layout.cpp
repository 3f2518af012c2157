// test_wgmma_layout.cpp - the Hopper-tier kernels' shared-memory operand layout against the
// wgmma matrix descriptors that read it, on the CPU: for every element a score step or a P V
// step reads, the address the descriptor selects (modelled from the PTX ISA's canonical 128-byte
// swizzled layouts, K-major and MN-major) must be the address the loader wrote that element to
// (operand_offset). Covers the bf16 and the e4m3 kernel's Q, K and V and both warpgroups, and the
// FP8 P V of wgmma_e4m3pv_d512: its e4m3 P fragment (the PTX m64nNk32 A layout) against the score
// accumulator it is packed from, and its K-major V without swizzle against where the TMA boxes of
// the transposed V cache land; wgmma_e4m3alt_d512's full-width score steps and the P tile one
// warpgroup hands the other (its stores against the SS descriptor that reads them); and the same
// for wgmma_e4m3alt64_d512's 64-key tiles (m64n64 scores, two k32 P V steps per tile, its
// shared-memory plan).
#include <doctest/doctest.h>

#include <cstddef>
#include <cstdint>
#include <set>

#include "fp8/hopper_e4m3alt64_d512/traits.h"
#include "fp8/hopper_e4m3alt64kv_d512/traits.h"
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

TEST_CASE("wgmma layout: wgmma_e4m3alt64_d512's m64n64 score steps, K boxes, P fragments, P tile and plan") {
    using A64 = WgmmaE4m3Alt64D512Traits;
    using KeyView = FullWidthKeyView<A64>;
    static_assert(A64::kTileKeys == 64 && A64::kKeyNTiles == 8 && A64::kPvSteps == 2, "the 64-key tile");

    // Scores over all 512 dims: the Q tile as loaded, the K tile of 64 keys in the operand layout.
    const uint32_t q = kBase + A64::SmemPlan::kQ, k = kBase + A64::SmemPlan::kKeyRing;
    int64_t wrong = 0, checked = 0;
    for (int32_t step = 0; step < A64::kFullSlabs * A64::kStepsPerSlab; ++step) {
        const ScoreDescriptors d = score_step_descriptors<A64, A64::kFullSlabs>(q, k, 0, step);
        for (int32_t kk = 0; kk < A64::kScoreK; ++kk) {
            const int32_t dim = step * A64::kScoreK + kk;
            for (int32_t row = 0; row < A64::kRowsPerBlock; ++row, ++checked)
                wrong += k_major_address(d.q, row, kk, A64::kElemBytes) !=
                         loaded_address<A64, A64::kRowsPerBlock>(q, row, dim, A64::kElemBytes);
            for (int32_t key = 0; key < A64::kTileKeys; ++key, ++checked)
                wrong += k_major_address(d.k, key, kk, A64::kElemBytes) !=
                         loaded_address<A64, A64::kTileKeys>(k, key, dim, A64::kElemBytes);
        }
    }
    CHECK(wrong == 0);
    CHECK(checked == int64_t{A64::kHeadDim} * (A64::kRowsPerBlock + A64::kTileKeys));

    // The full-width K stream's boxes (4 slabs x 4 sub-tiles of 16 keys, 128 codes each, swizzled
    // by TMA) land where the operand layout puts each key's codes, and fill the chunk once.
    constexpr int32_t kSubTileBytes = A64::kPageKeys * A64::kSwizzleBytes;  // KvTmaStream's sub-tile
    CHECK(KeyView::kSubTiles * KeyView::kSlabsPerGroup * kSubTileBytes == A64::kChunkBytes);
    std::set<uint32_t> key_bytes;
    wrong = 0;
    for (int32_t slab = 0; slab < KeyView::kSlabsPerGroup; ++slab)
        for (int32_t sub = 0; sub < KeyView::kSubTiles; ++sub) {
            const uint32_t box = slab * A64::kChunkSlabBytes + sub * kSubTileBytes;
            for (int32_t row = 0; row < A64::kPageKeys; ++row)
                for (int32_t vec = 0; vec < A64::kVecsPerSlabRow; ++vec) {
                    const uint32_t landed = swizzled(kBase + box + row * A64::kSwizzleBytes + vec * A64::kVecBytes);
                    wrong += landed - kBase != operand_offset<A64, A64::kTileKeys>(sub * A64::kPageKeys + row,
                                                                                   slab * A64::kVecsPerSlabRow + vec);
                    key_bytes.insert(landed);
                }
        }
    CHECK(wrong == 0);
    CHECK(key_bytes.size() * A64::kVecBytes == static_cast<size_t>(A64::kChunkBytes));

    // The m64n64 accumulator: quad n, element e of lane t is key 8 n + 2 t + e % 2 (the mask's
    // column); the four lanes of a row cover the 64 keys once.
    std::set<int32_t> columns;
    for (int32_t t = 0; t < kLanesPerRow; ++t)
        for (int32_t n = 0; n < A64::kKeyNTiles; ++n)
            for (int32_t e = 0; e < 2; ++e) columns.insert(n * A64::kAccumN + 2 * t + e);
    CHECK(columns.size() == static_cast<size_t>(A64::kTileKeys));
    CHECK(*columns.rbegin() == A64::kTileKeys - 1);

    // P V step `step` of warpgroup `group`: A column c (register r = 2 (c / 16) + row pair, byte
    // c % 4 of lane (c % 16) / 4) holds accumulator quad prob_score_quad, element
    // prob_score_element, i.e. key 8 quad + 2 t + element % 2; the V descriptor of the step must
    // read that key's V row where the transposed V boxes land (the warpgroup's half, 16-key
    // sub-tiles of kVtSubTileBytes, kVtBoxDims-dim boxes of 16 slot positions).
    constexpr uint32_t v = kBase + A64::SmemPlan::kValueRing + A64::kChunkBytes;
    const auto landed_value = [](int32_t key, int32_t dim) {
        const int32_t group = dim / A64::kDimsPerGroup, local = dim % A64::kDimsPerGroup;
        return v + group * A64::kGroupChunkBytes + (key / A64::kPageKeys) * A64::kVtSubTileBytes +
               (local / kVtBoxDims) * A64::kVtBoxBytes + (local % kVtBoxDims) * kVtBoxSlots +
               v_slot_position(key % A64::kPageKeys);
    };
    std::set<int32_t> step_keys;
    std::set<uint32_t> value_bytes;
    wrong = checked = 0;
    for (int32_t step = 0; step < A64::kPvSteps; ++step)
        for (int32_t c = 0; c < A64::kPvK; ++c) {
            const int32_t reg = 2 * (c / kCoreRowBytes), t = (c % kCoreRowBytes) / kLanesPerRow, byte = c % kLanesPerRow;
            for (int32_t pair = 0; pair < 2; ++pair) {
                const int32_t element = A64::prob_score_element(reg + pair, byte);
                CHECK(element / 2 == pair);  // register r % 2 holds row g + 8 (r % 2)
                const int32_t key = A64::kAccumN * A64::prob_score_quad(step, reg + pair, byte) + 2 * t + element % 2;
                CHECK(key == A64::kAccumN * A64::prob_score_quad(step, reg, byte) + 2 * t + byte % 2);
                if (pair == 0) step_keys.insert(key);
            }
            const int32_t key = A64::kAccumN * A64::prob_score_quad(step, reg, byte) + 2 * t + byte % 2;
            CHECK(key / A64::kPvK == step);
            for (int32_t group = 0; group < A64::kWarpGroups; ++group) {
                const SmemDescriptor d =
                    descriptor_plus(fp8_pv_descriptor<A64>(v, group), step * A64::kVtStepBytes);
                for (int32_t n = 0; n < A64::kDimsPerGroup; ++n, ++checked) {
                    const uint32_t read = interleaved_k_major_address(d, n, c);
                    wrong += read != landed_value(key, group * A64::kDimsPerGroup + n);
                    value_bytes.insert(read);
                }
            }
        }
    CHECK(wrong == 0);
    CHECK(checked == int64_t{A64::kTileKeys} * A64::kHeadDim);
    CHECK(step_keys.size() == static_cast<size_t>(A64::kTileKeys));  // each key of the tile once
    CHECK(value_bytes.size() == static_cast<size_t>(A64::kChunkBytes));
    CHECK(*value_bytes.begin() == v);

    // The P tile: where each lane stores byte i of register r of step s is where the SS
    // descriptor of step s (the tile's half s) reads that element; both halves fill the tile once.
    const uint32_t tile = kBase + A64::SmemPlan::kProbs;
    constexpr int32_t kWarpsPerGroup = A64::kWarpGroupThreads / A64::kWarpSize;
    std::set<uint32_t> stored;
    wrong = 0;
    for (int32_t step = 0; step < A64::kPvSteps; ++step) {
        const SmemDescriptor a = interleaved_descriptor(tile + step * A64::kProbStepBytes, A64::kProbCoreBytes,
                                                        A64::kProbRowGroupBytes);
        for (int32_t warp = 0; warp < kWarpsPerGroup; ++warp)
            for (int32_t lane = 0; lane < A64::kWarpSize; ++lane)
                for (int32_t reg = 0; reg < A64::kProbRegs; ++reg)
                    for (int32_t byte = 0; byte < 4; ++byte) {
                        const int32_t row = warp * A64::kRowsPerWarp + lane / kLanesPerRow + (reg % 2) * kCoreRows;
                        const int32_t column = (reg / 2) * kCoreRowBytes + (lane % kLanesPerRow) * 4 + byte;
                        const uint32_t address = tile + A64::prob_fragment_offset(warp, lane, step, reg) + byte;
                        wrong += interleaved_k_major_address(a, row, column) != address;
                        stored.insert(address);
                    }
    }
    CHECK(wrong == 0);
    CHECK(stored.size() == static_cast<size_t>(A64::kProbTileBytes));
    CHECK(*stored.rbegin() == tile + A64::kProbTileBytes - 1);

    // The plan: Q, one K chunk per warpgroup, three V chunks, P tiles of both parities and
    // warpgroups, maxima, sums, mbarriers, in order without overlap; swizzled operands on
    // 1024-byte atoms; within 227 KB.
    CHECK(A64::SmemPlan::kKeyRing == A64::SmemPlan::kQ + A64::kQBytes);
    CHECK(A64::SmemPlan::kValueRing == A64::SmemPlan::kKeyRing + A64::kKeySlots * A64::kWarpGroups * A64::kChunkBytes);
    CHECK(A64::SmemPlan::kProbs == A64::SmemPlan::kValueRing + A64::kValueSlots * A64::kChunkBytes);
    CHECK(A64::SmemPlan::kMaxima ==
          A64::SmemPlan::kProbs + A64::kProbParities * A64::kWarpGroups * A64::kProbTileBytes);
    for (int32_t offset : {A64::SmemPlan::kQ, A64::SmemPlan::kKeyRing, A64::SmemPlan::kValueRing})
        CHECK(offset % A64::kAtomBytes == 0);
    CHECK(A64::kChunkBytes % A64::kAtomBytes == 0);
    CHECK(A64::SmemPlan::kProbs % A64::kVecBytes == 0);
    CHECK(A64::SmemPlan::kBarriers % A64::kBarrierBytes == 0);
    CHECK(A64::kSmemBytes == A64::SmemPlan::kEnd + A64::kSmemAlign);
    CHECK(A64::kSmemBytes <= kSmemLimitSm90);

    // wgmma_e4m3alt64kv_d512 (bf16 Q quantised in the kernel): the same plan, then the warps'
    // Q maxima, still within 227 KB; its Q codes go where the e4m3-Q kernel's land.
    using A64Kv = WgmmaE4m3Alt64KvD512Traits;
    CHECK(A64Kv::SmemPlan::kQ == A64::SmemPlan::kQ);
    CHECK(A64Kv::SmemPlan::kBarriers == A64::SmemPlan::kBarriers);
    CHECK(A64Kv::SmemPlan::kQAmax == A64::SmemPlan::kEnd);
    CHECK(A64Kv::SmemPlan::kQAmax % A64::kVecBytes == 0);
    CHECK(A64Kv::SmemPlan::kEnd == A64::SmemPlan::kEnd + A64Kv::kWarps * A64Kv::kAmaxSlotBytes);
    CHECK(A64Kv::kSmemBytes <= kSmemLimitSm90);
    CHECK(A64Kv::kTileKeys == A64::kTileKeys);
}
