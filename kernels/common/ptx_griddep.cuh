// ptx_griddep.cuh - device wrappers over the griddepcontrol PTX of programmatic dependent launch
// (sm_90 and later): a dependent grid (the split-KV merge, launched with the attribute
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION) may start before the grid it follows on
// the stream (the split kernel) has finished; it waits for that grid's completion and memory
// with wait_prerequisite_grids, and the prerequisite grid's blocks may let it be scheduled early
// with allow_dependent_launch. Both compile to nothing for archs before sm_90, where the
// dispatcher never makes a programmatic launch (dispatch/dependent_launch.h); on sm_90 and later
// a kernel launched without the attribute has no prerequisite grid in flight, and both are no-ops.
#pragma once

namespace wideattn::ptx {

// Waits until every prerequisite grid has completed and its memory operations are performed and
// visible to this thread (griddepcontrol.wait). Nothing this thread reads or writes in memory the
// prerequisite grid touches may come before it.
__device__ __forceinline__ void wait_prerequisite_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

// Signals that the grids depending on this one may be scheduled once every block of this grid
// has signalled or exited (griddepcontrol.launch_dependents; the first signal of a block counts).
// Scheduling only: it makes none of this grid's writes visible, which the dependent's
// wait_prerequisite_grids waits for whatever comes before or after this call.
__device__ __forceinline__ void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm volatile("griddepcontrol.launch_dependents;\n" ::);
#endif
}

}  // namespace wideattn::ptx
