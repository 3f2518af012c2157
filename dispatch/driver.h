// driver.h - the CUDA driver API resolved at run time with dlopen (no link-time libcuda),
// so libwideattn loads on machines without a driver and reports that from a launch.
// Internal to the project: the CLI, tests and benchmarks use it for memory and events.
#pragma once

#include <cuda.h>

#include <string>

#include "wideattn.h"

namespace wideattn {

// Every driver entry point the project uses. The names are the cuda.h macros, so the
// versioned symbol (e.g. cuMemAlloc_v2) is what gets resolved.
#define WIDEATTN_DRIVER_FUNCTIONS(X)                                                                   \
    X(cuInit) X(cuDriverGetVersion) X(cuGetErrorName) X(cuGetErrorString) X(cuDeviceGetCount)         \
    X(cuDeviceGet) X(cuDeviceGetName) X(cuDeviceGetAttribute) X(cuDevicePrimaryCtxRetain)             \
    X(cuDevicePrimaryCtxRelease) X(cuCtxGetCurrent) X(cuCtxSetCurrent) X(cuCtxGetDevice)              \
    X(cuCtxSynchronize) X(cuModuleLoadData) X(cuModuleUnload) X(cuModuleGetFunction)                  \
    X(cuFuncSetAttribute) X(cuFuncGetAttribute) X(cuLaunchKernel) X(cuMemAlloc) X(cuMemFree)          \
    X(cuMemcpyHtoD) X(cuMemcpyDtoH) X(cuMemcpyDtoD) X(cuMemsetD8) X(cuMemGetInfo) X(cuStreamCreate)   \
    X(cuMemsetD32Async) X(cuMemcpyDtoHAsync) X(cuStreamIsCapturing)                                   \
    X(cuStreamDestroy) X(cuStreamSynchronize) X(cuEventCreate) X(cuEventDestroy) X(cuEventRecord)     \
    X(cuEventSynchronize) X(cuEventElapsedTime)

// Entry points only some kernels need; a driver without them still loads, and the kernels that
// need them report it at launch (cuTensorMapEncodeTiled: CUDA 12.0 drivers and later); the launch
// path takes cuLaunchKernelEx (CUDA 12.0) where the driver has it, cuLaunchKernel otherwise.
// The graph calls are the GPU tests' (CUDA-graph capture of plans); cuModuleGetGlobal is
// `wideattn bench --block-timeline`'s (tools/cli/block_timeline.cpp).
#define WIDEATTN_DRIVER_OPTIONAL_FUNCTIONS(X)                                                              \
    X(cuTensorMapEncodeTiled) X(cuLaunchKernelEx) X(cuStreamBeginCapture) X(cuStreamEndCapture)          \
    X(cuGraphInstantiate) X(cuGraphLaunch) X(cuGraphExecDestroy) X(cuGraphDestroy) X(cuModuleGetGlobal)

struct Driver {
#define WIDEATTN_DRIVER_POINTER(name) decltype(&::name) name = nullptr;
    WIDEATTN_DRIVER_FUNCTIONS(WIDEATTN_DRIVER_POINTER)
    WIDEATTN_DRIVER_OPTIONAL_FUNCTIONS(WIDEATTN_DRIVER_POINTER)
#undef WIDEATTN_DRIVER_POINTER
    int version = 0;  // cuDriverGetVersion, e.g. 13000
};

// The process-wide driver table: the first call dlopens libcuda.so.1 (or the file named by
// the environment variable WIDEATTN_LIBCUDA) and calls cuInit(0); the outcome is cached.
// Returns nullptr on failure with *status WIDEATTN_ERROR_NO_DRIVER or _NO_DEVICE and *error.
const Driver* load_driver(wideattn_status* status, std::string* error);

// "CUDA_ERROR_X (description)" for a driver result.
std::string cuda_error_text(const Driver& driver, CUresult result);

}  // namespace wideattn
