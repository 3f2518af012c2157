// inspect.cpp - `wideattn inspect`: lists the bundle's kernels (arch, dtypes, tile, threads,
// shared memory) with register/spill counts read from the cubins through the driver where a
// device can load them, and from the build's ptxas report otherwise (spill stores and spill
// loads apart, as the manifest records them).
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string>

#include "dispatch/bundle_files.h"
#include "dispatch/driver.h"
#include "dispatch/manifest.h"
#include "dispatch/tuning.h"
#include "tools/cli/cli_common.h"
#include "tools/harness/device_problem.h"
#include "tools/cli/subcommands.h"

namespace wideattn::cli {
namespace {

constexpr const char* kKernelHeader = "kernel";
constexpr char kSpillHeader[] = "spill st/ld";  // ptxas spill stores / spill loads, bytes per thread
constexpr int kSpillWidth = sizeof kSpillHeader - 1;
constexpr uint64_t kMaxInspectedFileBytes = uint64_t{1} << 30;  // cubins and the tuning file

struct LiveResources {
    bool ok = false;
    int registers = 0, local_bytes = 0;
    std::string why;
};

// Loads the cubin on the opened device and reads the function's attributes.
LiveResources read_live(const GpuDevice* gpu, const std::string& dir, const wideattn_kernel_info& k) {
    LiveResources live;
    if (!gpu) {
        live.why = "no GPU";
        return live;
    }
    const Driver& drv = gpu->driver();
    std::string image, why;
    if (!read_regular_file(dir + "/" + k.cubin, kMaxInspectedFileBytes, &image, &why)) {
        live.why = why;
        return live;
    }
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    if (image.empty() || drv.cuModuleLoadData(&module, image.data()) != CUDA_SUCCESS) {
        live.why = "cubin does not load on this device";
        return live;
    }
    if (drv.cuModuleGetFunction(&function, module, k.symbol) == CUDA_SUCCESS &&
        drv.cuFuncGetAttribute(&live.registers, CU_FUNC_ATTRIBUTE_NUM_REGS, function) == CUDA_SUCCESS &&
        drv.cuFuncGetAttribute(&live.local_bytes, CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES, function) == CUDA_SUCCESS) {
        live.ok = true;
    } else {
        live.why = "symbol not found";
    }
    drv.cuModuleUnload(module);
    return live;
}

// The spill column of a kernel from the build's ptxas report: "STORES/LOADS" in bytes per thread
// ("?" for a count the manifest does not know), from the manifest entry of the same name and arch.
std::string ptxas_spills(const Manifest& manifest, const wideattn_kernel_info& k) {
    for (const ManifestKernel& m : manifest.kernels) {
        if (m.name != k.name || m.arch != k.arch) continue;
        const auto count = [](int32_t bytes) { return bytes < 0 ? std::string("?") : std::to_string(bytes); };
        return count(m.spill_stores) + "/" + count(m.spill_loads);
    }
    return "?";
}

const char* tuning_state_name(int32_t state) {
    switch (state) {
        case WIDEATTN_TUNING_NONE: return "none";
        case WIDEATTN_TUNING_READ: return "read";
        case WIDEATTN_TUNING_ACTIVE: return "active";
        case WIDEATTN_TUNING_IGNORED: return "ignored";
    }
    return "unknown";
}

// Which selection is in force: the bundle's checksum, the tuning file's state and reason, and its
// choices (class, dtypes, kernel, the totals behind it).
void print_selection(const wideattn_context* ctx) {
    std::printf("bundle checksum: %s\n", wideattn_bundle_checksum(ctx));
    int32_t state = WIDEATTN_TUNING_NONE;
    size_t length = 0;
    wideattn_tuning_status(ctx, &state, nullptr, 0, &length);
    std::string message(length + 1, '\0');
    wideattn_tuning_status(ctx, &state, &message[0], message.size(), &length);
    message.resize(length);
    std::printf("selection: %s\ntuning %s: %s\n",
                state == WIDEATTN_TUNING_NONE || state == WIDEATTN_TUNING_IGNORED
                    ? "the kernel table's priority order (highest priority among the kernels that fit)"
                    : "the tuning file's choice per shape class where its kernel fits, else the priority order",
                tuning_state_name(state), message.c_str());
    if (state == WIDEATTN_TUNING_NONE) return;
    TuningFile file;
    std::string text, error;
    if (!read_regular_file(wideattn_tuning_path(ctx), kMaxInspectedFileBytes, &text, &error) ||
        !parse_tuning(text, &file, &error))
        return;
    for (const TuningChoice& c : file.choices) {
        std::printf("  %-13s %s/%s -> %-18s", shape_class_name(c.shape_class), dtype_label(c.q_dtype),
                    dtype_label(c.kv_dtype), c.kernel.c_str());
        for (const TuningTiming& t : c.timings) std::printf(" %s %.3f ms", t.kernel.c_str(), t.total_ms);
        std::printf("\n");
    }
}

void print_help() {
    std::printf(
        "usage: wideattn inspect [--bundle DIR] [--device N]\n\n"
        "Lists every kernel of the bundle: name, arch, dtypes (q/kv/o), head dims, group range,\n"
        "tile (query tokens x keys x heads per block), threads, dynamic shared memory, and the\n"
        "registers, spill and stack bytes per thread. With a CUDA driver and a device that can load\n"
        "a cubin, registers and local memory (spills and stack together, in the 'stack' column) are\n"
        "read from the loaded cubin (source 'driver'; 'spill st/ld' is '-'); otherwise they come\n"
        "from the build's ptxas report (source 'ptxas'): 'spill st/ld' is ptxas's spill stores /\n"
        "spill loads in bytes (e.g. 12/12: 12 bytes stored, 12 loaded), 'stack' its stack frame.\n"
        "Also shows which selection is in force: the bundle's checksum and the tuning file's state\n"
        "(none, read, active, ignored) with the reason and its choices (`wideattn tune` writes it).\n\n"
        "  --bundle DIR   bundle directory (default: $WIDEATTN_BUNDLE, the build tree's bundle, or the installed one)\n"
        "  --device N     CUDA device ordinal used to read live attributes (default 0)\n");
}

}  // namespace

int inspect_main(int argc, char** argv) {
    std::string bundle_flag;
    long long device = 0;
    ArgReader args("inspect", argc, argv);
    while (args.next()) {
        if (args.is("--help") || args.is("-h")) {
            print_help();
            return 0;
        } else if (args.is("--bundle")) {
            if (!args.value(&bundle_flag)) return 2;
        } else if (args.is("--device")) {
            if (!args.int_value(0, kMaxDeviceOrdinal, &device)) return 2;
        } else {
            args.report_unknown();
            return 2;
        }
    }
    wideattn_context* ctx = open_bundle(resolve_bundle_dir(bundle_flag, argv[0]), "inspect");
    if (!ctx) return 2;
    const std::string dir = wideattn_bundle_dir(ctx);
    wideattn_status status;
    std::string gpu_error;
    std::unique_ptr<GpuDevice> gpu = GpuDevice::open(static_cast<int>(device), &status, &gpu_error);
    const int count = wideattn_kernel_count(ctx);
    std::printf("bundle: %s (%d kernels, library %s)\n", dir.c_str(), count, wideattn_version());
    if (gpu)
        std::printf("device %lld: %s, sm_%d%d, %d SMs\n", device, gpu->name().c_str(), gpu->cc_major(), gpu->cc_minor(),
                    gpu->multiprocessors());
    else
        std::printf("device: none (%s); register counts from the build's ptxas report\n", gpu_error.c_str());
    print_selection(ctx);
    Manifest manifest;  // the ptxas spill stores and loads apart (the C API's spill_bytes is their sum)
    std::string manifest_error;
    if (!load_manifest(dir, &manifest, &manifest_error)) manifest.kernels.clear();
    // The kernel column is as wide as the longest name, so every later column lines up.
    int name_width = static_cast<int>(std::strlen(kKernelHeader));
    for (int i = 0; i < count; ++i) {
        wideattn_kernel_info k{};
        wideattn_get_kernel_info(ctx, i, &k);
        name_width = std::max(name_width, static_cast<int>(std::strlen(k.name)));
    }
    std::printf("%-*s %-8s %-15s %-10s %-9s %-12s %7s %8s %5s %*s %6s %-7s %s\n", name_width, kKernelHeader, "arch",
                "q/kv/o", "head_dim", "group", "tile t*k*h", "threads", "smem", "regs", kSpillWidth, kSpillHeader, "stack",
                "source", "features");
    for (int i = 0; i < count; ++i) {
        wideattn_kernel_info k{};
        wideattn_get_kernel_info(ctx, i, &k);
        const LiveResources live = read_live(gpu.get(), dir, k);
        char dtypes[32], dims[24], group[24], tile[32];
        std::snprintf(dtypes, sizeof dtypes, "%s/%s/%s", dtype_label(k.q_dtype), dtype_label(k.kv_dtype),
                      dtype_label(k.o_dtype));
        if (k.head_dim_min == k.head_dim_max)
            std::snprintf(dims, sizeof dims, "%d", k.head_dim_min);
        else
            std::snprintf(dims, sizeof dims, "%d..%d/%d", k.head_dim_min, k.head_dim_max, k.head_dim_step);
        std::snprintf(group, sizeof group, k.group_min == k.group_max ? "%d" : "%d..%d", k.group_min, k.group_max);
        std::snprintf(tile, sizeof tile, "%dx%dx%d", k.tile_tokens, k.tile_keys, k.heads_per_block_max);
        if (live.ok)
            std::printf("%-*s %-8s %-15s %-10s %-9s %-12s %7d %8d %5d %*s %6d %-7s %s\n", name_width, k.name, k.arch,
                        dtypes, dims, group, tile, k.threads, k.dynamic_smem, live.registers, kSpillWidth, "-",
                        live.local_bytes, "driver", k.features);
        else
            std::printf("%-*s %-8s %-15s %-10s %-9s %-12s %7d %8d %5d %*s %6d %-7s %s\n", name_width, k.name, k.arch,
                        dtypes, dims, group, tile, k.threads, k.dynamic_smem, k.registers, kSpillWidth,
                        ptxas_spills(manifest, k).c_str(), k.stack_bytes, "ptxas", k.features);
    }
    wideattn_close(ctx);
    return 0;
}

}  // namespace wideattn::cli
