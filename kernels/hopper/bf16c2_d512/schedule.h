// schedule.h - the synchronisation schedule of the two-CTA Hopper-tier BF16 kernel
// (wgmma_bf16c2_d512) as plain host/device arithmetic, so the kernel and its CPU model of the
// protocol (tests/test_cta_pair_protocol.cpp) read the same rules: the order in which the producer
// fills the K and V rings, which phase of a ring barrier a tile completes or waits for, and which
// phase of a received-scores barrier a tile's exchange completes, with when it is armed; and, for
// the ordered form (wgmma_bf16c2pp_d512), the turns in which the two row groups of a CTA issue
// their products.
#pragma once

#include <cstdint>

#include "kernels/common/kernel_desc.h"

namespace wideattn::hopper::bf16c2 {

// Tile `tile` of a ring of kSlots is use tile / kSlots of its slot: the parity of the phase of the
// slot's full barrier that its copies complete, and of the empty barrier's phase its release
// completes. Filling a slot for tile t >= kSlots waits for the empty phase of tile t - kSlots.
template <int32_t kSlots>
WIDEATTN_HOST_DEVICE constexpr uint32_t use_parity(int32_t tile) {
    return static_cast<uint32_t>(tile / kSlots) & 1u;
}

template <int32_t kSlots>
WIDEATTN_HOST_DEVICE constexpr bool refill_waits(int32_t tile) {
    return tile >= kSlots;
}

// The producer's order over a block of n key tiles: one thread fills the K ring with K_0 ..
// K_n-1, another the V ring with V_0 .. V_n-1, each tile as soon as its slot's previous tile is
// released. The consumers use K_0, K_1, then for each step j: V_j and K_j+2, so each ring is used
// in the order it is filled.
template <class Load>
WIDEATTN_HOST_DEVICE inline void for_each_ring_load(int32_t n, Load&& load) {
    for (int32_t tile = 0; tile < n; ++tile) load(tile);
}

// The exchange of tile `tile`'s partial scores: its buffer and barrier parity (of kParities), and
// the parity of the barrier phase the tile's bytes complete (use tile / kParities of the barrier).
template <int32_t kParities>
WIDEATTN_HOST_DEVICE constexpr int32_t exchange_parity(int32_t tile) {
    return tile % kParities;
}

template <int32_t kParities>
WIDEATTN_HOST_DEVICE constexpr uint32_t exchange_phase(int32_t tile) {
    return static_cast<uint32_t>(tile / kParities) & 1u;
}

// The received-scores barrier of a parity is armed (one arrival expecting one tile's bytes) for
// the first tile of that parity at the start, and for tile + kParities right after the tile's
// scores are collected, as long as those tiles exist among the block's n.
template <int32_t kParities>
WIDEATTN_HOST_DEVICE constexpr bool armed_at_start(int32_t parity, int32_t n) {
    return parity < n;
}

template <int32_t kParities>
WIDEATTN_HOST_DEVICE constexpr bool rearm_after(int32_t tile, int32_t n) {
    return tile + kParities < n;
}

// The ordered form's turns: the two row groups of a CTA issue the wgmmas of a step (Q K_j+1^T and
// P_j V_j) in turns, row group 0's step j, row group 1's step j, row group 0's step j + 1, and so
// on, on one named barrier per row group (the waiting row group's bar.sync and the other's
// bar.arrive). Row group 0 starts the first turn without a wait; each row group grants the next
// turn after its issue, except row group 1 after its last step, which no turn follows: every wait
// then has exactly one grant, and no grant is left without a wait at the end.
WIDEATTN_HOST_DEVICE constexpr bool turn_waits(int32_t group, int32_t step) { return group != 0 || step > 0; }

WIDEATTN_HOST_DEVICE constexpr bool turn_grants(int32_t group, int32_t step, int32_t n) {
    return group == 0 || step + 1 < n;
}

// The row group whose turn follows a row group's.
WIDEATTN_HOST_DEVICE constexpr int32_t next_turn_group(int32_t group) { return 1 - group; }

}  // namespace wideattn::hopper::bf16c2
