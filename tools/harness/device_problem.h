// device_problem.h - a GPU device (its primary context, through the dlopen'd
// driver) and a HostProblem uploaded to device memory, with poisoned outputs and a launch
// through the public C API. Shared by `wideattn selftest`, the GPU tests and `wideattn bench`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "dispatch/driver.h"
#include "tools/harness/problem.h"
#include "wideattn.h"

namespace wideattn {

class GpuDevice {
public:
    // Retains device `ordinal`'s primary context and makes it current on this thread.
    // Returns nullptr with *status / *error when there is no driver or no such device.
    static std::unique_ptr<GpuDevice> open(int ordinal, wideattn_status* status, std::string* error);
    ~GpuDevice();
    GpuDevice(const GpuDevice&) = delete;
    GpuDevice& operator=(const GpuDevice&) = delete;

    const Driver& driver() const { return *driver_; }
    int cc_major() const { return cc_major_; }
    int cc_minor() const { return cc_minor_; }
    int multiprocessors() const { return multiprocessors_; }
    const std::string& name() const { return name_; }
    // Checks a driver result; on failure returns "what: CUDA_ERROR_..." else "".
    std::string check(CUresult result, const char* what) const;

private:
    GpuDevice() = default;
    const Driver* driver_ = nullptr;
    CUdevice device_ = 0;
    CUcontext context_ = nullptr;
    int cc_major_ = 0, cc_minor_ = 0, multiprocessors_ = 0;
    std::string name_;
};

class DeviceBuffer {
public:
    DeviceBuffer() = default;
    ~DeviceBuffer();
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    std::string allocate(const GpuDevice& gpu, size_t bytes);  // frees what it held before
    std::string upload(const void* host, size_t bytes);
    std::string download(void* host, size_t bytes) const;
    std::string fill(unsigned char byte);  // e.g. 0xFF: every bf16/f32/f64 becomes NaN
    void* get() const { return reinterpret_cast<void*>(ptr_); }
    const GpuDevice* gpu() const { return gpu_; }
    size_t bytes() const { return bytes_; }

private:
    const GpuDevice* gpu_ = nullptr;
    CUdeviceptr ptr_ = 0;
    size_t bytes_ = 0;
};

// Uploads the cos / sin table `table` (k_from_v_cos_sin_table's entries for kfv->rotary_dims) into
// *buffer and points kfv->cos_sin at the device copy, cos_sin_positions at its rows (the table must
// outlive the calls that read it), `word_offset` 4-byte words past the start of the allocation (a
// table that is not 16-byte aligned: 2 puts it 8 bytes in). Returns "" or the error.
std::string attach_device_cos_sin(const GpuDevice& gpu, const std::vector<uint32_t>& table, DeviceBuffer* buffer,
                                  wideattn_k_from_v* kfv, int32_t word_offset = 0);

constexpr unsigned char kPoisonByte = 0xFF;  // NaN in every float format we write

// A dense bf16 K + V scratch for wideattn_k_from_v_rebuild over a problem's geometry (block size,
// KV heads, head dim): `pages` pages a sequence, [block][slot][kv_head][d], and the identity table
// (page j of sequence s at s * pages + j), kept on the host in `table` for callers that alter it.
struct RebuildScratch {
    DeviceBuffer k, v, device_table;
    std::vector<int32_t> table;
    wideattn_k_from_v_rebuild_out out{};

    std::string create(const GpuDevice& gpu, const HostProblem& h, int32_t pages);
    // Uploads `table` (after a caller changed entries).
    std::string upload_table();
};

// The K + V call that reads `out`'s caches and table where the K-from-V call `from_v` reads its
// V-only cache: bf16 K/V, no flag, no description, no K/V scales.
wideattn_prefill_params k_and_v_call(const wideattn_prefill_params& from_v, const wideattn_k_from_v_rebuild_out& out);

struct DeviceProblem {
    DeviceBuffer q, k, v, q_scale, k_scale, v_scale, cu_seqlens_q, seq_lens_k, block_table, o, lse;
    int32_t o_dtype = WIDEATTN_DTYPE_BF16;
    wideattn_prefill_params params{};

    // Uploads the inputs and allocates o (o_dtype) and lse (f32, or f64 for F64 output). With
    // host.spec.e4m3_kv and a non-F64 output, K/V are the e4m3 codes (kv_dtype E4M3 with
    // device k_scale / v_scale; V in the transposed layout with host.spec.v_transposed), with
    // host.spec.e4m3_q so is Q (q_dtype E4M3, q_scale); the
    // F64 reference always reads the dequantised bf16 Q, K and V.
    std::string create(const GpuDevice& gpu, const HostProblem& host, int32_t o_dtype);
    // Fills o and lse with kPoisonByte (NaN), so output a launch does not write stays NaN.
    std::string poison_outputs();
    // Poisons o and lse, launches through wideattn_prefill on the default stream and waits.
    // Returns "" or a message (status name + wideattn_last_error()).
    std::string run(const GpuDevice& gpu, wideattn_context* ctx);
    // Downloads o as doubles in dense [token][head][d] order (bf16 / f32 / f64 output).
    std::string download_output(const HostProblem& host, std::vector<double>* dense) const;
    // The same from o's raw bytes, already downloaded (download_raw).
    void dense_output(const HostProblem& host, const std::vector<unsigned char>& raw, std::vector<double>* dense) const;
    // Downloads o's raw bytes (for bit-identity checks).
    std::string download_raw(std::vector<unsigned char>* bytes) const;
    // Downloads lse as doubles [head][token] (empty when the problem has no lse).
    std::string download_lse(const HostProblem& host, std::vector<double>* lse_out) const;
};

}  // namespace wideattn
