// traits.h - the compile-time constants, the by-value argument and the manifest description of
// the K-from-V rebuild kernel (wideattn_k_from_v_rebuild, include/wideattn.h): the keys of a
// K-from-V call written into a bf16 K + V cache, head dim 512, bf16 or e4m3 V.
//   grid.x = min(num_seqs x pages a row addresses, kMaxGridX) (sequence, page) pairs, walked
//   grid-stride; block = kThreads, no shared memory. A block takes a page's (key, KV head) rows,
//   a warp kRowsInFlight of them at a time (their loads first; the rows of one key share its
//   cos / sin); lane l holds dims 8l .. 8l + 7 and their RoPE partners 256 + 8l .. 256 + 8l + 7, so
//   every lane rotates its own pairs. In the manifest tile.tokens = 1 and tile.keys =
//   kRowsPerPass (the rows a block builds at once), which with kMaxGridX is all the dispatcher
//   needs to rebuild this grid.
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"
#include "wideattn.h"

namespace wideattn {

// The kernel's one argument, by value: the K-from-V call (the library's validated copy), its
// description (the validated copy; the kernel reads no host pointer) and where the keys go.
struct KFromVRebuildArgs {
    wideattn_prefill_params params;
    wideattn_k_from_v kfv;
    wideattn_k_from_v_rebuild_out out;
};

struct KFromVRebuildTraits {
    static constexpr int32_t kHeadDim = 512;
    static constexpr int32_t kHalfDim = kHeadDim / 2;  // the RoPE pairs: dim d with d + kHalfDim
    static constexpr int32_t kWarpSize = 32;
    static constexpr int32_t kDimsPerLane = kHalfDim / kWarpSize;  // 8 of each half: one 16-byte bf16 vector
    static constexpr int32_t kWarps = 8;
    static constexpr int32_t kThreads = kWarps * kWarpSize;
    static constexpr int32_t kRowsInFlight = 4;  // (key, KV head) rows whose V loads a warp issues first
    static constexpr int32_t kRowsPerPass = kWarps * kRowsInFlight;
    // Blocks an SM holds (__launch_bounds__): two, so 16 warps keep their rows in flight (ptxas then
    // fits the kernel in 128 registers on sm_89 and sm_90a); one on sm_120a, whose ptxas spills at
    // that bound (12 bytes, nvcc 13.0).
    static constexpr int32_t kMinBlocksPerSm = 2;
    static constexpr int32_t kMinBlocksPerSmSm120 = 1;
    // grid.x cap: enough blocks to fill any GPU of the bundle several times over; a larger batch
    // of (sequence, page) pairs is walked grid-stride.
    static constexpr int32_t kMaxGridX = 16384;
    static constexpr const char* kSymbol = "wideattn_k_from_v_rebuild_kernel";

    static_assert(kDimsPerLane == 8, "a lane's dims of one half are one 16-byte bf16 vector");

    static constexpr KernelDesc desc = {
        "k_from_v_rebuild", kSymbol,
        kBF16, kBF16, kBF16,
        kHeadDim, kHeadDim, 1,
        1, 1,
        1, kRowsPerPass, 1, kThreads, 0, 80,
        "k_from_v,bf16_v,e4m3_v", kKindKFromVRebuild};
};

}  // namespace wideattn
