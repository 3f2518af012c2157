// traits.h - every compile-time constant of the single-token decode kernels over a BF16 K/V cache,
// head dim 512, GQA group 8 (sm_90a): decode_e4m3_d512's block (fp8/decode_e4m3_d512/) with bf16
// operands. One block per (query token, KV head[, key split]), its 8 query rows being the 8 heads
// of the KV head; kWarps warps, each streaming its own 16-key sub-tiles (every kWarps-th) through
// a private cp.async ring and keeping its own online softmax and O, merged across the warps at
// the end. Both products run as mma.sync m16n8k16 bf16 with the keys in the m dimension (S^T = K
// Q^T, O^T = V^T P^T); K, V and Q enter the mma as they are stored. DecodeBf16Block<W> holds the
// block's constants for W warps; decode_bf16_d512 (kernel.cu) is the 8-warp block, one per SM,
// and decode_bf16w4_d512 (kernel_w4.cu, the BF16 decode default) the 4-warp block, two per SM.
#pragma once

#include "kernels/common/kernel_desc.h"

namespace wideattn {

template <int32_t kWarpCount>
struct DecodeBf16Block {
    static constexpr int32_t kHeadDim = 512;
    static constexpr int32_t kGroup = 8;             // query heads per KV head = the block's rows
    static constexpr int32_t kRows = kGroup;
    static constexpr int32_t kWarpSize = 32;
    static constexpr int32_t kWarps = kWarpCount;
    static constexpr int32_t kThreads = kWarps * kWarpSize;
    static constexpr int32_t kTileTokens = 1;        // one query token per block
    static constexpr int32_t kTokensPerRowTile = 1;  // block_geometry: every row is the block's token

    // A warp's step: one sub-tile of 16 keys (never straddles a page: block_size is a multiple
    // of 16), the m of the mma. Split boundaries are multiples of lcm(kTileKeys, block_size).
    static constexpr int32_t kSubTileKeys = kPageSizeMultiple;
    static constexpr int32_t kTileKeys = kSubTileKeys;

    // mma.sync m16n8k16 bf16: m 16 (keys for S^T, dims for O^T), k 16, n = the 8 rows.
    static constexpr int32_t kMmaM = 16;
    static constexpr int32_t kMmaK = 16;
    static constexpr int32_t kVecBytes = 16;   // one cp.async, one ldmatrix row
    static constexpr int32_t kElemBytes = 2;   // bf16
    static constexpr int32_t kRowBytes = kHeadDim * kElemBytes;  // one key's K (or V) row, 1 KB
    static constexpr int32_t kONTiles = kHeadDim / kMmaM;        // O^T m-tiles of 16 dims
    static constexpr int32_t kSwizzleRows = 8;                   // rows of one ldmatrix matrix

    // A chunk is the K or the V of one sub-tile over half the dims (16 keys x 256 dims, 8 KB): a
    // sub-tile is 4 chunks (K dims 0-255, K dims 256-511, V dims 0-255, V dims 256-511), so a
    // chunk is the size of decode_e4m3_d512's and a lane copies one 16-byte vector of each of its
    // key rows there too.
    static constexpr int32_t kChunkDims = 256;
    static constexpr int32_t kChunkParts = kHeadDim / kChunkDims;          // chunks per K (or V) sub-tile
    static constexpr int32_t kChunksPerSubTile = 2 * kChunkParts;          // K parts, then V parts
    static constexpr int32_t kChunkRowBytes = kChunkDims * kElemBytes;     // 512
    static constexpr int32_t kVecsPerChunkRow = kChunkRowBytes / kVecBytes;  // 32 = one per lane
    static constexpr int32_t kChunkKSteps = kChunkDims / kMmaK;            // S^T mmas per K chunk (16)
    static constexpr int32_t kChunkOTiles = kChunkDims / kMmaM;            // O^T m-tiles per V chunk (16)
    static constexpr int32_t kChunkBytes = kSubTileKeys * kChunkRowBytes;  // 8 KB

    // Per-warp ring: chunk c of a warp sits in slot c % kRingChunks. Three slots: while one is
    // read, the next two are in flight (2 x 8 KB a warp, 128 KB a block: one block per SM).
    static constexpr int32_t kRingChunks = 3;
    static constexpr int32_t kChunksInFlight = kRingChunks - 1;
    static constexpr int32_t kWarpRingBytes = kRingChunks * kChunkBytes;
    static constexpr int32_t kBytesInFlight = kWarps * kChunksInFlight * kChunkBytes;

    // Q: the 8 rows as bf16, 1 KB rows, 16-byte vectors swizzled by row; Q^T fragments come from
    // it by ldmatrix.
    static constexpr int32_t kQRowBytes = kHeadDim * kElemBytes;
    static constexpr int32_t kQBytes = kRows * kQRowBytes;
    static constexpr int32_t kQVecsPerRow = kQRowBytes / kVecBytes;  // 64

