// host_cost.cpp - host time per call of the C API's launch paths: wideattn_prefill (validation,
// selection, split plan, tensor maps, launch, every call), wideattn_plan_run (the per-layer part
// of a plan) and wideattn_plan_create, on the call shapes of tools/bench/python_overhead.py: the
// 4 x 256-key decode, a 1 x 32k decode (split, with its workspace) and a 16k-token prefill (Gemma
// 4 31B global-layer heads, page 16). Each figure is the median over 5 repetitions of N calls,
// timed in batches of 50 back-to-back calls with an untimed stream synchronisation between
// batches (on a GPU a longer run fills the launch queue and then times the kernels: 2000 calls
// without it gave the 4 x 256 decode's kernel time, 15.7 us, for both launch paths, 2026-12-01).
// Consecutive calls cycle over 10 K/V caches (2 for the large shapes), as a model's global
// layers do. Beside them, the driver's floor: cuLaunchKernelEx of an empty kernel taking the same
// params struct (tools/bench/launch_floor.cu, its cubin beside this binary), as many launches per
// call as the plan makes (2 where it splits: the kernel and the merge), timed the same way; a
// plan's own work is plan_run minus that floor. Without a cubin for the device the floor is left
// out (-1 in the JSON) with a note.
//
// Runs on the driver WIDEATTN_LIBCUDA names (libcuda.so.1 by default): on a GPU it allocates the
// tensors (zeros) and times real launches; with the stand-in driver (tests/fake_driver/) on a
// machine without a GPU it measures the library's own host work, the driver's calls costing
// nearly nothing there.
//
//   build/tools/bench/wideattn_host_cost [--calls N] [--json FILE] [--floor-cubin FILE]
//   WIDEATTN_LIBCUDA=build/tests/libfake_cuda.so build/tools/bench/wideattn_host_cost
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "dispatch/bundle_files.h"
#include "dispatch/driver.h"
#include "wideattn.h"

namespace {

constexpr int kHq = 32, kHkv = 4, kD = 512, kPage = 16, kLayers = 10, kRepeats = 5;
constexpr int kBatch = 50;  // calls per timed batch: far below the launch queue's depth
constexpr uint64_t kMaxFloorCubinBytes = uint64_t{1} << 20;  // the empty kernel's cubin is a few KB

struct Shape {
    const char* name;
    int seqs, q_len, keys;
};
const Shape kShapes[] = {{"decode_4x256", 4, 1, 256}, {"decode_1x32k", 1, 1, 32768}, {"prefill_16k", 1, 16384, 16384}};

#define CHECK_CU(call)                                                                         \
    do {                                                                                       \
        const CUresult r_ = (call);                                                            \
        if (r_ != CUDA_SUCCESS) {                                                              \
            std::fprintf(stderr, "host_cost: %s failed: %s\n", #call,                          \
                         wideattn::cuda_error_text(drv, r_).c_str());                          \
            std::exit(1);                                                                      \
        }                                                                                      \
    } while (0)

#define CHECK_WA(call)                                                                         \
    do {                                                                                       \
        const wideattn_status s_ = (call);                                                     \
        if (s_ != WIDEATTN_OK) {                                                               \
            std::fprintf(stderr, "host_cost: %s: %s: %s\n", #call, wideattn_status_string(s_), \
                         wideattn_last_error());                                               \
            std::exit(1);                                                                      \
        }                                                                                      \
    } while (0)

// Host microseconds per call: `calls` calls in timed batches of at most kBatch, with an untimed
// `sync()` before each batch, so the launch queue never fills and the kernels' time never shows.
template <typename F, typename S>
double us_per_call(int calls, F&& call, S&& sync) {
    std::vector<double> samples;
    for (int r = 0; r < kRepeats; ++r) {
        double total = 0.0;
        for (int first = 0; first < calls; first += kBatch) {
            sync();
            const auto start = std::chrono::steady_clock::now();
            for (int i = first; i < std::min(calls, first + kBatch); ++i) call(i);
            const auto stop = std::chrono::steady_clock::now();
            total += std::chrono::duration<double, std::micro>(stop - start).count();
        }
        samples.push_back(total / calls);
    }
    sync();
    std::sort(samples.begin(), samples.end());
    return samples[kRepeats / 2];
}

// The directory of this executable ("" if it cannot be read).
std::string executable_dir() {
    char path[4096];
    const ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0) return "";
    const std::string full(path, static_cast<size_t>(n));
    const size_t slash = full.rfind('/');
    return slash == std::string::npos ? "" : full.substr(0, slash);
}

