// block_timeline.cuh - an opt-in diagnostic of when each block of a kernel runs, in two forms,
// each built only with its macro (a variant cubin made apart: never the bundle's build); without
// either macro BlockTimeline is empty and a kernel that uses it keeps its machine code.
//
// An entry point (or the body it calls) makes a BlockTimeline first (it reads %globaltimer, in
// ns, common to all SMs) and calls finish("name") after its block's work: a block barrier, then
// thread 0 gives the block's line
//   wideattn-timeline NAME BLOCK_X BLOCK_Y BLOCK_Z SMID START_NS END_NS
// for tools/bench/block_timeline.py to summarise (ramp, block times, tail). A kernel that calls
// finish must let every thread reach it (no thread may exit early).
// - -DWIDEATTN_BLOCK_TIMELINE: thread 0 prints the line. Not for the wgmma kernels: the printf
//   call makes ptxas serialize every wgmma of the function.
// - -DWIDEATTN_BLOCK_TIMELINE_RECORDS: thread 0 appends a BlockTimelineRecord to the module's
//   wideattn_block_timeline_records (slot: an atomic add on wideattn_block_timeline_count; records
//   past kBlockTimelineRecords are counted, not kept), and `wideattn bench --block-timeline` reads
//   them back after each case and prints the lines. No call: the form for the wgmma kernels.
#pragma once

#include <cstdint>

#include "kernels/common/block_timeline_record.h"

namespace wideattn {

#if defined(WIDEATTN_BLOCK_TIMELINE) && defined(WIDEATTN_BLOCK_TIMELINE_RECORDS)
#error "WIDEATTN_BLOCK_TIMELINE and WIDEATTN_BLOCK_TIMELINE_RECORDS: one form of the block timeline at a time"
#endif

#if defined(WIDEATTN_BLOCK_TIMELINE_RECORDS)
}  // namespace wideattn

// The module's records and their count (unmangled: the host finds them by the names
// kBlockTimelineRecordsSymbol and kBlockTimelineCountSymbol, block_timeline_record.h).
extern "C" {
__device__ wideattn::BlockTimelineRecord wideattn_block_timeline_records[wideattn::kBlockTimelineRecords];
__device__ uint32_t wideattn_block_timeline_count;
}

namespace wideattn {
#endif

class BlockTimeline {
public:
#if defined(WIDEATTN_BLOCK_TIMELINE) || defined(WIDEATTN_BLOCK_TIMELINE_RECORDS)
    __device__ __forceinline__ BlockTimeline() : start_(now()) {}
    __device__ __forceinline__ void finish(const char* name) const {
        __syncthreads();
        if (threadIdx.x != 0) return;
        const uint64_t end = now();
        uint32_t sm = 0;
        asm volatile("mov.u32 %0, %%smid;\n" : "=r"(sm));
#if defined(WIDEATTN_BLOCK_TIMELINE)
        printf("wideattn-timeline %s %u %u %u %u %llu %llu\n", name, blockIdx.x, blockIdx.y, blockIdx.z, sm,
               static_cast<unsigned long long>(start_), static_cast<unsigned long long>(end));
#else
        const uint32_t slot = atomicAdd(&wideattn_block_timeline_count, 1u);
        if (slot >= kBlockTimelineRecords) return;
        BlockTimelineRecord& r = wideattn_block_timeline_records[slot];
        int i = 0;
        for (; i < BlockTimelineRecord::kNameBytes - 1 && name[i] != '\0'; ++i) r.name[i] = name[i];
        for (; i < BlockTimelineRecord::kNameBytes; ++i) r.name[i] = '\0';
        r.block_x = blockIdx.x;
        r.block_y = blockIdx.y;
        r.block_z = blockIdx.z;
        r.smid = sm;
        r.start_ns = start_;
        r.end_ns = end;
#endif
    }

private:
    __device__ __forceinline__ static uint64_t now() {
        uint64_t t;
        asm volatile("mov.u64 %0, %%globaltimer;\n" : "=l"(t));
        return t;
    }
    uint64_t start_;
#else
    __device__ __forceinline__ void finish(const char*) const {}
#endif
};

}  // namespace wideattn