    // Softmax (decode_e4m3_d512's, fp8/decode_e4m3_d512/mainloop.cuh): log2 units, P = 2^(s - max)
    // in bf16 (the P V mma's type: V is bf16), no offset; a rescale at every growth of a row maximum.
    static constexpr float kProbScaleLog2 = 0.0f;
    static constexpr bool kBf16Probs = true;

    // The O^T accumulator o[n] (e0, e1 at dim o_dim(n, g); e2, e3 kOHalfDims further): 16-dim
    // m-tiles in order (mainloop.cuh). The output is O / l (no V scale).
    static constexpr int32_t kOHalfDims = kMmaM / 2;
    WIDEATTN_HOST_DEVICE static constexpr int32_t o_dim(int32_t n, int32_t g) { return kMmaM * n + g; }
    static constexpr bool kScaledV = false;

    // The end of the block: each warp's row maxima and sums, and O^T (fp32 [warp][row][dim]),
    // written over the rings once every warp is done (decode_e4m3_d512's merge, epilogue.cuh).
    static constexpr int32_t kMergeRowBytes = kHeadDim * 4;
    static constexpr int32_t kMergeBytes = kWarps * kRows * kMergeRowBytes;
    static constexpr int32_t kStatsBytes = kWarps * kRows * 2 * 4;  // max and sum per warp and row

    struct SmemPlan {
        static constexpr int32_t kQ = 0;
        static constexpr int32_t kRings = kQ + kQBytes;
        static constexpr int32_t kMerge = kRings;  // reused after the key loop
        static constexpr int32_t kStats = kRings + kWarps * kWarpRingBytes;
        static constexpr int32_t kEnd = kStats + kStatsBytes;
        static constexpr int32_t kBytes = kEnd;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;
    static constexpr int32_t kSmemAlign = 128;

    static constexpr int32_t kMinSm = 90;  // the rings (96 or 192 KB) need sm_90's shared memory
    static constexpr int32_t kMinBytesInFlight = 64 * 1024;  // per SM, to cover the DRAM latency
    // Blocks resident per SM: 8 warps' rings fill an SM's shared memory, 4 warps' half of it.
    static constexpr int32_t kBlocksPerSm = 8 / kWarps;
    static constexpr int32_t kSmemPerSm = 228 * 1024;       // sm_90: an SM's shared memory
    static constexpr int32_t kSmemReservedPerBlock = 1024;  // the driver's share of each block

    static_assert(kVecsPerChunkRow == kWarpSize, "a lane copies one 16-byte vector of every key row of a chunk");
    static_assert(kSubTileKeys == kMmaM, "a sub-tile is the m of one mma");
    static_assert(kMmaK * kElemBytes == 2 * kVecBytes,
                  "an ldmatrix.x4 of K or V covers two 16-byte vectors of 16 keys");
    static_assert(kHeadDim % kChunkDims == 0, "the chunks split the head dims evenly");
    static_assert(kChunkKSteps % 2 == 0, "a Q ldmatrix.x4 gives the B fragments of two k-steps");
    static_assert(kWarps == 8 || kWarps == 4, "one block of 8 warps or two of 4 per SM");
    static_assert(kBytesInFlight * kBlocksPerSm >= kMinBytesInFlight, "enough bytes in flight per SM");
    static_assert(kBlocksPerSm * (kSmemBytes + kSmemReservedPerBlock) <= kSmemPerSm,
                  "kBlocksPerSm blocks fit an SM's shared memory");
    static_assert(kMergeBytes <= kWarps * kWarpRingBytes, "the merge area fits in the rings");
    static_assert(SmemPlan::kRings % kSmemAlign == 0 && kChunkBytes % kSmemAlign == 0, "chunks stay aligned");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");
    static_assert(kRingChunks == 3, "the schedule of mainloop.cuh: chunk c + 2 takes chunk c - 1's slot");
    static_assert(kTileTokens == 1, "loads.cuh reads the rows of one token");
};

// decode_bf16_d512 (kernel.cu): 8 warps, 2 per scheduler as decode_e4m3_d512 (1 per scheduler idles
// on latency), one block per SM.
struct DecodeBf16D512Traits : DecodeBf16Block<8> {
    static constexpr KernelDesc desc = {
        "decode_bf16_d512", "wideattn_decode_bf16_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,split_kv,single_token", kKindPrefill, "wideattn_decode_bf16_d512_split"};
};

// decode_bf16w4_d512 (kernel_w4.cu, the BF16 decode default): the same block with 4 warps and
// half the rings, two blocks per SM, so that one block's start and end can overlap the other's
// key loop where two share an SM; 0.97-0.995x the 8-warp block's time on the H200 (NOTES.md,
// "Measured").
struct DecodeBf16W4D512Traits : DecodeBf16Block<4> {
    static constexpr KernelDesc desc = {
        "decode_bf16w4_d512", "wideattn_decode_bf16w4_d512",
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,split_kv,single_token", kKindPrefill, "wideattn_decode_bf16w4_d512_split"};
};

}  // namespace wideattn
