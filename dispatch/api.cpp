// api.cpp - the C API of wideattn.h: context, bundle manifest, lazy per-context module
// cache, and the launch path (validate -> driver -> select -> load -> launch); prefill and plans:
// plan.cpp.
#include <cuda.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/bundle_files.h"
#include "dispatch/c_boundary.h"
#include "dispatch/context.h"
#include "dispatch/dependent_launch.h"
#include "dispatch/driver.h"
#include "dispatch/kv_tensor_maps.h"
#include "dispatch/manifest.h"
#include "dispatch/manifest_format.h"
#include "dispatch/metadata_check.h"
#include "dispatch/selection.h"
#include "dispatch/split_plan.h"
#include "dispatch/tuning.h"
#include "dispatch/validation.h"
#include "fp8/codec/e4m3.h"
#include "kernels/k_from_v_rebuild/traits.h"
#include "wideattn.h"

#ifndef WIDEATTN_DEFAULT_BUNDLE_DIR
#define WIDEATTN_DEFAULT_BUNDLE_DIR "/usr/local/share/wideattn/bundle"
#endif

// The params struct is an ABI: kernels take it by value and bindings (ctypes) mirror it.
static_assert(sizeof(wideattn_prefill_params) == 272, "wideattn_prefill_params layout changed: update bindings");
static_assert(offsetof(wideattn_prefill_params, k_from_v) == 264, "C API 0.4.0 callers pass the 264 bytes before k_from_v");
static_assert(sizeof(wideattn_k_from_v) == 56, "wideattn_k_from_v layout changed: update bindings");
static_assert(offsetof(wideattn_k_from_v, inv_freq) == 32, "C API 0.5.0 callers pass the 32 bytes before inv_freq");
static_assert(offsetof(wideattn_k_from_v, cos_sin) == 40, "C API 0.6.0 callers pass the 40 bytes before cos_sin");
static_assert(sizeof(wideattn_quantize_params) == 112, "wideattn_quantize_params layout changed: update bindings");
static_assert(sizeof(wideattn_scale_params) == 64, "wideattn_scale_params layout changed: update bindings");
static_assert(sizeof(wideattn_k_from_v_rebuild_out) == 96,
              "wideattn_k_from_v_rebuild_out layout changed: update bindings");
static_assert(sizeof(wideattn_kernel_info) == 112, "wideattn_kernel_info layout changed: update bindings");

namespace {

constexpr int kStaticSmemLimit = 48 * 1024;  // above this a kernel must opt in per function

using wideattn::fail;
using wideattn::guarded;

}  // namespace

