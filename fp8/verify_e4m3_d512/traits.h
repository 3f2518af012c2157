// traits.h - every compile-time constant of the few-token decode kernel for bf16 Q over an e4m3
// K/V cache, head dim 512, GQA group 8 (kernel wideattn_verify_e4m3_d512, sm_90a): speculative
// verification steps and small-q_len decode, one block per (tile of up to 8 query tokens, KV head
// [, key split]), its rows the tokens x the 8 query heads. The block streams 64-key tiles of K and
// V codes through a shared cp.async ring; S^T = K Q^T with the keys in the m of mma.sync m16n8k16
// f16 (warp = 16 keys x one half of the dims, the halves' partial scores added through shared
// memory), P^T written to shared memory, O^T = V^T P^T with each warp owning 64 dims of O, so
// every code is converted once and O needs no merge across warps. e4m3 codes become f16 exactly,
// bf16 Q becomes f16 exactly after a power-of-two scale (as in decode_e4m3_d512).
#pragma once

#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct VerifyE4m3D512Traits {
    static constexpr int32_t kHeadDim = 512;
    static constexpr int32_t kGroup = 8;  // query heads per KV head: one n-tile of every mma per token
    static constexpr int32_t kTileTokens = 8;  // tokens per block (a verification step of up to 8)
    static constexpr int32_t kRows = kTileTokens * kGroup;  // row r = head r % 8 of token r / 8
    static constexpr int32_t kTokensPerRowTile = 1;          // block_geometry: row tile 0 is the first token
    // The key loop is compiled once per token count 1..kTileTokens (the block picks its own), so
    // no mma or load is spent on absent tokens; up to kUnrolledTokens its inner loops unroll.
    static constexpr int32_t kUnrolledTokens = 4;
    static constexpr int32_t kWarpSize = 32;
    static constexpr int32_t kWarps = 8;
    static constexpr int32_t kThreads = kWarps * kWarpSize;

    // The block's step: a tile of 64 keys = 4 sub-tiles of 16 (the m of the mma; a sub-tile never
    // straddles a page, block_size being a multiple of 16). Warp w computes the partial scores of
    // sub-tile w % kKeyGroups over dim half w / kKeyGroups, and O^T for dims [64 w, 64 w + 64).
    static constexpr int32_t kSubTileKeys = kPageSizeMultiple;
    static constexpr int32_t kKeyGroups = 4;
    static constexpr int32_t kDimHalves = kWarps / kKeyGroups;
    static constexpr int32_t kTileKeys = kKeyGroups * kSubTileKeys;
    static constexpr int32_t kDimsPerWarp = kHeadDim / kWarps;  // O^T dims a warp owns

    static constexpr int32_t kMmaM = 16;
    static constexpr int32_t kMmaK = 16;
    static constexpr int32_t kVecBytes = 16;
    static constexpr int32_t kCodeBytes = 1;
    static constexpr int32_t kRowBytes = kHeadDim * kCodeBytes;     // one key's codes (512)
    static constexpr int32_t kVecsPerRow = kRowBytes / kVecBytes;   // 32
    static constexpr int32_t kDimBlock = 32;                        // dims per ldmatrix.x4 of K or V
    static constexpr int32_t kDimBlocks = kHeadDim / kDimBlock;     // 16
    static constexpr int32_t kDimBlocksPerHalf = kDimBlocks / kDimHalves;  // the S partial's k range
    static constexpr int32_t kDimBlocksPerWarp = kDimsPerWarp / kDimBlock;  // O^T: 2, each even + odd
    static constexpr int32_t kOMTiles = 2 * kDimBlocksPerWarp;      // a warp's O^T m-tiles
    static constexpr int32_t kSwizzleRows = 8;

    // The ring: chunk c is the K (c even) or V (c odd) codes of tile c / 2 in slot c % kRingChunks,
    // copied by every thread (warp w: keys 8 w .. 8 w + 7 of the chunk, lane l: vector l).
    // Four slots, three in flight: V_i+1 takes V_i-1's slot once every warp is past P_i-1 V_i-1,
    // K_i+2 takes K_i's once every warp is past S_i.
    static constexpr int32_t kRingChunks = 4;
    static constexpr int32_t kChunksInFlight = kRingChunks - 1;
    static constexpr int32_t kChunkBytes = kTileKeys * kRowBytes;
    static constexpr int32_t kSubTileBytes = kSubTileKeys * kRowBytes;
    static constexpr int32_t kKeysPerCopyWarp = kTileKeys / kWarps;

    // Q: the rows as f16 after the block's power-of-two scale (decode_e4m3_d512's layout).
    static constexpr int32_t kQRowBytes = kHeadDim * 2;
    static constexpr int32_t kQBytes = kRows * kQRowBytes;
    static constexpr int32_t kQVecsPerRow = kQRowBytes / kVecBytes;
    static constexpr int32_t kQTopLog2 = 14;
    static constexpr int32_t kQShiftLimit = 100;

    static constexpr float kProbScaleLog2 = 8.0f;  // P = 2^(s - max + 8) in f16, as decode_e4m3_d512

    // The second dim half's partial S^T of each key group, [key group][token][lane] x 4 floats.
    static constexpr int32_t kPartialBytes = kKeyGroups * kTileTokens * kWarpSize * 4 * 4;
    // Each key group's row maxima (then, after the loop, row sums), [row][key group] floats.
    static constexpr int32_t kRowStatBytes = kRows * kKeyGroups * 4;
    // The running row maxima, two slots: tile i reads slot i % 2 and warp 0 writes slot (i + 1) % 2.
    static constexpr int32_t kRowMaxSlots = 2;
    static constexpr int32_t kRowMaxBytes = kRowMaxSlots * kRows * 4;
    // P^T as f16 [row][key], rows padded by 16 bytes so the quads' 4-byte stores and the ldmatrix
    // rows fall in distinct banks.
    static constexpr int32_t kPRowBytes = kTileKeys * 2 + 16;
    static constexpr int32_t kPBytes = kRows * kPRowBytes;
    static constexpr int32_t kAmaxBytes = kWarps * 4;
    // The output staging after the loop: O fp32 [row][dim] over the ring.
    static constexpr int32_t kOutRowBytes = kHeadDim * 4;
    static constexpr int32_t kOutBytes = kRows * kOutRowBytes;

    struct SmemPlan {
        static constexpr int32_t kQ = 0;
        static constexpr int32_t kRing = kQ + kQBytes;
        static constexpr int32_t kOut = kRing;  // reused after the key loop
        static constexpr int32_t kPartial = kRing + kRingChunks * kChunkBytes;
        static constexpr int32_t kRowStats = kPartial + kPartialBytes;
        static constexpr int32_t kRowMax = kRowStats + kRowStatBytes;
        static constexpr int32_t kP = kRowMax + kRowMaxBytes;
        static constexpr int32_t kAmax = kP + kPBytes;
        static constexpr int32_t kEnd = kAmax + kAmaxBytes;
        static constexpr int32_t kBytes = kEnd;
    };
    static constexpr int32_t kSmemBytes = SmemPlan::kBytes;
    static constexpr int32_t kSmemAlign = 128;

    // Named barriers: 0 is __syncthreads; 1 + g joins the two warps of key group g (both sync).
    static constexpr int32_t kPairBarrierBase = 1;
    static constexpr int32_t kPairThreads = kDimHalves * kWarpSize;

    static constexpr int32_t kMinSm = 90;  // cvt e4m3x2 (sm_89+); 219 KB of shared memory need sm_90

    static_assert(kVecsPerRow == kWarpSize, "a lane copies one 16-byte vector of every key row");
    static_assert(kSubTileKeys == kMmaM, "a sub-tile is the m of one mma");
    static_assert(kDimHalves == 2, "a key group's two warps: one adds the other's partial scores");
    static_assert(kDimsPerWarp % kDimBlock == 0, "a warp's O^T dims are whole ldmatrix blocks");
    static_assert(kKeysPerCopyWarp * kWarps == kTileKeys && kSubTileKeys % kKeysPerCopyWarp == 0,
                  "a warp's copy keys lie in one sub-tile, so in one page");
    static_assert(kOutBytes <= kRingChunks * kChunkBytes, "the output staging fits in the ring");
    static_assert(kPRowBytes % kVecBytes == 0, "ldmatrix rows are 16-byte aligned");
    static_assert(kSmemBytes <= kSmemLimitSm90, "must fit sm_90 shared memory (227 KB)");

    static constexpr KernelDesc desc = {
        "verify_e4m3_d512", "wideattn_verify_e4m3_d512",
        kBF16, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,split_kv,few_tokens", kKindPrefill, "wideattn_verify_e4m3_d512_split"};
};

// The same kernel for Q already in e4m3 with a per-tensor *q_scale (kernel_q.cu).
struct VerifyE4m3QD512Traits : VerifyE4m3D512Traits {
    static constexpr KernelDesc desc = {
        "verify_e4m3q_d512", "wideattn_verify_e4m3q_d512",
        kE4M3, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,fp8_q,split_kv,few_tokens", kKindPrefill,
        "wideattn_verify_e4m3q_d512_split"};
};

}  // namespace wideattn
