// fake_libcuda.cpp - a stand-in for libcuda.so.1 that libwideattn loads through WIDEATTN_LIBCUDA,
// so the launch path (driver, current context, selection, lazy cubin read and checksum, module
// load, tensor-map encoding, cuLaunchKernel) runs on a machine without a GPU. It exports every
// entry point dispatch/driver.h resolves (cuLaunchKernelEx too); the device is sm_XY from $WIDEATTN_FAKE_CC ("90" if
// unset). Launches run nothing: the last launched symbol, call counts and the programmatic
// dependent launches (cuLaunchKernelEx with CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION)
// are read back through the fake_cuda_* functions at the end. Device pointers are host pointers: cuMemcpyDtoHAsync is a
// memcpy (the checked mode's metadata copies), and fake_cuda_set_* make a stream report a capture
// or a copy fail. Events record the host's steady clock, so `wideattn bench` and `wideattn tune`
// run end to end on it (timing nothing but the host's side of the calls). A cubin that holds the
// block-timeline records (built with -DWIDEATTN_BLOCK_TIMELINE_RECORDS) gets them as module
// globals (cuModuleGetGlobal), and each launch of its kernels appends one record per block, as
// the hooked kernels do, so `wideattn bench --block-timeline` runs end to end too.
#include <cuda.h>

#include "kernels/common/block_timeline_record.h"
#include "kernels/k_from_v_rebuild/traits.h"
#include "wideattn.h"

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

struct CUctx_st {
    int unused;
};
struct CUmod_st;
struct CUfunc_st {
    std::string symbol;
    CUmod_st* module = nullptr;
};
struct CUevent_st {
    std::chrono::steady_clock::time_point recorded;
};
struct CUmod_st {
    std::vector<std::unique_ptr<CUfunc_st>> functions;  // freed with the module
    bool timeline = false;                              // the cubin holds the records
    uint32_t timeline_count = 0;
    std::vector<wideattn::BlockTimelineRecord> timeline_records;  // the module globals of block_timeline.cuh
};

namespace {

constexpr int kDefaultCc = 90;
constexpr int kSmemOptin = 227 * 1024;
constexpr int kMultiprocessors = 132;
constexpr int kDriverVersion = 13000;
constexpr unsigned char kElfMagic[] = {0x7f, 'E', 'L', 'F'};
constexpr uint64_t kTmaMaxStride = uint64_t{1} << 40;
constexpr uint64_t kTmaMaxDim = uint64_t{1} << 32;
constexpr uint64_t kTmaStrideAlign = 16;
constexpr uint32_t kTmaMaxBox = 256;
constexpr uint32_t kTmaMaxRank = 5;

CUctx_st g_contexts[2];
std::mutex g_mutex;
std::string g_last_launch;
std::string g_launches;  // "symbol grid_x grid_y grid_z\n" per cuLaunchKernel
std::string g_programmatic_launches;  // "symbol\n" per launch with programmatic stream serialization
int g_module_loads = 0;
int g_tensor_maps = 0;
int g_device_copies = 0;     // cuMemcpyDtoHAsync calls
int g_synchronizations = 0;  // cuStreamSynchronize calls
bool g_capturing = false;    // cuStreamIsCapturing reports an active capture
int g_copies_until_failure = -1;  // cuMemcpyDtoHAsync calls that succeed before one fails; -1: never
int g_kernel_launches = 0;        // cuLaunchKernel and cuLaunchKernelEx calls
unsigned char g_last_args[sizeof(wideattn_prefill_params)];  // the first argument of the last launch
unsigned char g_last_k_from_v[sizeof(wideattn_k_from_v)];   // the second argument of the last reference_f64 launch
unsigned char g_last_rebuild[sizeof(wideattn::KFromVRebuildArgs)];  // the argument of the last rebuild launch
bool g_no_launch_ex = false;      // cuLaunchKernelEx fails (a test that it is the call made)
int g_context_index = 0;          // which of two contexts cuCtxGetCurrent reports

int fake_cc() {
    const char* cc = std::getenv("WIDEATTN_FAKE_CC");
    return cc && *cc ? std::atoi(cc) : kDefaultCc;
}

}  // namespace