// The launch-path steps context.h declares, and the helpers of the entry points below.
namespace wideattn {

std::string prefill_restriction(const wideattn_context* ctx) {
    std::lock_guard<std::mutex> lock(ctx->mutex);
    return ctx->prefill_only;
}

// The name of `device`, asked of the driver once per device ("" when the driver cannot say: the
// tuning file's device check then fails and the priority order holds).
std::string device_name(const wideattn_context* ctx, const wideattn::Driver& drv, CUdevice device) {
    std::lock_guard<std::mutex> lock(ctx->mutex);
    if (const auto it = ctx->device_names.find(device); it != ctx->device_names.end()) return it->second;
    constexpr int kDeviceNameBytes = 256;
    char name[kDeviceNameBytes] = {};
    if (drv.cuDeviceGetName(name, kDeviceNameBytes, device) != CUDA_SUCCESS) return {};
    return ctx->device_names[device] = name;
}

// Loads (once per CUDA context) the cubin of kernel `index` and returns its function (`split`:
// its split-KV entry).
wideattn_status get_function(wideattn_context* ctx, const wideattn::Driver& drv, CUcontext cu_ctx, int32_t index,
                             bool split, CUfunction* function) {
    std::lock_guard<std::mutex> lock(ctx->mutex);
    const auto key = std::make_pair(cu_ctx, index);
    if (const auto it = ctx->loaded.find(key); it != ctx->loaded.end()) {
        *function = split ? it->second.split_function : it->second.function;
        return WIDEATTN_OK;
    }
    const wideattn::ManifestKernel& k = ctx->manifest.kernels[index];
    const std::string path = ctx->bundle_dir + "/" + k.cubin;
    // The cubin's size and checksum are verified here, at its first load, not when the bundle
    // is opened: open stays O(manifest size) however many cubins the bundle has.
    std::string image, message;
    if (const wideattn_status status = wideattn::read_verified_cubin(ctx->bundle_dir, k, &image, &message);
        status != WIDEATTN_OK)
        return fail(status, message);
    LoadedKernel loaded;
    CUresult r = drv.cuModuleLoadData(&loaded.module, image.data());
    if (r != CUDA_SUCCESS)
        return fail(WIDEATTN_ERROR_BUNDLE, "cuModuleLoadData(" + path + ") failed: " + wideattn::cuda_error_text(drv, r));
    r = drv.cuModuleGetFunction(&loaded.function, loaded.module, k.symbol.c_str());
    if (r != CUDA_SUCCESS) {
        drv.cuModuleUnload(loaded.module);
        return fail(WIDEATTN_ERROR_BUNDLE,
                    "cubin " + path + " has no symbol " + k.symbol + ": " + wideattn::cuda_error_text(drv, r));
    }
    if (!k.split_symbol.empty()) {
        r = drv.cuModuleGetFunction(&loaded.split_function, loaded.module, k.split_symbol.c_str());
        if (r != CUDA_SUCCESS) {
            drv.cuModuleUnload(loaded.module);
            return fail(WIDEATTN_ERROR_BUNDLE, "cubin " + path + " has no symbol " + k.split_symbol + ": " +
                                                   wideattn::cuda_error_text(drv, r));
        }
    }
    for (CUfunction f : {loaded.function, loaded.split_function}) {
        if (!f || k.dynamic_smem <= kStaticSmemLimit) continue;
        r = drv.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, k.dynamic_smem);
        if (r != CUDA_SUCCESS) {
            drv.cuModuleUnload(loaded.module);
            return fail(WIDEATTN_ERROR_CUDA, "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES=" +
                                                 std::to_string(k.dynamic_smem) + ") for " + k.name +
                                                 " failed: " + wideattn::cuda_error_text(drv, r));
        }
    }
    ctx->loaded.emplace(key, loaded);
    *function = split ? loaded.split_function : loaded.function;
    return WIDEATTN_OK;
}

// Stream work an entry point queues before its kernel (none by default).
struct NoPrepare {
    wideattn_status operator()(const wideattn::Driver&, CUstream) const { return WIDEATTN_OK; }
};

wideattn_status current_device(CurrentDevice* dev) {
    wideattn_status status;
    std::string message;
    dev->drv = wideattn::load_driver(&status, &message);
    if (!dev->drv) return fail(status, message);
    const wideattn::Driver& drv = *dev->drv;
    CUresult r = drv.cuCtxGetCurrent(&dev->cu_ctx);
    if (r != CUDA_SUCCESS) return fail(WIDEATTN_ERROR_CUDA, "cuCtxGetCurrent failed: " + wideattn::cuda_error_text(drv, r));
    if (!dev->cu_ctx)
        return fail(WIDEATTN_ERROR_NO_DEVICE,
                    "no current CUDA context on this thread (make one current first, e.g. any CUDA runtime call "
                    "or cuDevicePrimaryCtxRetain + cuCtxSetCurrent)");
    if ((r = drv.cuCtxGetDevice(&dev->device)) != CUDA_SUCCESS ||
        (r = drv.cuDeviceGetAttribute(&dev->cc_major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev->device)) !=
            CUDA_SUCCESS ||
        (r = drv.cuDeviceGetAttribute(&dev->cc_minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev->device)) !=
            CUDA_SUCCESS ||
        (r = drv.cuDeviceGetAttribute(&dev->smem_optin, CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN,
                                      dev->device)) != CUDA_SUCCESS ||
        (r = drv.cuDeviceGetAttribute(&dev->num_sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev->device)) !=
            CUDA_SUCCESS)
        return fail(WIDEATTN_ERROR_CUDA, "querying the current device failed: " + wideattn::cuda_error_text(drv, r));
    return WIDEATTN_OK;
}

