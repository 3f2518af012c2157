// dsmem_transport_probe.cu - cycles of a partial-score exchange between the two CTAs of a cluster
// by four transports, with no other work: "st.async" (what wgmma_bf16c2_d512 does: 16-byte
// st.async into the partner's shared memory completing on its mbarrier), "remote-st" (plain
// st.shared::cluster stores, then one release arrival per warp on the partner's mbarrier),
// "bulk-warp" (each warp stores its quarter into a local staging buffer and one lane copies it
// with cp.async.bulk into the partner, completing on its mbarrier), "bulk-group" (the warpgroup's
// tile staged, one named barrier, one thread copies all of it). The receiver waits with an
// acquiring cluster-scope try_wait and reads the tile; every value is checked. Modes "pingpong"
// (rank 0 posts, rank 1 waits and posts back: a step is one round trip) and "exchange" (both CTAs
// post and wait every step, as the kernel); 1 or 2 warpgroups, 2-8 KB a warpgroup, one cluster or
// 66 (one CTA per SM). Build: nvcc -O3 -arch=sm_90a -std=c++17.
#include <cstdint>
#include <cstdio>
#include <cuda_runtime.h>

constexpr int kGroupThreads = 128;
constexpr int kWarps = 4;
constexpr int kMaxBytes = 8192;
constexpr int kParities = 2;
constexpr int kBufBytes = 2 * kParities * kMaxBytes;  // [group][parity][tile]
constexpr int kSmemBytes = 160 * 1024;                // one CTA an SM
enum Transport { kStAsync, kRemoteSt, kBulkWarp, kBulkGroup, kTransports };
const char* kTransportNames[kTransports] = {"st.async", "remote-st", "bulk-warp", "bulk-group"};