// The floor kernel, from `cubin` if given, else the first launch_floor.<arch>.cubin beside this
// binary that loads on the device (sm_NNa first, then sm_NN); nullptr and a reason otherwise.
CUfunction load_floor(const wideattn::Driver& drv, int major, int minor, const std::string& cubin, std::string* why) {
    std::vector<std::string> candidates;
    if (!cubin.empty()) {
        candidates.push_back(cubin);
    } else {
        const std::string arch = "sm_" + std::to_string(major * 10 + minor);
        const std::string dir = executable_dir();
        candidates = {dir + "/launch_floor." + arch + "a.cubin", dir + "/launch_floor." + arch + ".cubin"};
    }
    for (const std::string& path : candidates) {
        std::string image, unread;
        if (!wideattn::read_regular_file(path, kMaxFloorCubinBytes, &image, &unread)) continue;
        CUmodule module = nullptr;
        CUfunction function = nullptr;
        if (drv.cuModuleLoadData(&module, image.data()) == CUDA_SUCCESS &&
            drv.cuModuleGetFunction(&function, module, "wideattn_launch_floor") == CUDA_SUCCESS)
            return function;
    }
    *why = "no launch_floor cubin loads on this device (looked for " + candidates.front() +
           (candidates.size() > 1 ? " and " + candidates.back() : std::string()) + ")";
    return nullptr;
}

}  // namespace