// Whether the device gives kernel `index` its shared memory.
wideattn_status check_smem(const wideattn_context* ctx, const CurrentDevice& dev, int32_t index) {
    const wideattn::ManifestKernel& kernel = ctx->manifest.kernels[index];
    if (kernel.dynamic_smem > dev.smem_optin)
        return fail(WIDEATTN_ERROR_UNSUPPORTED, kernel.name + " needs " + std::to_string(kernel.dynamic_smem) +
                                                    " bytes of shared memory; the device allows " +
                                                    std::to_string(dev.smem_optin));
    return WIDEATTN_OK;
}

wideattn_status launch_function(const Driver& drv, CUfunction function, const std::string& name, uint32_t grid_x,
                                uint32_t grid_y, uint32_t grid_z, uint32_t block_x, uint32_t dynamic_smem,
                                void* args, void* second, void* stream, bool programmatic) {
    void* kernel_args[] = {args, second};
    programmatic = programmatic && drv.cuLaunchKernelEx != nullptr;
    CUresult r;
    if (drv.cuLaunchKernelEx) {
        CUlaunchConfig config{};
        config.gridDimX = grid_x;
        config.gridDimY = grid_y;
        config.gridDimZ = grid_z;
        config.blockDimX = block_x;
        config.blockDimY = 1;
        config.blockDimZ = 1;
        config.sharedMemBytes = dynamic_smem;
        config.hStream = static_cast<CUstream>(stream);
        CUlaunchAttribute attribute{};
        if (programmatic) {
            attribute.id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION;
            attribute.value.programmaticStreamSerializationAllowed = 1;
            config.attrs = &attribute;
            config.numAttrs = 1;
        }
        r = drv.cuLaunchKernelEx(&config, function, kernel_args, nullptr);
    } else {
        r = drv.cuLaunchKernel(function, grid_x, grid_y, grid_z, block_x, 1, 1, dynamic_smem,
                               static_cast<CUstream>(stream), kernel_args, nullptr);
    }
    if (r == CUDA_SUCCESS) return WIDEATTN_OK;
    const std::string hint = programmatic ? std::string(" (a programmatic dependent launch; ") + kPdlEnv +
                                                "=0 launches without)"
                                          : std::string();
    return fail(WIDEATTN_ERROR_CUDA, std::string(drv.cuLaunchKernelEx ? "cuLaunchKernelEx(" : "cuLaunchKernel(") +
                                         name + ", grid " + std::to_string(grid_x) + "x" + std::to_string(grid_y) +
                                         "x" + std::to_string(grid_z) + ") failed: " + cuda_error_text(drv, r) + hint);
}

// Loads kernel `index` (lazily) and queues it with grid `g` and the arguments (`args`, `second`).
wideattn_status launch_kernel(wideattn_context* ctx, const CurrentDevice& dev, int32_t index,
                              const wideattn::LaunchGeometry& g, void* args, void* second, void* stream) {
    const wideattn::ManifestKernel& kernel = ctx->manifest.kernels[index];
    CUfunction function = nullptr;
    const wideattn_status status = get_function(ctx, *dev.drv, dev.cu_ctx, index, g.grid_z > 1, &function);
    if (status != WIDEATTN_OK) return status;
    return launch_function(*dev.drv, function, kernel.name, g.grid_x, g.grid_y, g.grid_z, g.block_x, g.dynamic_smem,
                           args, second, stream, false);
}

// The launch path of the element-wise entry points: the current device, kernel selection
// (`select`), the shared-memory check, grid (`geometry`), `prepare` (stream work before the
// kernel, queued even when the grid is empty) and the launch with the by-value argument `args`.
// An empty grid launches nothing and succeeds.
template <typename Args, typename Select, typename Geometry, typename Prepare = NoPrepare>
wideattn_status launch_on_current_device(wideattn_context* ctx, Args* args, void* stream, Select select,
                                         Geometry geometry, Prepare prepare = {}) {
    CurrentDevice dev;
    wideattn_status status = current_device(&dev);
    if (status != WIDEATTN_OK) return status;
    int32_t index = -1;
    std::string message;
    status = select(dev.cc_major, dev.cc_minor, &index, &message);
    if (status != WIDEATTN_OK) return fail(status, message);
    if ((status = check_smem(ctx, dev, index)) != WIDEATTN_OK) return status;
    const wideattn::LaunchGeometry g = geometry(ctx->manifest.kernels[index]);
    if (g.grid_x == 0 || g.grid_y == 0) return prepare(*dev.drv, static_cast<CUstream>(stream));  // no kernel work
    if ((status = prepare(*dev.drv, static_cast<CUstream>(stream))) != WIDEATTN_OK) return status;
    return launch_kernel(ctx, dev, index, g, args, nullptr, stream);
}

