// driver.cpp - dlopen-based CUDA driver loader (see driver.h).
#include "dispatch/driver.h"

#include <dlfcn.h>

#include <cstdlib>
#include <mutex>

#define WIDEATTN_STRINGIFY_EXPANDED(name) WIDEATTN_STRINGIFY(name)
#define WIDEATTN_STRINGIFY(name) #name

namespace wideattn {
namespace {

constexpr const char* kDefaultDriverLibrary = "libcuda.so.1";

struct DriverState {
    Driver driver;
    bool ok = false;
    wideattn_status status = WIDEATTN_ERROR_NO_DRIVER;
    std::string error;
};

void load(DriverState* state) {
    const char* override_path = std::getenv("WIDEATTN_LIBCUDA");
    const char* path = override_path && *override_path ? override_path : kDefaultDriverLibrary;
    void* handle = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!handle) {
        const char* why = dlerror();
        state->error = std::string("CUDA driver not available: cannot load ") + path + " (" + (why ? why : "?") +
                       "); install the NVIDIA driver or set WIDEATTN_LIBCUDA";
        return;
    }
    Driver& d = state->driver;
#define WIDEATTN_DRIVER_RESOLVE(name)                                                                 \
    d.name = reinterpret_cast<decltype(d.name)>(dlsym(handle, WIDEATTN_STRINGIFY_EXPANDED(name)));     \
    if (!d.name) {                                                                                     \
        state->error = std::string("CUDA driver ") + path + " lacks " + WIDEATTN_STRINGIFY_EXPANDED(name) + \
                       " (driver too old?)";                                                           \
        return;                                                                                        \
    }
    WIDEATTN_DRIVER_FUNCTIONS(WIDEATTN_DRIVER_RESOLVE)
#undef WIDEATTN_DRIVER_RESOLVE
#define WIDEATTN_DRIVER_RESOLVE_OPTIONAL(name) \
    d.name = reinterpret_cast<decltype(d.name)>(dlsym(handle, WIDEATTN_STRINGIFY_EXPANDED(name)));
    WIDEATTN_DRIVER_OPTIONAL_FUNCTIONS(WIDEATTN_DRIVER_RESOLVE_OPTIONAL)
#undef WIDEATTN_DRIVER_RESOLVE_OPTIONAL
    const CUresult init = d.cuInit(0);
    if (init != CUDA_SUCCESS) {
        state->status = init == CUDA_ERROR_NO_DEVICE ? WIDEATTN_ERROR_NO_DEVICE : WIDEATTN_ERROR_NO_DRIVER;
        state->error = "cuInit failed: " + cuda_error_text(d, init);
        return;
    }
    d.cuDriverGetVersion(&d.version);
    state->ok = true;
    state->status = WIDEATTN_OK;
}

}  // namespace

const Driver* load_driver(wideattn_status* status, std::string* error) {
    static DriverState state;
    static std::once_flag once;
    std::call_once(once, load, &state);
    if (!state.ok) {
        *status = state.status;
        *error = state.error;
        return nullptr;
    }
    *status = WIDEATTN_OK;
    return &state.driver;
}

std::string cuda_error_text(const Driver& driver, CUresult result) {
    const char* name = nullptr;
    const char* text = nullptr;
    if (driver.cuGetErrorName) driver.cuGetErrorName(result, &name);
    if (driver.cuGetErrorString) driver.cuGetErrorString(result, &text);
    return std::string(name ? name : "CUDA_ERROR_" + std::to_string(static_cast<int>(result))) + " (" +
           (text ? text : "no description") + ")";
}

}  // namespace wideattn