__device__ __forceinline__ uint32_t rank_in_cluster() { uint32_t r; asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r)); return r; }
__device__ __forceinline__ uint32_t mapa(uint32_t a, uint32_t r) { uint32_t m; asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(m) : "r"(a), "r"(r)); return m; }
__device__ __forceinline__ void cluster_sync() { asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;" ::: "memory"); }
__device__ __forceinline__ void arm(uint32_t bar, uint32_t bytes) { asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"(bar), "r"(bytes) : "memory"); }
__device__ __forceinline__ void wait(uint32_t bar, uint32_t parity) {
    uint32_t done = 0;
    do { asm volatile("{.reg .pred p; mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 p, [%1], %2; selp.u32 %0, 1, 0, p;}" : "=r"(done) : "r"(bar), "r"(parity) : "memory"); } while (!done);
}

// Thread t (warp w, lane l), vector i of a tile: byte w * bytes / 4 + i * 512 + l * 16, so each
// warp's part is contiguous.
__device__ __forceinline__ uint32_t vec_offset(int bytes, int t, int i) { return (t / 32) * (bytes / kWarps) + i * 512 + (t % 32) * 16; }

template <int kTransport>
__device__ __forceinline__ void post(uint32_t remote_tile, uint32_t remote_bar, uint32_t stage_tile, int bytes, int t, int g, float v) {
    const int vecs = bytes / (kGroupThreads * 16);
    if (kTransport == kStAsync) {
        for (int i = 0; i < vecs; ++i)
            asm volatile("st.async.shared::cluster.mbarrier::complete_tx::bytes.v4.b32 [%0], {%1, %1, %1, %1}, [%2];" :: "r"(remote_tile + vec_offset(bytes, t, i)), "r"(__float_as_uint(v)), "r"(remote_bar) : "memory");
    } else if (kTransport == kRemoteSt) {
        for (int i = 0; i < vecs; ++i)
            asm volatile("st.shared::cluster.v4.b32 [%0], {%1, %1, %1, %1};" :: "r"(remote_tile + vec_offset(bytes, t, i)), "r"(__float_as_uint(v)) : "memory");
        __syncwarp();
        if (t % 32 == 0) asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];" :: "r"(remote_bar) : "memory");
    } else {
        for (int i = 0; i < vecs; ++i)
            asm volatile("st.shared.v4.b32 [%0], {%1, %1, %1, %1};" :: "r"(stage_tile + vec_offset(bytes, t, i)), "r"(__float_as_uint(v)) : "memory");
        asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
        if (kTransport == kBulkWarp) {
            __syncwarp();
            if (t % 32 == 0) {
                const uint32_t part = (t / 32) * (bytes / kWarps);
                asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" :: "r"(remote_tile + part), "r"(stage_tile + part), "r"(bytes / kWarps), "r"(remote_bar) : "memory");
            }
        } else {
            asm volatile("bar.sync %0, %1;" :: "r"(1 + g), "r"(kGroupThreads) : "memory");
            if (t == 0)
                asm volatile("cp.async.bulk.shared::cluster.shared::cta.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];" :: "r"(remote_tile), "r"(stage_tile), "r"(bytes), "r"(remote_bar) : "memory");
        }
    }
}

// Reads this thread's vectors of the received tile; counts those that are not the sender's value.
__device__ __forceinline__ int collect(const unsigned char* tile, int bytes, int t, float want, float* acc) {
    const int vecs = bytes / (kGroupThreads * 16);
    int bad = 0;
    for (int i = 0; i < vecs; ++i) {
        const float4 x = *reinterpret_cast<const float4*>(tile + vec_offset(bytes, t, i));
        bad += (x.x != want) + (x.y != want) + (x.z != want) + (x.w != want);
        *acc += x.x;
    }
    return bad;
}

template <int kTransport, bool kPingPong>
__global__ void __cluster_dims__(2, 1, 1) __launch_bounds__(256, 1)
    probe(int bytes, int groups, int steps, long long* cycles, int* errors, float* sink) {
    extern __shared__ __align__(128) unsigned char smem[];
    unsigned char* buf = smem;                    // received tiles [group][parity]
    unsigned char* stage = smem + kBufBytes;      // staged tiles of the bulk transports
    uint64_t* bar = reinterpret_cast<uint64_t*>(smem + 2 * kBufBytes);  // [group][parity]
    const uint32_t r = rank_in_cluster();
    const int g = threadIdx.x / kGroupThreads, t = threadIdx.x % kGroupThreads;
    const bool by_bytes = kTransport != kRemoteSt;
    if (threadIdx.x == 0) {
        for (int i = 0; i < 2 * kParities; ++i) {
            const uint32_t b = (uint32_t)__cvta_generic_to_shared(&bar[i]);
            asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;" :: "r"(b), "r"(by_bytes ? 1 : kWarps));
            if (by_bytes && i % kParities < steps) arm(b, bytes);
        }
        asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
    }
    cluster_sync();
    float acc = 0.0f;
    int bad = 0;
    const long long t0 = clock64();
    if (g < groups) {
        for (int s = 0; s < steps; ++s) {
            const int p = s % kParities;
            const int slot = g * kParities + p;
            const uint32_t own_bar = (uint32_t)__cvta_generic_to_shared(&bar[slot]);
            const uint32_t own_tile = (uint32_t)__cvta_generic_to_shared(buf + slot * kMaxBytes);
            const uint32_t remote_tile = mapa(own_tile, r ^ 1), remote_bar = mapa(own_bar, r ^ 1);
            const uint32_t stage_tile = (uint32_t)__cvta_generic_to_shared(stage + slot * kMaxBytes);
            const float mine = 1.0f + s + 10000.0f * r, theirs = 1.0f + s + 10000.0f * (r ^ 1);
            auto receive = [&] {
                wait(own_bar, (s / kParities) & 1);
                bad += collect(buf + slot * kMaxBytes, bytes, t, theirs, &acc);
                if (by_bytes && t == 0 && s + kParities < steps) arm(own_bar, bytes);
            };
            if (kPingPong && r == 1) receive();
            post<kTransport>(remote_tile, remote_bar, stage_tile, bytes, t, g, mine);
            if (!kPingPong || r == 0) receive();
        }
    }
    const long long t1 = clock64();
    if (t == 0 && g == 0) cycles[blockIdx.x] = t1 - t0;
    if (bad) atomicAdd(errors, bad);
    sink[blockIdx.x * blockDim.x + threadIdx.x] = acc;
    cluster_sync();
}

template <int kTransport, bool kPingPong>
void run(int bytes, int groups, int clusters, int steps, long long* d_cycles, int* d_errors, float* d_sink) {
    cudaFuncSetAttribute(probe<kTransport, kPingPong>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
    for (int rep = 0; rep < 2; ++rep)  // the first launch warms up
        probe<kTransport, kPingPong><<<clusters * 2, 256, kSmemBytes>>>(bytes, groups, steps, d_cycles, d_errors, d_sink);
}

int main() {
    const int steps = 4096;
    long long* d_cycles; int* d_errors; float* d_sink;
    cudaMalloc(&d_cycles, 132 * sizeof(long long)); cudaMalloc(&d_errors, sizeof(int)); cudaMalloc(&d_sink, 132 * 256 * sizeof(float));
    int clock_khz = 0; cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, 0);
    printf("max SM clock %d kHz; cycles/step are SM clocks (clock64), median / min / max over the CTAs\n", clock_khz);
    printf("%-10s %-9s %5s %6s %8s %10s %8s %8s %6s\n", "transport", "mode", "bytes", "groups", "clusters", "median", "min", "max", "wrong");
    int failures = 0;
    for (int transport = 0; transport < kTransports; ++transport)
        for (int mode = 0; mode < 2; ++mode)
            for (int groups = 1; groups <= (mode == 0 ? 1 : 2); ++groups)
                for (int bytes : {2048, 4096, 8192})
                    for (int clusters : {1, 66}) {
                        cudaMemset(d_errors, 0, sizeof(int));
                        auto go = [&](auto tp, auto pp) { run<decltype(tp)::value, decltype(pp)::value>(bytes, groups, clusters, steps, d_cycles, d_errors, d_sink); };
                        using T0 = std::integral_constant<int, kStAsync>; using T1 = std::integral_constant<int, kRemoteSt>;
                        using T2 = std::integral_constant<int, kBulkWarp>; using T3 = std::integral_constant<int, kBulkGroup>;
                        using P = std::true_type; using E = std::false_type;
                        if (transport == 0) mode == 0 ? go(T0{}, P{}) : go(T0{}, E{});
                        if (transport == 1) mode == 0 ? go(T1{}, P{}) : go(T1{}, E{});
                        if (transport == 2) mode == 0 ? go(T2{}, P{}) : go(T2{}, E{});
                        if (transport == 3) mode == 0 ? go(T3{}, P{}) : go(T3{}, E{});
                        const cudaError_t e = cudaDeviceSynchronize();
                        if (e != cudaSuccess) { printf("error: %s\n", cudaGetErrorString(e)); return 1; }
                        long long h[132]; int wrong = 0;
                        cudaMemcpy(h, d_cycles, clusters * 2 * sizeof(long long), cudaMemcpyDeviceToHost);
                        cudaMemcpy(&wrong, d_errors, sizeof(int), cudaMemcpyDeviceToHost);
                        const int n = clusters * 2;
                        double v[132];
                        for (int i = 0; i < n; ++i) v[i] = (double)h[i] / steps;
                        for (int i = 0; i < n; ++i) for (int j = i + 1; j < n; ++j) if (v[j] < v[i]) { const double x = v[i]; v[i] = v[j]; v[j] = x; }
                        printf("%-10s %-9s %5d %6d %8d %10.1f %8.1f %8.1f %6d\n", kTransportNames[transport], mode == 0 ? "pingpong" : "exchange",
                               bytes, groups, clusters, v[n / 2], v[0], v[n - 1], wrong);
                        failures += wrong != 0;
                    }
    return failures ? 2 : 0;
}
