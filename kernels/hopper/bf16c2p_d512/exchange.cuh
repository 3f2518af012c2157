// exchange.cuh - what wgmma_bf16c2p_d512's home warpgroup of one CTA sends the fed warpgroup of the
// other (the same rows: thread t of one holds the accumulator rows of thread t of the other) through
// distributed shared memory: per key tile its P fragments (bf16, the A operand of P V) and the
// factors by which O is rescaled before that tile's P V, and after the last tile its row maxima and
// partial row sums (the epilogue's normalisation and LSE). Every message is stored by st.async,
// which completes its bytes on the receiving CTA's mbarrier.
//
// Flow control of the P messages (kMessageParities buffers, tile t in buffer t % kMessageParities):
// the fed warpgroup arms the received barrier of a buffer for one message per phase (every buffer
// at the start, buffer b again for tile t + kMessageParities right after it has read tile t).
// After reading tile t each of its warps hands the buffer back with a token: one st.async of 4
// bytes into the sender's token region, completing on the sender's freed barrier of that buffer,
// whose value is the XOR of every word the warp read (a warp reduction), so the store cannot issue
// before every lane's loads have returned. The sender arms its freed barrier of a buffer for one
// phase of tokens (at the start, and again right after it has waited for the tokens of the
// buffer's previous tile) and posts tile t into the buffer only after the tokens of tile
// t - kMessageParities: it never overwrites a message that has not been read, and the received
// barrier's phase of that tile has completed before any byte of tile t arrives. The tokens publish
// no data, so the sender waits for them without an acquire (no L1 invalidation); an arrival with
// release semantics at cluster scope was measured first and compiles to a GPU-wide memory barrier
// per warp and tile (MEMBAR.ALL.GPU, 13% of the kernel's stall samples: NOTES.md).
#pragma once

#include <cstdint>

#include "kernels/common/online_softmax.cuh"
#include "kernels/common/ptx_cluster.cuh"
#include "kernels/common/ptx_mma.cuh"
#include "kernels/common/ptx_tma.cuh"
#include "kernels/common/wgmma_block.cuh"
#include "kernels/hopper/bf16c2_d512/schedule.h"
#include "kernels/hopper/bf16c2p_d512/loads.cuh"

namespace wideattn::hopper::bf16c2p {

using bf16c2::armed_at_start;
using bf16c2::exchange_parity;
using bf16c2::exchange_phase;
using bf16c2::rearm_after;

// The partner CTA's receive, state, token and barrier regions (shared::cluster addresses). The plan is the
// same in both CTAs and a mapped address keeps the offsets of its CTA's window, so one mapped
// address (the receive region's) locates the others.
template <class Traits>
struct PartnerMap {
    uint32_t receive;