// The prefill kernel for validated params on a cc_major.cc_minor device: the pinned kernel, else
// the tuning file's choice (compared with `device_name` too when it is not NULL), else priority.
wideattn_status select_prefill(const wideattn_context* ctx, const wideattn_prefill_params& p, int cc_major,
                               int cc_minor, const std::string* device_name, int32_t* index) {
    std::string message;
    const std::string tuned = ctx->tuning.choice_for(p, cc_major, cc_minor, device_name);
    const wideattn_status status = wideattn::select_kernel(ctx->manifest.kernels, p, cc_major, cc_minor, index,
                                                           &message, prefill_restriction(ctx), tuned);
    return status == WIDEATTN_OK ? status : fail(status, message);
}

// The launch plan of validated params (wideattn_plan_launch): the selected prefill kernel, then
// the split count (split_plan.h) and the merge kernel when it splits. `device_name` is the
// device's name for the tuning file's check, or NULL where only the compute capability is known.
// `for_launch`: a forced split count whose workspace does not fit is refused (the launch);
// otherwise it is reported as it is (a plan or a size query asks what the call needs). A forced
// count on a kernel without a split entry, or without a merge kernel, is refused either way.
wideattn_status plan_launch(const wideattn_context* ctx, const wideattn_prefill_params& p, int cc_major, int cc_minor,
                            int num_sms, const std::string* device_name, bool for_launch, wideattn_launch_plan* plan) {
    int32_t index = -1;
    wideattn_status status = select_prefill(ctx, p, cc_major, cc_minor, device_name, &index);
    if (status != WIDEATTN_OK) return status;
    const wideattn::ManifestKernel& kernel = ctx->manifest.kernels[index];
    const bool forced = p.num_splits > 1;
    if (forced && !kernel.has_feature(wideattn::kFeatureSplitKv))
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, wideattn::no_split_entry(kernel, p));
    int32_t preferred = wideattn::preferred_splits(kernel, p, num_sms);
    int32_t merge = -1;
    if (preferred > 1) {
        std::string message;
        status = wideattn::select_merge_kernel(ctx->manifest.kernels, p, cc_major, cc_minor, &merge, &message);
        if (status != WIDEATTN_OK) {
            if (forced) return fail(status, "num_splits=" + std::to_string(p.num_splits) + ": " + message);
            preferred = 1;  // automatic: the call runs unsplit
        }
    }
    // A forced count is reported as it is; only the launch refuses a workspace it does not fit.
    const int32_t splits = forced ? preferred : wideattn::fitting_splits(p, preferred);
    if (for_launch && !wideattn::workspace_fits(p, splits))
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, wideattn::workspace_shortfall(p, splits));
    plan->kernel_index = index;
    plan->num_splits = splits;
    plan->merge_kernel_index = splits > 1 ? merge : -1;
    plan->preferred_splits = preferred;
    plan->workspace_bytes = preferred > 1 ? wideattn::workspace_layout(p, preferred).bytes : 0;
    return WIDEATTN_OK;
}

}  // namespace wideattn

