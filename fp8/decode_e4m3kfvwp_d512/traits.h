// traits.h - compile-time constants of the pipelined form of decode_e4m3kfvw_d512 (kernel
// wideattn_decode_e4m3kfvwp_d512, sm_90a; a candidate): decode_e4m3kfvw_d512's traits, block and
// arithmetic (fp8/decode_e4m3kfvw_d512/), with kPipelined: a warpgroup issues tile i's P V wgmma
// and leaves it in flight under tile i + 1's score wgmma and rotated-dim build, one wait for both
// (mainloop.cuh, group_key_loop_pipelined). The same roundings in the same order: the same bits.
#pragma once

#include <cstdint>

#include "fp8/decode_e4m3kfvw_d512/traits.h"
#include "kernels/common/kernel_desc.h"

namespace wideattn {

struct DecodeE4m3KfvWPD512Traits : DecodeE4m3KfvWD512Traits {
    static constexpr bool kPipelined = true;

    // The P V dim blocks (of kPvDimBlocks) whose A fragments are loaded and whose wgmma are issued
    // before the next tile's scores; the others after its rotated build, before the common wait.
    // Half (ptxas, nvcc 13.0, split / plain entry): all 8 early keep 64 A registers live across the
    // build (255 registers and 236-260 bytes of spills); 4: 255 / 253 registers, no spills; 2: 245 /
    // 243, no spills, a quarter of P V under the build.
    static constexpr int32_t kPvEarlyBlocks = kPvDimBlocks / 2;

    static_assert(kPvEarlyBlocks >= 0 && kPvEarlyBlocks <= kPvDimBlocks, "a split of the P V dim blocks");

    static constexpr KernelDesc desc = {
        "decode_e4m3kfvwp_d512", "wideattn_decode_e4m3kfvwp_d512",
        kBF16, kE4M3, kBF16,
        kHeadDim, kHeadDim, kHeadDim,
        kGroup, kGroup,
        kTileTokens, kTileKeys, kGroup, kThreads, kSmemBytes, kMinSm,
        "varlen,paged,causal,gqa,lse,fp8_kv,split_kv,single_token,k_from_v,k_from_v_only", kKindPrefill,
        "wideattn_decode_e4m3kfvwp_d512_split"};
};

}  // namespace wideattn
