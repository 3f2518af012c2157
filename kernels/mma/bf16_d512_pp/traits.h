// traits.h - the ping-pong variant of the BF16 mma.sync prefill kernel for head dim 512, GQA
// group 8 (kernel wideattn_mma_bf16_d512_pp). Everything but kPingPong, the name and the symbol is
// MmaBf16D512Traits (../bf16_d512/traits.h); the loads, the key loop and the body are the ones
// of ../bf16_d512/ instantiated on these traits, so this folder holds only the traits and the
// entry point.
//
// Why a kernel of its own: ping-pong (warps 4..7 run P V one key tile behind warps 0..3, so one
// group's softmax overlaps the other's matrix products) is the published design for sm_120a, but
// it measured 5% slower on the H200 (216.3 vs 226.8 TFLOP/s at the 16k prompt,
// kernels/mma/NOTES.md) and it has not been measured on sm_120a or sm_89. The bundle ships both;
// the kernel table (bundle/meson.build) ranks this one first on sm_120a and the other first
// everywhere else, and a tuning file written by `wideattn tune` on the user's GPU can reverse
// either choice per shape class.
#pragma once

#include "kernels/common/kernel_desc.h"
#include "kernels/mma/bf16_d512/traits.h"

namespace wideattn {

struct MmaBf16D512PpTraits : MmaBf16D512Traits {
    static constexpr bool kPingPong = true;

    static_assert(kSmemBytes <= kSmemLimitSm120, "must fit sm_120 / sm_89 / sm_86 shared memory");

    static constexpr KernelDesc desc =
        prefill_desc("mma_bf16_d512_pp", "wideattn_mma_bf16_d512_pp", kBF16, kBF16, kTileKeys, kSmemBytes, kMinSm,
                     "varlen,paged,causal,gqa,lse,split_kv", "wideattn_mma_bf16_d512_pp_split");
};

}  // namespace wideattn