namespace {

using wideattn::CurrentDevice;

// The kernel_info of one manifest entry (string fields point into the entry).
wideattn_kernel_info kernel_info(const wideattn::ManifestKernel& k) {
    wideattn_kernel_info info{};
    info.name = k.name.c_str();
    info.symbol = k.symbol.c_str();
    info.arch = k.arch.c_str();
    info.cubin = k.cubin.c_str();
    info.q_dtype = k.q_dtype;
    info.kv_dtype = k.kv_dtype;
    info.o_dtype = k.o_dtype;
    info.head_dim_min = k.head_dim_min;
    info.head_dim_max = k.head_dim_max;
    info.head_dim_step = k.head_dim_step;
    info.group_min = k.group_min;
    info.group_max = k.group_max;
    info.tile_tokens = k.tile_tokens;
    info.tile_keys = k.tile_keys;
    info.heads_per_block_max = k.heads_per_block_max;
    info.threads = k.threads;
    info.dynamic_smem = k.dynamic_smem;
    info.registers = k.registers;
    info.spill_bytes = k.spill_bytes;
    info.stack_bytes = k.stack;
    info.features = k.features_csv.c_str();
    info.kind = k.kind.c_str();
    return info;
}

wideattn_status open_context(wideattn_context** out, const char* bundle_dir) {
    if (!out) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "ctx (the output pointer) is NULL");
    *out = nullptr;
    std::string dir;
    if (bundle_dir && *bundle_dir) {
        dir = bundle_dir;
    } else if (const char* env = std::getenv("WIDEATTN_BUNDLE"); env && *env) {
        dir = env;
    } else {
        dir = WIDEATTN_DEFAULT_BUNDLE_DIR;
    }
    auto ctx = std::make_unique<wideattn_context>();
    ctx->bundle_dir = dir;
    std::string error;
    if (!wideattn::parse_check_metadata_env(std::getenv(wideattn::kCheckMetadataEnv), &ctx->check_metadata, &error))
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, error);
    if (!wideattn::parse_pdl_env(std::getenv(wideattn::kPdlEnv), &ctx->pdl, &error))
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, error);
    if (!wideattn::load_manifest(dir, &ctx->manifest, &error)) return fail(WIDEATTN_ERROR_BUNDLE, error);
    // Only the manifest (and the tuning file) is read: each cubin is read and verified at its
    // first load.
    if (const wideattn_status status = ctx->tuning.open(dir, ctx->manifest.kernels, &error); status != WIDEATTN_OK)
        return fail(status, error);
    ctx->infos.reserve(ctx->manifest.kernels.size());
    for (const wideattn::ManifestKernel& k : ctx->manifest.kernels) ctx->infos.push_back(kernel_info(k));
    *out = ctx.release();
    return WIDEATTN_OK;
}

wideattn_status set_prefill_kernel(wideattn_context* ctx, const char* name) {
    if (!ctx) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    const std::string wanted = name ? name : "";
    if (!wanted.empty() && !wideattn::has_prefill_kernel(ctx->manifest.kernels, wanted)) {
        std::set<std::string> names;
        for (const wideattn::ManifestKernel& k : ctx->manifest.kernels)
            if (k.kind == wideattn::kKindPrefill) names.insert(k.name);
        std::string listed;
        for (const std::string& n : names) listed += (listed.empty() ? "" : ", ") + n;
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT,
                    "name=" + wanted + " is not a prefill kernel of the bundle (it has: " + listed + ")");
    }
    std::lock_guard<std::mutex> lock(ctx->mutex);
    ctx->prefill_only = wanted;
    return WIDEATTN_OK;
}

wideattn_status tuning_status(const wideattn_context* ctx, int32_t* state, char* message, size_t message_size,
                              size_t* message_length) {
    if (!ctx) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    if (!state) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "state is NULL");
    if (!message && message_size > 0)
        return fail(WIDEATTN_ERROR_INVALID_ARGUMENT,
                    "message is NULL with message_size=" + std::to_string(message_size) + " (must be 0)");
    std::string text;
    *state = ctx->tuning.state(&text);
    if (message_size > 0) {
        const size_t n = std::min(text.size(), message_size - 1);
        text.copy(message, n);
        message[n] = '\0';
    }
    if (message_length) *message_length = text.size();
    return WIDEATTN_OK;
}

// Validation, the current device and the launch plan there (plan_launch with its device name).
wideattn_status plan_on_current_device(const wideattn_context* ctx, const wideattn_prefill_params* params,
                                       bool for_launch, CurrentDevice* dev, wideattn_launch_plan* plan) {
    if (!ctx) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    std::string message;
    wideattn_status status = wideattn::validate_params(params, &message);
    if (status != WIDEATTN_OK) return fail(status, message);
    if ((status = wideattn::current_device(dev)) != WIDEATTN_OK) return status;
    const std::string name =
        ctx->tuning.in_play() ? wideattn::device_name(ctx, *dev->drv, dev->device) : std::string();
    return wideattn::plan_launch(ctx, *params, dev->cc_major, dev->cc_minor, dev->num_sms, &name, for_launch, plan);
}

