// context.h - the library's side of a wideattn_context (the C API's opaque struct) and the
// launch-path steps the C entry points (api.cpp) and plans (plan.cpp) share: the current device,
// lazy module loading, kernel selection and the split plan.
#pragma once

#include <cuda.h>

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "dispatch/driver.h"
#include "dispatch/manifest.h"
#include "dispatch/tensor_map_cache.h"
#include "dispatch/tuning.h"
#include "wideattn.h"

namespace wideattn {

struct LoadedKernel {
    CUmodule module = nullptr;
    CUfunction function = nullptr;
    CUfunction split_function = nullptr;  // the split-KV entry of "split_kv" kernels
};

}  // namespace wideattn

struct wideattn_context {
    std::string bundle_dir;
    wideattn::Manifest manifest;
    std::vector<wideattn_kernel_info> infos;  // string fields point into manifest
    mutable std::mutex mutex;                  // guards `loaded`, `prefill_only` and `device_names`
    std::map<std::pair<CUcontext, int32_t>, wideattn::LoadedKernel> loaded;
    std::string prefill_only;                  // wideattn_set_prefill_kernel; empty: automatic
    mutable std::map<CUdevice, std::string> device_names;  // cuDeviceGetName, asked once per device
    wideattn::ContextTuning tuning;            // the tuning file (dispatch/tuning.h)
    bool check_metadata = false;               // WIDEATTN_CHECK_METADATA=1 at open: every prefill checked
    bool pdl = true;                           // WIDEATTN_PDL at open (0: off): programmatic merge launches
    // Encoded K/V tensor maps of the caches this context's launches saw (bounded, thread-safe).
    std::unique_ptr<wideattn::TensorMapCache> tensor_maps = std::make_unique<wideattn::TensorMapCache>();
};

namespace wideattn {

// The calling thread's current CUDA context and what the launch path needs of its device.
struct CurrentDevice {
    const Driver* drv = nullptr;
    CUcontext cu_ctx = nullptr;
    CUdevice device = 0;
    int cc_major = 0, cc_minor = 0, smem_optin = 0, num_sms = 0;
};

// Fills *dev (loading the driver on first use); the status and message of the failure otherwise.
wideattn_status current_device(CurrentDevice* dev);

// The name of `device`, asked of the driver once per device ("" when the driver cannot say).
std::string device_name(const wideattn_context* ctx, const Driver& drv, CUdevice device);

// Whether the device gives kernel `index` its shared memory (WIDEATTN_ERROR_UNSUPPORTED otherwise).
wideattn_status check_smem(const wideattn_context* ctx, const CurrentDevice& dev, int32_t index);

// Loads (once per CUDA context) the cubin of kernel `index` and returns its function (`split`:
// its split-KV entry).
wideattn_status get_function(wideattn_context* ctx, const Driver& drv, CUcontext cu_ctx, int32_t index, bool split,
                             CUfunction* function);

// The launch plan of validated params (wideattn_plan_launch): the selected prefill kernel, the
// split count and the merge kernel. `device_name`: the device's name for the tuning file, or NULL
// where only the compute capability is known. `for_launch`: a forced split count whose workspace
// does not fit is refused.
wideattn_status plan_launch(const wideattn_context* ctx, const wideattn_prefill_params& p, int cc_major, int cc_minor,
                            int num_sms, const std::string* device_name, bool for_launch, wideattn_launch_plan* plan);

// Queues `function` with the grid and by-value arguments (`args`, and `second` when not NULL) on
// `stream`: cuLaunchKernelEx where the driver has it, cuLaunchKernel otherwise. `programmatic`
// (the split-KV merge, dependent_launch.h decides): cuLaunchKernelEx with the attribute
// CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, so the kernel may start before the
// previous one on the stream has finished (it waits for it with griddepcontrol.wait); ignored
// without cuLaunchKernelEx. `name` names the kernel in the message of a failure.
wideattn_status launch_function(const Driver& drv, CUfunction function, const std::string& name, uint32_t grid_x,
                                uint32_t grid_y, uint32_t grid_z, uint32_t block_x, uint32_t dynamic_smem,
                                void* args, void* second, void* stream, bool programmatic);

// Plans (plan.cpp): wideattn_prefill's path (a plan built and run once, never registered) and the
// destruction of every registered plan of a context that closes.
wideattn_status prefill_once(wideattn_context* ctx, const wideattn_prefill_params* params, void* stream);
void retire_plans_of(const wideattn_context* ctx);

}  // namespace wideattn