int main(int argc, char** argv) {
    int calls = 2000;
    std::string json, floor_cubin;
    for (int i = 1; i < argc; ++i) {
        const std::string a = argv[i];
        if (a == "--calls" && i + 1 < argc) {
            calls = std::atoi(argv[++i]);
        } else if (a == "--json" && i + 1 < argc) {
            json = argv[++i];
        } else if (a == "--floor-cubin" && i + 1 < argc) {
            floor_cubin = argv[++i];
        } else {
            std::fprintf(stderr, "usage: %s [--calls N] [--json FILE] [--floor-cubin FILE]\n", argv[0]);
            return 2;
        }
    }
    if (calls < 1) {
        std::fprintf(stderr, "host_cost: --calls must be >= 1\n");
        return 2;
    }
    wideattn_status status;
    std::string error;
    const wideattn::Driver* d = wideattn::load_driver(&status, &error);
    if (!d) {
        std::fprintf(stderr, "host_cost: %s\n", error.c_str());
        return 1;
    }
    const wideattn::Driver& drv = *d;
    CUdevice device;
    CUcontext cu_ctx;
    CHECK_CU(drv.cuDeviceGet(&device, 0));
    CHECK_CU(drv.cuDevicePrimaryCtxRetain(&cu_ctx, device));
    CHECK_CU(drv.cuCtxSetCurrent(cu_ctx));
    char device_name[256] = {};
    drv.cuDeviceGetName(device_name, sizeof device_name, device);
    CUstream stream;
    CHECK_CU(drv.cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING));
    wideattn_context* ctx = nullptr;
    CHECK_WA(wideattn_open(&ctx, nullptr));

    int major = 0, minor = 0, sms = 0;
    drv.cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device);
    drv.cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device);
    drv.cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device);
    std::string floor_why;
    const CUfunction floor_kernel = load_floor(drv, major, minor, floor_cubin, &floor_why);
    if (!floor_kernel) {
        if (!floor_cubin.empty()) {
            std::fprintf(stderr, "host_cost: --floor-cubin %s: %s\n", floor_cubin.c_str(), floor_why.c_str());
            return 1;
        }
        std::printf("note: the launch floor is left out: %s\n", floor_why.c_str());
    }

    std::string report = "{\"tool\": \"wideattn_host_cost\", \"device\": \"" + std::string(device_name) +
                         "\", \"calls\": " + std::to_string(calls) + ", \"shapes\": [";
    std::printf("%-14s %12s %12s %12s %12s  (host us per call, median of %d x %d calls; device: %s)\n", "shape",
                "prefill", "plan_run", "launch_floor", "plan_create", kRepeats, calls, device_name);
    bool first = true;
    for (const Shape& shape : kShapes) {
        const int64_t total_q = int64_t{shape.seqs} * shape.q_len;
        const int pages = (shape.keys + kPage - 1) / kPage;
        const int64_t blocks = int64_t{shape.seqs} * pages;
        const size_t row_bytes = size_t{kHq} * kD * 2;
        const size_t cache_bytes = size_t(blocks) * kPage * kHkv * kD * 2;
        CUdeviceptr q, o, cu, lens, table;
        CHECK_CU(drv.cuMemAlloc(&q, total_q * row_bytes));
        CHECK_CU(drv.cuMemAlloc(&o, total_q * row_bytes));
        // Ten caches per shape where they are small; two of the large ones (the per-layer work is the
        // same, and ten 32k-key caches would be 2.5 GB). Their contents are never initialised:
        // only the host's time is measured.
        const int layers = cache_bytes <= (size_t{8} << 20) ? kLayers : 2;
        std::vector<CUdeviceptr> k(layers), v(layers);
        for (int l = 0; l < layers; ++l) {
            CHECK_CU(drv.cuMemAlloc(&k[l], cache_bytes));
            CHECK_CU(drv.cuMemAlloc(&v[l], cache_bytes));
        }
        CHECK_CU(drv.cuMemsetD8(q, 0, total_q * row_bytes));
        std::vector<int32_t> h_cu(shape.seqs + 1), h_lens(shape.seqs, shape.keys), h_table(blocks);
        for (int s = 0; s <= shape.seqs; ++s) h_cu[s] = s * shape.q_len;
        for (int64_t i = 0; i < blocks; ++i) h_table[i] = static_cast<int32_t>(i);
        CHECK_CU(drv.cuMemAlloc(&cu, h_cu.size() * 4));
        CHECK_CU(drv.cuMemAlloc(&lens, h_lens.size() * 4));
        CHECK_CU(drv.cuMemAlloc(&table, h_table.size() * 4));
        CHECK_CU(drv.cuMemcpyHtoD(cu, h_cu.data(), h_cu.size() * 4));
        CHECK_CU(drv.cuMemcpyHtoD(lens, h_lens.data(), h_lens.size() * 4));
        CHECK_CU(drv.cuMemcpyHtoD(table, h_table.data(), h_table.size() * 4));

        wideattn_prefill_params p{};
        p.q = reinterpret_cast<const void*>(q);
        p.q_token_stride = kHq * kD;
        p.q_head_stride = kD;
        p.k_cache = reinterpret_cast<const void*>(k[0]);
        p.v_cache = reinterpret_cast<const void*>(v[0]);
        p.k_block_stride = p.v_block_stride = kPage * kHkv * kD;
        p.k_slot_stride = p.v_slot_stride = kHkv * kD;
        p.k_head_stride = p.v_head_stride = kD;
        p.o = reinterpret_cast<void*>(o);
        p.o_token_stride = kHq * kD;
        p.o_head_stride = kD;
        p.cu_seqlens_q = reinterpret_cast<const int32_t*>(cu);
        p.seq_lens_k = reinterpret_cast<const int32_t*>(lens);
        p.block_table = reinterpret_cast<const int32_t*>(table);
        p.block_table_stride = pages;
        p.num_seqs = shape.seqs;
        p.total_q = static_cast<int32_t>(total_q);
        p.num_q_heads = kHq;
        p.num_kv_heads = kHkv;
        p.head_dim = kD;
        p.block_size = kPage;
        p.num_blocks = static_cast<int32_t>(blocks);
        p.q_dtype = p.kv_dtype = p.o_dtype = WIDEATTN_DTYPE_BF16;
        p.softmax_scale = 1.0f;
        p.max_seqlen_q = shape.q_len;
        p.max_seqlen_k = shape.keys;
        int64_t workspace_bytes = 0;
        CHECK_WA(wideattn_workspace_size(ctx, &p, &workspace_bytes));
        CUdeviceptr workspace = 0;
        if (workspace_bytes > 0) CHECK_CU(drv.cuMemAlloc(&workspace, static_cast<size_t>(workspace_bytes)));
        p.workspace = reinterpret_cast<void*>(workspace);
        p.workspace_bytes = workspace_bytes;

        // The prefill shape's kernels take ms each: a few calls only, or the queue fills.
        const int n = shape.q_len > 1 ? std::min(calls, 50) : calls;
        std::vector<wideattn_prefill_params> per_layer(layers, p);
        for (int l = 0; l < layers; ++l) {
            per_layer[l].k_cache = reinterpret_cast<const void*>(k[l]);
            per_layer[l].v_cache = reinterpret_cast<const void*>(v[l]);
        }
        CHECK_WA(wideattn_prefill(ctx, &p, stream));  // first launch: modules load
        const auto sync = [&] { CHECK_CU(drv.cuStreamSynchronize(stream)); };
        const double prefill_us = us_per_call(n, [&](int i) {
            if (wideattn_prefill(ctx, &per_layer[i % layers], stream) != WIDEATTN_OK) std::abort();
        }, sync);
        CHECK_CU(drv.cuStreamSynchronize(stream));
        wideattn_plan* plan = nullptr;
        CHECK_WA(wideattn_plan_create(ctx, &p, nullptr, &plan));
        const double run_us = us_per_call(n, [&](int i) {
            const int l = i % layers;
            if (wideattn_plan_run(plan, p.q, reinterpret_cast<const void*>(k[l]), reinterpret_cast<const void*>(v[l]),
                                  p.o, nullptr, stream) != WIDEATTN_OK)
                std::abort();
        }, sync);
        CHECK_CU(drv.cuStreamSynchronize(stream));
        CHECK_WA(wideattn_plan_destroy(plan));
        const double create_us = us_per_call(std::min(calls, 500), [&](int) {
            wideattn_plan* made = nullptr;
            if (wideattn_plan_create(ctx, &p, nullptr, &made) != WIDEATTN_OK) std::abort();
            wideattn_plan_destroy(made);
        }, [] {});
        wideattn_launch_plan launch{};
        CHECK_WA(wideattn_plan_launch(ctx, &p, major, minor, sms, &launch));
        // The floor: the plan's launch count of the empty kernel, its argument the same params.
        const int launches = launch.num_splits > 1 ? 2 : 1;
        double floor_us = -1.0;
        if (floor_kernel) {
            void* floor_args[] = {&p};
            CUlaunchConfig config{};
            config.gridDimX = config.gridDimY = config.gridDimZ = 1;
            config.blockDimX = 32;
            config.blockDimY = config.blockDimZ = 1;
            config.hStream = stream;
            floor_us = us_per_call(n, [&](int) {
                for (int l = 0; l < launches; ++l) {
                    const CUresult r = drv.cuLaunchKernelEx
                                           ? drv.cuLaunchKernelEx(&config, floor_kernel, floor_args, nullptr)
                                           : drv.cuLaunchKernel(floor_kernel, 1, 1, 1, 32, 1, 1, 0, stream,
                                                                floor_args, nullptr);
                    if (r != CUDA_SUCCESS) std::abort();
                }
            }, sync);
        }
        std::printf("%-14s %12.3f %12.3f %12.3f %12.3f  (%d split(s), %d launch(es))\n", shape.name, prefill_us,
                    run_us, floor_us, create_us, launch.num_splits, launches);
        char entry[640];
        std::snprintf(entry, sizeof entry,
                      "%s{\"shape\": \"%s\", \"calls\": %d, \"num_splits\": %d, \"launches\": %d, "
                      "\"prefill_us\": %.4f, \"plan_run_us\": %.4f, \"launch_floor_us\": %.4f, "
                      "\"plan_create_us\": %.4f}",
                      first ? "" : ", ", shape.name, n, launch.num_splits, launches, prefill_us, run_us, floor_us,
                      create_us);
        report += entry;
        first = false;
        for (int l = 0; l < layers; ++l) drv.cuMemFree(k[l]), drv.cuMemFree(v[l]);
        drv.cuMemFree(q), drv.cuMemFree(o), drv.cuMemFree(cu), drv.cuMemFree(lens), drv.cuMemFree(table);
        if (workspace) drv.cuMemFree(workspace);
    }
    report += "]}\n";
    if (!json.empty()) std::ofstream(json) << report;
    wideattn_close(ctx);
    drv.cuStreamDestroy(stream);
    drv.cuDevicePrimaryCtxRelease(device);
    return 0;
}