wideattn_status quantize_to_cache(wideattn_context* ctx, const wideattn_quantize_params* params, void* stream) {
    if (!ctx) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    std::string message;
    wideattn_status status = wideattn::validate_quantize_params(params, &message);
    if (status == WIDEATTN_OK) status = wideattn::check_quantize_grid(ctx->manifest.kernels, *params, &message);
    if (status != WIDEATTN_OK) return fail(status, message);
    wideattn_quantize_params args = *params;
    return wideattn::launch_on_current_device(
        ctx, &args, stream,
        [&](int cc_major, int cc_minor, int32_t* index, std::string* why) {
            return wideattn::select_quantize_kernel(ctx->manifest.kernels, args, cc_major, cc_minor, index, why);
        },
        [&](const wideattn::ManifestKernel& kernel) { return wideattn::quantize_launch_geometry(kernel, args); });
}

wideattn_status k_from_v_rebuild(wideattn_context* ctx, const wideattn_prefill_params* params,
                                 const wideattn_k_from_v_rebuild_out* out, void* stream) {
    if (!ctx) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    std::string message;
    wideattn::KFromVRebuildArgs args{};
    wideattn_status status = wideattn::validate_k_from_v_rebuild(params, out, &args.out, &message);
    if (status == WIDEATTN_OK) status = wideattn::read_k_from_v(*params, &args.kfv, &message);
    if (status != WIDEATTN_OK) return fail(status, message);
    std::memcpy(static_cast<void*>(&args.params), params, offsetof(wideattn_prefill_params, k_from_v));
    args.params.k_from_v = nullptr;  // the kernel reads the validated copy, args.kfv
    // Checked mode: params' metadata as wideattn_prefill checks it, then out's table against the
    // same lengths (the rows the kernel reads of it, entries within out.num_blocks).
    const auto check = [&](const wideattn::Driver& drv, CUstream cu_stream) {
        if (!wideattn::checked_mode(args.params, ctx->check_metadata)) return WIDEATTN_OK;
        std::string why;
        wideattn_status checked = wideattn::check_device_metadata(drv, args.params, cu_stream, &why);
        if (checked == WIDEATTN_OK) {
            wideattn_prefill_params out_view = args.params;
            out_view.block_table = args.out.block_table;
            out_view.block_table_stride = args.out.block_table_stride;
            out_view.num_blocks = args.out.num_blocks;
            checked = wideattn::check_device_metadata(drv, out_view, cu_stream, &why);
            if (checked != WIDEATTN_OK) why = "out: " + why;
        }
        return checked == WIDEATTN_OK ? checked : fail(checked, why);
    };
    return wideattn::launch_on_current_device(
        ctx, &args, stream,
        [&](int cc_major, int cc_minor, int32_t* index, std::string* why) {
            return wideattn::select_k_from_v_rebuild_kernel(ctx->manifest.kernels, args.params, cc_major, cc_minor,
                                                            index, why);
        },
        [&](const wideattn::ManifestKernel& kernel) {
            return wideattn::k_from_v_rebuild_launch_geometry(kernel, args.params, args.out);
        },
        check);
}

// wideattn_compute_scale, and with power_of_two wideattn_compute_scale_pow2 (the amax kernel
// with the feature power_of_two).
wideattn_status compute_scale(wideattn_context* ctx, const wideattn_scale_params* params, void* stream,
                              bool power_of_two) {
    if (!ctx) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
    std::string message;
    wideattn_status status = wideattn::validate_scale_params(params, &message);
    if (status == WIDEATTN_OK) status = wideattn::check_scale_grid(ctx->manifest.kernels, *params, &message);
    if (status != WIDEATTN_OK) return fail(status, message);
    wideattn_scale_params args = *params;
    // The kernel raises *scale with atomicMax from the floor, so the floor goes in first.
    const auto set_floor = [&](const wideattn::Driver& drv, CUstream cu_stream) {
        const CUresult r = drv.cuMemsetD32Async(reinterpret_cast<CUdeviceptr>(args.scale),
                                                wideattn::fp8::float_bits(wideattn::fp8::kE4m3MinScale), 1, cu_stream);
        if (r != CUDA_SUCCESS)
            return fail(WIDEATTN_ERROR_CUDA, "cuMemsetD32Async(scale) failed: " + wideattn::cuda_error_text(drv, r));
        return WIDEATTN_OK;
    };
    return wideattn::launch_on_current_device(
        ctx, &args, stream,
        [&](int cc_major, int cc_minor, int32_t* index, std::string* why) {
            return (power_of_two ? wideattn::select_scale_pow2_kernel : wideattn::select_scale_kernel)(
                ctx->manifest.kernels, args, cc_major, cc_minor, index, why);
        },
        [&](const wideattn::ManifestKernel& kernel) { return wideattn::scale_launch_geometry(kernel, args); },
        set_floor);
}

}  // namespace

