// block_timeline.cuh - an opt-in diagnostic of when each block of a kernel runs. Built only with
// -DWIDEATTN_BLOCK_TIMELINE (a variant cubin made apart: never the bundle's build); without the
// macro BlockTimeline is empty and a kernel that uses it keeps its machine code.
//
// An entry point (or the body it calls) makes a BlockTimeline first (it reads %globaltimer, in
// ns, common to all SMs) and calls finish("name") after its block's work: a block barrier, then
// thread 0 prints one line
//   wideattn-timeline NAME BLOCK_X BLOCK_Y BLOCK_Z SMID START_NS END_NS
// for tools/bench/block_timeline.py to summarise (ramp, block times, tail). A kernel that calls
// finish must let every thread reach it (no thread may exit early). Not for the wgmma kernels:
// the printf call makes ptxas serialize every wgmma of the function.
#pragma once

#include <cstdint>

namespace wideattn {

class BlockTimeline {
public:
#if defined(WIDEATTN_BLOCK_TIMELINE)
    __device__ __forceinline__ BlockTimeline() : start_(now()) {}
    __device__ __forceinline__ void finish(const char* name) const {
        __syncthreads();
        if (threadIdx.x != 0) return;
        const uint64_t end = now();
        uint32_t sm = 0;
        asm volatile("mov.u32 %0, %%smid;\n" : "=r"(sm));
        printf("wideattn-timeline %s %u %u %u %u %llu %llu\n", name, blockIdx.x, blockIdx.y, blockIdx.z, sm,
               static_cast<unsigned long long>(start_), static_cast<unsigned long long>(end));
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
