// spin_wait.cu - the queue-ahead probe of `wideattn bench --timing queued`: one thread spins on
// the global nanosecond timer for `ns` nanoseconds, so the host enqueues the timed call and its
// two events while the GPU is still busy, and the events then time the call's kernels back to
// back (the GPU time of the call, without the host's enqueue inside the event pair).
#include <cstdint>

extern "C" __global__ void wideattn_spin_wait(uint64_t ns) {
    uint64_t start;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    uint64_t now = start;
    while (now - start < ns) asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
}