// Every exported function that can throw runs its body through guarded() (c_boundary.h); the
// others (version, status_string, last_error, bundle_dir, kernel_count, bundle_checksum,
// tuning_path) only read memory.
extern "C" {

const char* wideattn_version(void) {
#define WIDEATTN_STR2(x) #x
#define WIDEATTN_STR(x) WIDEATTN_STR2(x)
    return WIDEATTN_STR(WIDEATTN_VERSION_MAJOR) "." WIDEATTN_STR(WIDEATTN_VERSION_MINOR) "." WIDEATTN_STR(
        WIDEATTN_VERSION_PATCH);
}

const char* wideattn_status_string(wideattn_status status) {
    // A C caller may pass any int: read it as one (loading an out-of-range value through the
    // C++ enum type is undefined), then compare with the enumerators.
    static_assert(sizeof(wideattn_status) == sizeof(int), "the C enum is an int");
    int code = 0;
    std::memcpy(&code, &status, sizeof code);
    switch (code) {
        case WIDEATTN_OK: return "WIDEATTN_OK";
        case WIDEATTN_ERROR_INVALID_ARGUMENT: return "WIDEATTN_ERROR_INVALID_ARGUMENT";
        case WIDEATTN_ERROR_UNSUPPORTED: return "WIDEATTN_ERROR_UNSUPPORTED";
        case WIDEATTN_ERROR_NO_DRIVER: return "WIDEATTN_ERROR_NO_DRIVER";
        case WIDEATTN_ERROR_NO_DEVICE: return "WIDEATTN_ERROR_NO_DEVICE";
        case WIDEATTN_ERROR_BUNDLE: return "WIDEATTN_ERROR_BUNDLE";
        case WIDEATTN_ERROR_CUDA: return "WIDEATTN_ERROR_CUDA";
        case WIDEATTN_ERROR_INTERNAL: return "WIDEATTN_ERROR_INTERNAL";
    }
    return "WIDEATTN_STATUS_UNKNOWN";
}

const char* wideattn_last_error(void) { return wideattn::last_error_text(); }

wideattn_status wideattn_open(wideattn_context** out, const char* bundle_dir) {
    return guarded("wideattn_open", [&] { return open_context(out, bundle_dir); });
}

void wideattn_close(wideattn_context* ctx) {
    if (!ctx) return;
    guarded("wideattn_close", [&] {
        wideattn::retire_plans_of(ctx);
        if (!ctx->loaded.empty()) {
            wideattn_status status;
            std::string error;
            if (const wideattn::Driver* drv = wideattn::load_driver(&status, &error))
                for (auto& entry : ctx->loaded) drv->cuModuleUnload(entry.second.module);
        }
        return WIDEATTN_OK;
    });
    delete ctx;
}

const char* wideattn_bundle_dir(const wideattn_context* ctx) { return ctx ? ctx->bundle_dir.c_str() : ""; }

int32_t wideattn_kernel_count(const wideattn_context* ctx) {
    return ctx ? static_cast<int32_t>(ctx->infos.size()) : 0;
}

wideattn_status wideattn_get_kernel_info(const wideattn_context* ctx, int32_t index, wideattn_kernel_info* info) {
    return guarded("wideattn_get_kernel_info", [&] {
        if (!ctx) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
        if (!info) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "info is NULL");
        if (index < 0 || index >= static_cast<int32_t>(ctx->infos.size()))
            return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "index=" + std::to_string(index) + " outside 0.." +
                                                             std::to_string(static_cast<int>(ctx->infos.size()) - 1));
        *info = ctx->infos[index];
        return WIDEATTN_OK;
    });
}