    __device__ __forceinline__ uint32_t state() const {
        return receive + (Traits::SmemPlan::kState - Traits::SmemPlan::kReceive);
    }
    __device__ __forceinline__ uint32_t tokens() const {
        return receive + (Traits::SmemPlan::kTokens - Traits::SmemPlan::kReceive);
    }
    __device__ __forceinline__ uint32_t barriers() const {
        return receive + (Traits::SmemPlan::kBarriers - Traits::SmemPlan::kReceive);
    }
};

template <class Traits>
__device__ __forceinline__ PartnerMap<Traits> partner_map(const SharedMap& map, uint32_t partner_rank) {
    return PartnerMap<Traits>{ptx::map_shared_rank(map.receive, partner_rank)};
}

// Offsets inside the receive region: the message of a parity, its P vector `vec` of thread t, the
// rescale factors of thread t.
template <class Traits>
__device__ __forceinline__ uint32_t p_vec_offset(int32_t parity, int32_t vec, int32_t thread) {
    return static_cast<uint32_t>(parity * Traits::kMessageBytes + (vec * Traits::kWarpGroupThreads + thread) * Traits::kVecBytes);
}

template <class Traits>
__device__ __forceinline__ uint32_t alpha_offset(int32_t parity, int32_t thread) {
    return static_cast<uint32_t>(parity * Traits::kMessageBytes + Traits::kPMessageBytes + thread * Traits::kAlphaBytes);
}

// Thread 0 of the fed warpgroup: the received barrier of `parity` armed for one P message.
template <class Traits>
__device__ __forceinline__ void arm_receive(const SharedMap& map, int32_t parity) {
    using B = Barriers<Traits>;
    ptx::mbarrier_arrive_expect_bytes(map.barriers + B::offset(B::kReceived + parity), Traits::kMessageBytes);
}

// Thread 0 of the home warpgroup: the freed barrier of `parity` armed for one phase of tokens.
template <class Traits>
__device__ __forceinline__ void arm_freed(const SharedMap& map, int32_t parity) {
    using B = Barriers<Traits>;
    ptx::mbarrier_arrive_expect_bytes(map.barriers + B::offset(B::kFreed + parity), Traits::kFreedBytes);
}

// Thread 0 of the fed warpgroup: the state barrier armed for the final row statistics.
template <class Traits>
__device__ __forceinline__ void arm_state(const SharedMap& map) {
    using B = Barriers<Traits>;
    ptx::mbarrier_arrive_expect_bytes(map.barriers + B::offset(B::kState), Traits::kStateBytes);
}

// The home warpgroup's P of tile `tile` and its rescale factors (1 where O is not rescaled) into
// the partner's buffer of the tile's parity, once the partner has read that buffer's previous
// message (tile - 2); the freed barrier re-armed for the tokens of this one.
template <class Traits>
__device__ __forceinline__ void post_probs(const SharedMap& map, const PartnerMap<Traits>& partner, int32_t tile,
                                           int32_t thread, const uint32_t (&prob)[Traits::kPvSteps][4],
                                           const float (&alpha)[2]) {
    using B = Barriers<Traits>;
    const int32_t parity = exchange_parity<Traits::kMessageParities>(tile);
    if (tile >= Traits::kMessageParities) {
        ptx::mbarrier_wait_cluster_relaxed(map.barriers + B::offset(B::kFreed + parity),
                                           exchange_phase<Traits::kMessageParities>(tile - Traits::kMessageParities));
        if (thread == 0) arm_freed<Traits>(map, parity);
        ptx::converge_warp();
    }
    const uint32_t barrier = partner.barriers() + B::offset(B::kReceived + parity);
#pragma unroll
    for (int32_t kk = 0; kk < Traits::kPvSteps; ++kk)
        ptx::st_async_u32x4(partner.receive + p_vec_offset<Traits>(parity, kk, thread), prob[kk][0], prob[kk][1],
                            prob[kk][2], prob[kk][3], barrier);
    ptx::st_async_u32x2(partner.receive + alpha_offset<Traits>(parity, thread), __float_as_uint(alpha[0]),
                        __float_as_uint(alpha[1]), barrier);
}

// The fed warpgroup's P of tile `tile` and its rescale factors, read once the message has landed;
// the buffer's received barrier re-armed for tile + 2 when that tile exists (`rearm`), and the
// buffer handed back to the sender (one token per warp on the sender's freed barrier).
template <class Traits>
__device__ __forceinline__ void receive_probs(const SharedMap& map, const PartnerMap<Traits>& partner, int32_t tile, bool rearm,
                                              int32_t thread, uint32_t (&prob)[Traits::kPvSteps][4],
                                              float (&alpha)[2]) {
    using B = Barriers<Traits>;
    const int32_t parity = exchange_parity<Traits::kMessageParities>(tile);
    ptx::mbarrier_wait_cluster(map.barriers + B::offset(B::kReceived + parity),
                               exchange_phase<Traits::kMessageParities>(tile));
#pragma unroll
    for (int32_t kk = 0; kk < Traits::kPvSteps; ++kk) {
        const float4 v = ptx::load_shared_f32x4(map.receive + p_vec_offset<Traits>(parity, kk, thread));
        prob[kk][0] = __float_as_uint(v.x);
        prob[kk][1] = __float_as_uint(v.y);
        prob[kk][2] = __float_as_uint(v.z);
        prob[kk][3] = __float_as_uint(v.w);
    }
    const float2 a = ptx::load_shared_f32x2(map.receive + alpha_offset<Traits>(parity, thread));
    alpha[0] = a.x;
    alpha[1] = a.y;
    if (rearm && thread == 0) arm_receive<Traits>(map, parity);
    // The token: every word this warp read, so that it leaves once they have all returned.
    uint32_t read = __float_as_uint(a.x) ^ __float_as_uint(a.y);
#pragma unroll
    for (int32_t kk = 0; kk < Traits::kPvSteps; ++kk) read ^= prob[kk][0] ^ prob[kk][1] ^ prob[kk][2] ^ prob[kk][3];
    const uint32_t token = __reduce_xor_sync(0xffffffffu, read);
    const int32_t warp = thread / Traits::kWarpSize;
    if (thread % Traits::kWarpSize == 0)
        ptx::st_async_u32(partner.tokens() + static_cast<uint32_t>((parity * Traits::kGroupWarps + warp) * Traits::kTokenBytes),
                          token, partner.barriers() + B::offset(B::kFreed + parity));
    ptx::converge_warp();
}

// The home warpgroup's row statistics after its last tile (this thread's maxima and partial row
// sums) into the partner's state region.
template <class Traits>
__device__ __forceinline__ void post_state(const PartnerMap<Traits>& partner, int32_t thread, const RowState& state) {
    using B = Barriers<Traits>;
    ptx::st_async_u32x4(partner.state() + thread * Traits::kStateVecBytes, __float_as_uint(state.max_log2[0]),
                        __float_as_uint(state.max_log2[1]), __float_as_uint(state.sum[0]),
                        __float_as_uint(state.sum[1]), partner.barriers() + B::offset(B::kState));
}

// The fed warpgroup's row statistics: the partner's home warpgroup's, once they have landed.
template <class Traits>
__device__ __forceinline__ RowState receive_state(const SharedMap& map, int32_t thread) {
    using B = Barriers<Traits>;
    ptx::mbarrier_wait_cluster(map.barriers + B::offset(B::kState), 0);
    const float4 v = ptx::load_shared_f32x4(map.state + thread * Traits::kStateVecBytes);
    return RowState{{v.x, v.y}, {v.z, v.w}};
}

}  // namespace wideattn::hopper::bf16c2p