extern "C" {

// Symbol of the last cuLaunchKernel ("" before the first).
const char* fake_cuda_last_launch(void) { return g_last_launch.c_str(); }
int fake_cuda_module_loads(void) { return g_module_loads; }
// Every launch since the last call, one "symbol grid_x grid_y grid_z" line each; clears the log.
// The text stays valid until the next call. No thread_local here: a dlopen'ed library's dynamic
// TLS block is found by LeakSanitizer through a guess at glibc's block header, and a wrong guess
// (it depends on where the allocator put the block) crashes its tracer thread at exit.
const char* fake_cuda_take_launches(void) {
    static std::string taken;
    std::lock_guard<std::mutex> lock(g_mutex);
    taken.swap(g_launches);
    g_launches.clear();
    return taken.c_str();
}
// The symbol of every launch since the last call whose attributes allow programmatic stream
// serialization (programmatic dependent launch), one per line; clears the log. Valid until the
// next call.
const char* fake_cuda_take_programmatic_launches(void) {
    static std::string taken;
    std::lock_guard<std::mutex> lock(g_mutex);
    taken.swap(g_programmatic_launches);
    g_programmatic_launches.clear();
    return taken.c_str();
}
int fake_cuda_tensor_maps(void) { return g_tensor_maps; }
int fake_cuda_device_copies(void) { return g_device_copies; }
int fake_cuda_synchronizations(void) { return g_synchronizations; }
// Every stream reports an active capture (cuStreamIsCapturing) while `capturing` is nonzero.
void fake_cuda_set_capturing(int capturing) { g_capturing = capturing != 0; }
// The cuMemcpyDtoHAsync call after `successes` more successful ones fails with
// CUDA_ERROR_INVALID_VALUE (then copies succeed again); -1: no failure.
void fake_cuda_set_copies_until_failure(int successes) { g_copies_until_failure = successes; }
// cuLaunchKernel + cuLaunchKernelEx calls so far.
int fake_cuda_kernel_launches(void) { return g_kernel_launches; }
// The first kernel argument of the last launch (a wideattn_prefill_params).
const void* fake_cuda_last_args(void) { return g_last_args; }
// The second kernel argument of the last launch of the fp64 reference kernel (a wideattn_k_from_v:
// the kernel with the k_from_v feature).
const void* fake_cuda_last_k_from_v(void) { return g_last_k_from_v; }
// The argument of the last launch of the K-from-V rebuild kernel (a wideattn::KFromVRebuildArgs).
const void* fake_cuda_last_rebuild(void) { return g_last_rebuild; }
// cuLaunchKernelEx fails with CUDA_ERROR_NOT_SUPPORTED while `fail` is nonzero.
void fake_cuda_set_launch_ex_fails(int fail) { g_no_launch_ex = fail != 0; }
// cuCtxGetCurrent reports context 0 (the default), context 1 (another CUDA context) or, for -1,
// none.
void fake_cuda_set_current_context(int index) { g_context_index = index; }

CUresult CUDAAPI cuInit(unsigned int) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuDriverGetVersion(int* version) {
    *version = kDriverVersion;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorName(CUresult error, const char** text) {
    *text = error == CUDA_ERROR_INVALID_VALUE ? "CUDA_ERROR_INVALID_VALUE"
            : error == CUDA_ERROR_INVALID_IMAGE ? "CUDA_ERROR_INVALID_IMAGE"
                                                : "CUDA_ERROR_NOT_SUPPORTED";
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuGetErrorString(CUresult, const char** text) {
    *text = "fake driver";
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetCount(int* count) {
    *count = 1;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGet(CUdevice* device, int ordinal) {
    if (ordinal != 0) return CUDA_ERROR_INVALID_DEVICE;
    *device = 0;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetName(char* name, int len, CUdevice) {
    std::strncpy(name, "fake device", static_cast<size_t>(len));
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDeviceGetAttribute(int* value, CUdevice_attribute attribute, CUdevice) {
    switch (attribute) {
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR: *value = fake_cc() / 10; break;
        case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR: *value = fake_cc() % 10; break;
        case CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN: *value = kSmemOptin; break;
        case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: *value = kMultiprocessors; break;
        default: *value = 0;
    }
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRetain(CUcontext* context, CUdevice) {
    *context = &g_contexts[0];
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuDevicePrimaryCtxRelease(CUdevice) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxGetCurrent(CUcontext* context) {
    *context = g_context_index < 0 ? nullptr : &g_contexts[g_context_index];
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSetCurrent(CUcontext) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuCtxGetDevice(CUdevice* device) {
    *device = 0;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuCtxSynchronize(void) { return CUDA_SUCCESS; }

// Accepts ELF images only, as the real driver does for cubins.
CUresult CUDAAPI cuModuleLoadData(CUmodule* module, const void* image) {
    if (std::memcmp(image, kElfMagic, sizeof kElfMagic) != 0) return CUDA_ERROR_INVALID_IMAGE;
    std::lock_guard<std::mutex> lock(g_mutex);
    ++g_module_loads;
    *module = new CUmod_st{};
    // The image's size from its ELF64 header (the section headers end it in nvcc's cubins), then
    // whether the records' symbol name is in it.
    const auto* bytes = static_cast<const unsigned char*>(image);
    uint64_t section_headers = 0;
    uint16_t entry_bytes = 0, entries = 0;
    std::memcpy(&section_headers, bytes + 0x28, sizeof section_headers);
    std::memcpy(&entry_bytes, bytes + 0x3a, sizeof entry_bytes);
    std::memcpy(&entries, bytes + 0x3c, sizeof entries);
    const std::string text(reinterpret_cast<const char*>(bytes), section_headers + uint64_t{entry_bytes} * entries);
    if (text.find(wideattn::kBlockTimelineRecordsSymbol) != std::string::npos) {
        (*module)->timeline = true;
        (*module)->timeline_records.resize(wideattn::kBlockTimelineRecords);
    }
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleGetGlobal(CUdeviceptr* ptr, size_t* bytes, CUmodule module, const char* name) {
    if (!module->timeline) return CUDA_ERROR_NOT_FOUND;
    if (std::strcmp(name, wideattn::kBlockTimelineCountSymbol) == 0) {
        *ptr = reinterpret_cast<CUdeviceptr>(&module->timeline_count);
        *bytes = sizeof module->timeline_count;
    } else if (std::strcmp(name, wideattn::kBlockTimelineRecordsSymbol) == 0) {
        *ptr = reinterpret_cast<CUdeviceptr>(module->timeline_records.data());
        *bytes = module->timeline_records.size() * sizeof(wideattn::BlockTimelineRecord);
    } else {
        return CUDA_ERROR_NOT_FOUND;
    }
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleUnload(CUmodule module) {
    delete module;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuModuleGetFunction(CUfunction* function, CUmodule module, const char* name) {
    module->functions.push_back(std::make_unique<CUfunc_st>(CUfunc_st{name, module}));
    *function = module->functions.back().get();
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuFuncSetAttribute(CUfunction, CUfunction_attribute, int) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuFuncGetAttribute(int* value, CUfunction_attribute, CUfunction) {
    *value = 0;
    return CUDA_SUCCESS;
}
// Records a launch (the log line and the counters); `params` are the kernel arguments, the first
// of which is kept as the last launch's wideattn_prefill_params (prefill and merge kernels).
void record_launch(CUfunction f, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z, void** params) {
    std::lock_guard<std::mutex> lock(g_mutex);
    g_last_launch = f->symbol;
    g_launches += f->symbol + " " + std::to_string(grid_x) + " " + std::to_string(grid_y) + " " +
                  std::to_string(grid_z) + "\n";
    ++g_kernel_launches;
    // The first argument's size, as the real driver knows it from the kernel: the quantise and amax
    // kernels take their own params structs, every other kernel wideattn_prefill_params.
    const bool elementwise = f->symbol.find("quantize") != std::string::npos || f->symbol.find("amax") != std::string::npos;
    if (params && params[0] && !elementwise) std::memcpy(g_last_args, params[0], sizeof g_last_args);
    if (params && params[1] && f->symbol == "wideattn_reference_f64")
        std::memcpy(g_last_k_from_v, params[1], sizeof g_last_k_from_v);
    if (params && params[0] && f->symbol == wideattn::KFromVRebuildTraits::kSymbol)
        std::memcpy(g_last_rebuild, params[0], sizeof g_last_rebuild);
    // A hooked kernel's blocks: one record each, named by the symbol without its "wideattn_",
    // blocks in x-fastest order on SMs in turn, each block 1 us after the one before.
    CUmod_st* m = f->module;
    if (!m || !m->timeline) return;
    const std::string name = f->symbol.substr(f->symbol.rfind("wideattn_", 0) == 0 ? 9 : 0);
    for (unsigned int z = 0; z < grid_z; ++z)
        for (unsigned int y = 0; y < grid_y; ++y)
            for (unsigned int x = 0; x < grid_x; ++x) {
                const uint32_t slot = m->timeline_count++;
                if (slot >= wideattn::kBlockTimelineRecords) continue;
                wideattn::BlockTimelineRecord& r = m->timeline_records[slot];
                std::memset(r.name, 0, sizeof r.name);
                std::memcpy(r.name, name.data(), std::min(name.size(), sizeof r.name - 1));
                r.block_x = x;
                r.block_y = y;
                r.block_z = z;
                r.smid = slot % kMultiprocessors;
                r.start_ns = 1000ull * slot;
                r.end_ns = r.start_ns + 500;
            }
}

CUresult CUDAAPI cuLaunchKernel(CUfunction f, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                                unsigned int, unsigned int, unsigned int, unsigned int, CUstream, void** params,
                                void**) {
    record_launch(f, grid_x, grid_y, grid_z, params);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** params, void**) {
    if (g_no_launch_ex) return CUDA_ERROR_NOT_SUPPORTED;
    if (config->numAttrs > 0 && !config->attrs) return CUDA_ERROR_INVALID_VALUE;
    bool programmatic = false;
    for (unsigned int i = 0; i < config->numAttrs; ++i)
        programmatic = programmatic ||
                       (config->attrs[i].id == CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION &&
                        config->attrs[i].value.programmaticStreamSerializationAllowed != 0);
    record_launch(f, config->gridDimX, config->gridDimY, config->gridDimZ, params);
    if (programmatic) {
        std::lock_guard<std::mutex> lock(g_mutex);
        g_programmatic_launches += f->symbol + "\n";
    }
    return CUDA_SUCCESS;
}

// The limits cuTensorMapEncodeTiled documents for the arguments libwideattn passes.
CUresult CUDAAPI cuTensorMapEncodeTiled(CUtensorMap*, CUtensorMapDataType, cuuint32_t rank, void* base,
                                        const cuuint64_t* dims, const cuuint64_t* strides, const cuuint32_t* box,
                                        const cuuint32_t*, CUtensorMapInterleave, CUtensorMapSwizzle,
                                        CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
    if (rank < 1 || rank > kTmaMaxRank || reinterpret_cast<uintptr_t>(base) % kTmaStrideAlign != 0)
        return CUDA_ERROR_INVALID_VALUE;
    for (cuuint32_t d = 0; d < rank; ++d)
        if (dims[d] == 0 || dims[d] > kTmaMaxDim || box[d] == 0 || box[d] > kTmaMaxBox) return CUDA_ERROR_INVALID_VALUE;
    for (cuuint32_t d = 0; d + 1 < rank; ++d)
        if (strides[d] % kTmaStrideAlign != 0 || strides[d] >= kTmaMaxStride) return CUDA_ERROR_INVALID_VALUE;
    std::lock_guard<std::mutex> lock(g_mutex);
    ++g_tensor_maps;
    return CUDA_SUCCESS;
}

// Memory: device pointers are host pointers (256-byte aligned), so a program over the driver API
// (examples/plan_decode.c) runs here as on a GPU; streams and events as far as the tests use them.
CUresult CUDAAPI cuMemAlloc(CUdeviceptr* ptr, size_t bytes) {
    void* p = std::aligned_alloc(256, (bytes + 255) / 256 * 256);
    if (!p) return CUDA_ERROR_OUT_OF_MEMORY;
    *ptr = reinterpret_cast<CUdeviceptr>(p);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemFree(CUdeviceptr ptr) {
    std::free(reinterpret_cast<void*>(ptr));
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyHtoD(CUdeviceptr dst, const void* src, size_t bytes) {
    std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoH(void* dst, CUdeviceptr src, size_t bytes) {
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemcpyDtoD(CUdeviceptr dst, CUdeviceptr src, size_t bytes) {
    std::memmove(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemsetD8(CUdeviceptr dst, unsigned char value, size_t bytes) {
    std::memset(reinterpret_cast<void*>(dst), value, bytes);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuMemGetInfo(size_t*, size_t*) { return CUDA_ERROR_NOT_SUPPORTED; }
CUresult CUDAAPI cuMemsetD32Async(CUdeviceptr, unsigned int, size_t, CUstream) { return CUDA_SUCCESS; }
// The tests pass host arrays as device pointers.
CUresult CUDAAPI cuMemcpyDtoHAsync(void* dst, CUdeviceptr src, size_t bytes, CUstream) {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_copies_until_failure == 0) {
        g_copies_until_failure = -1;
        return CUDA_ERROR_INVALID_VALUE;
    }
    if (g_copies_until_failure > 0) --g_copies_until_failure;
    ++g_device_copies;
    std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamIsCapturing(CUstream, CUstreamCaptureStatus* status) {
    *status = g_capturing ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
    return CUDA_SUCCESS;
}
struct CUstream_st {
    int unused;
};
CUresult CUDAAPI cuStreamCreate(CUstream* stream, unsigned int) {
    *stream = new CUstream_st{};
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamDestroy(CUstream stream) {
    delete stream;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuStreamSynchronize(CUstream) {
    std::lock_guard<std::mutex> lock(g_mutex);
    ++g_synchronizations;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventCreate(CUevent* event, unsigned int) {
    *event = new CUevent_st{};
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventDestroy(CUevent event) {
    delete event;
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventRecord(CUevent event, CUstream) {
    event->recorded = std::chrono::steady_clock::now();
    return CUDA_SUCCESS;
}
CUresult CUDAAPI cuEventSynchronize(CUevent) { return CUDA_SUCCESS; }
CUresult CUDAAPI cuEventElapsedTime(float* ms, CUevent start, CUevent stop) {
    *ms = std::chrono::duration<float, std::milli>(stop->recorded - start->recorded).count();
    return CUDA_SUCCESS;
}

}  // extern "C"