wideattn_status wideattn_is_supported(const wideattn_context* ctx, const wideattn_prefill_params* params,
                                      int cc_major, int cc_minor, int32_t* kernel_index) {
    return guarded("wideattn_is_supported", [&] {
        if (!ctx) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
        std::string message;
        wideattn_status status = wideattn::validate_params(params, &message);
        if (status != WIDEATTN_OK) return fail(status, message);
        int32_t index = -1;
        if ((status = wideattn::select_prefill(ctx, *params, cc_major, cc_minor, nullptr, &index)) != WIDEATTN_OK)
            return status;
        if (kernel_index) *kernel_index = index;
        return WIDEATTN_OK;
    });
}

wideattn_status wideattn_plan_launch(const wideattn_context* ctx, const wideattn_prefill_params* params, int cc_major,
                                     int cc_minor, int num_sms, wideattn_launch_plan* plan) {
    return guarded("wideattn_plan_launch", [&] {
        if (!ctx) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
        if (!plan) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "plan is NULL");
        if (num_sms < 1) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "num_sms=" + std::to_string(num_sms) + " must be >= 1");
        std::string message;
        const wideattn_status status = wideattn::validate_params(params, &message);
        if (status != WIDEATTN_OK) return fail(status, message);
        return wideattn::plan_launch(ctx, *params, cc_major, cc_minor, num_sms, nullptr, false, plan);
    });
}

wideattn_status wideattn_workspace_size(const wideattn_context* ctx, const wideattn_prefill_params* params,
                                        int64_t* bytes) {
    return guarded("wideattn_workspace_size", [&] {
        if (!ctx) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "ctx is NULL");
        if (!bytes) return fail(WIDEATTN_ERROR_INVALID_ARGUMENT, "bytes is NULL");
        CurrentDevice dev;
        wideattn_launch_plan plan{};
        const wideattn_status status = plan_on_current_device(ctx, params, false, &dev, &plan);
        if (status != WIDEATTN_OK) return status;
        *bytes = plan.workspace_bytes;
        return WIDEATTN_OK;
    });
}

wideattn_status wideattn_set_prefill_kernel(wideattn_context* ctx, const char* name) {
    return guarded("wideattn_set_prefill_kernel", [&] { return set_prefill_kernel(ctx, name); });
}

wideattn_status wideattn_tuning_status(const wideattn_context* ctx, int32_t* state, char* message,
                                       size_t message_size, size_t* message_length) {
    return guarded("wideattn_tuning_status",
                   [&] { return tuning_status(ctx, state, message, message_size, message_length); });
}

const char* wideattn_bundle_checksum(const wideattn_context* ctx) { return ctx ? ctx->tuning.checksum().c_str() : ""; }

const char* wideattn_tuning_path(const wideattn_context* ctx) { return ctx ? ctx->tuning.path().c_str() : ""; }

wideattn_status wideattn_prefill(wideattn_context* ctx, const wideattn_prefill_params* params, void* stream) {
    return guarded("wideattn_prefill", [&] { return wideattn::prefill_once(ctx, params, stream); });
}

wideattn_status wideattn_quantize_to_cache(wideattn_context* ctx, const wideattn_quantize_params* params,
                                           void* stream) {
    return guarded("wideattn_quantize_to_cache", [&] { return quantize_to_cache(ctx, params, stream); });
}

wideattn_status wideattn_k_from_v_rebuild(wideattn_context* ctx, const wideattn_prefill_params* params,
                                          const wideattn_k_from_v_rebuild_out* out, void* stream) {
    return guarded("wideattn_k_from_v_rebuild", [&] { return k_from_v_rebuild(ctx, params, out, stream); });
}

wideattn_status wideattn_compute_scale(wideattn_context* ctx, const wideattn_scale_params* params, void* stream) {
    return guarded("wideattn_compute_scale", [&] { return compute_scale(ctx, params, stream, false); });
}

wideattn_status wideattn_compute_scale_pow2(wideattn_context* ctx, const wideattn_scale_params* params,
                                            void* stream) {
    return guarded("wideattn_compute_scale_pow2", [&] { return compute_scale(ctx, params, stream, true); });
}

}  // extern "C"
