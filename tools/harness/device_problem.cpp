// device_problem.cpp - see device_problem.h.
#include "tools/harness/device_problem.h"

#include <cstring>

#include "accuracy/bf16.h"
#include "dispatch/validation.h"

namespace wideattn {

std::unique_ptr<GpuDevice> GpuDevice::open(int ordinal, wideattn_status* status, std::string* error) {
    const Driver* drv = load_driver(status, error);
    if (!drv) return nullptr;
    std::unique_ptr<GpuDevice> s(new GpuDevice());
    s->driver_ = drv;
    int count = 0;
    CUresult r = drv->cuDeviceGetCount(&count);
    if (r != CUDA_SUCCESS || ordinal < 0 || ordinal >= count) {
        *status = WIDEATTN_ERROR_NO_DEVICE;
        *error = "device " + std::to_string(ordinal) + " not present (" + std::to_string(count) + " CUDA devices)";
        return nullptr;
    }
    char name[256] = {};
    if ((r = drv->cuDeviceGet(&s->device_, ordinal)) != CUDA_SUCCESS ||
        (r = drv->cuDeviceGetName(name, sizeof name - 1, s->device_)) != CUDA_SUCCESS ||
        (r = drv->cuDeviceGetAttribute(&s->cc_major_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, s->device_)) !=
            CUDA_SUCCESS ||
        (r = drv->cuDeviceGetAttribute(&s->cc_minor_, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, s->device_)) !=
            CUDA_SUCCESS ||
        (r = drv->cuDeviceGetAttribute(&s->multiprocessors_, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, s->device_)) !=
            CUDA_SUCCESS ||
        (r = drv->cuDevicePrimaryCtxRetain(&s->context_, s->device_)) != CUDA_SUCCESS ||
        (r = drv->cuCtxSetCurrent(s->context_)) != CUDA_SUCCESS) {
        *status = WIDEATTN_ERROR_CUDA;
        *error = "opening device " + std::to_string(ordinal) + ": " + cuda_error_text(*drv, r);
        if (s->context_) drv->cuDevicePrimaryCtxRelease(s->device_);
        s->context_ = nullptr;
        return nullptr;
    }
    s->name_ = name;
    return s;
}

GpuDevice::~GpuDevice() {
    if (context_) driver_->cuDevicePrimaryCtxRelease(device_);
}

std::string GpuDevice::check(CUresult result, const char* what) const {
    return result == CUDA_SUCCESS ? std::string() : std::string(what) + ": " + cuda_error_text(*driver_, result);
}

DeviceBuffer::~DeviceBuffer() {
    if (ptr_) gpu_->driver().cuMemFree(ptr_);
}

std::string DeviceBuffer::allocate(const GpuDevice& gpu, size_t bytes) {
    if (ptr_) gpu_->driver().cuMemFree(ptr_);  // a buffer allocated again gives its old memory back
    ptr_ = 0;
    gpu_ = &gpu;
    bytes_ = bytes;
    // Never allocate 0 bytes: a valid, aligned pointer keeps validation meaningful.
    return gpu.check(gpu.driver().cuMemAlloc(&ptr_, bytes ? bytes : 16), "cuMemAlloc");
}

std::string DeviceBuffer::upload(const void* host, size_t bytes) {
    if (!bytes) return {};
    return gpu_->check(gpu_->driver().cuMemcpyHtoD(ptr_, host, bytes), "cuMemcpyHtoD");
}

std::string DeviceBuffer::download(void* host, size_t bytes) const {
    if (!bytes) return {};
    return gpu_->check(gpu_->driver().cuMemcpyDtoH(host, ptr_, bytes), "cuMemcpyDtoH");
}

std::string DeviceBuffer::fill(unsigned char byte) {
    if (!bytes_) return {};
    return gpu_->check(gpu_->driver().cuMemsetD8(ptr_, byte, bytes_), "cuMemsetD8");
}

std::string DeviceProblem::create(const GpuDevice& gpu, const HostProblem& h, int32_t out_dtype) {
    o_dtype = out_dtype;
    const size_t lse_size = out_dtype == WIDEATTN_DTYPE_F64 ? sizeof(double) : sizeof(float);
    // The fp64 reference reads the (exactly dequantised) bf16 K/V; other kernels the e4m3 codes.
    const bool e4m3_kv = h.spec.e4m3_kv && out_dtype != WIDEATTN_DTYPE_F64;
    const bool e4m3_q = h.spec.e4m3_q && out_dtype != WIDEATTN_DTYPE_F64;
    struct Upload {
        DeviceBuffer* buffer;
        const void* data;
        size_t bytes;
    } uploads[] = {
        {&q, e4m3_q ? static_cast<const void*>(h.q_e4m3.data()) : h.q.data(),
         e4m3_q ? h.q_e4m3.size() : h.q.size() * sizeof(uint16_t)},
        {&q_scale, &h.q_scale, sizeof(float)},
        {&k, e4m3_kv ? static_cast<const void*>(h.k_e4m3.data()) : h.k.data(),
         e4m3_kv ? h.k_e4m3.size() : h.k.size() * sizeof(uint16_t)},
        {&v, e4m3_kv ? static_cast<const void*>(h.v_e4m3.data()) : h.v.data(),
         e4m3_kv ? h.v_e4m3.size() : h.v.size() * sizeof(uint16_t)},
        {&k_scale, &h.k_scale, sizeof(float)},
        {&v_scale, &h.v_scale, sizeof(float)},
        {&cu_seqlens_q, h.cu_seqlens_q.data(), h.cu_seqlens_q.size() * sizeof(int32_t)},
        {&seq_lens_k, h.seq_lens_k.data(), h.seq_lens_k.size() * sizeof(int32_t)},
        {&block_table, h.block_table.data(), h.block_table.size() * sizeof(int32_t)},
    };
    for (const Upload& u : uploads) {
        std::string err = u.buffer->allocate(gpu, u.bytes);
        if (err.empty()) err = u.buffer->upload(u.data, u.bytes);
        if (!err.empty()) return err;
    }
    std::string err = o.allocate(gpu, static_cast<size_t>(h.out_elements()) * dtype_size(out_dtype));
    if (err.empty()) err = lse.allocate(gpu, static_cast<size_t>(h.lse_elements()) * lse_size);
    if (!err.empty()) return err;
    params = h.params(q.get(), k.get(), v.get(), o.get(), lse.get(), static_cast<const int32_t*>(cu_seqlens_q.get()),
                      static_cast<const int32_t*>(seq_lens_k.get()), static_cast<const int32_t*>(block_table.get()),
                      out_dtype);
    if (e4m3_kv) {
        params.kv_dtype = WIDEATTN_DTYPE_E4M3;
        params.k_scale = static_cast<const float*>(k_scale.get());
        params.v_scale = static_cast<const float*>(v_scale.get());
        if (h.spec.v_transposed) h.use_transposed_v(&params);
    }
    if (e4m3_q) {
        params.q_dtype = WIDEATTN_DTYPE_E4M3;
        params.q_scale = static_cast<const float*>(q_scale.get());
    }
    return {};
}

std::string DeviceProblem::poison_outputs() {
    std::string err = o.fill(kPoisonByte);
    if (err.empty()) err = lse.fill(kPoisonByte);
    return err;
}

std::string DeviceProblem::run(const GpuDevice& gpu, wideattn_context* ctx) {
    if (std::string err = poison_outputs(); !err.empty()) return err;
    const wideattn_status status = wideattn_prefill(ctx, &params, nullptr);
    if (status != WIDEATTN_OK) return std::string(wideattn_status_string(status)) + ": " + wideattn_last_error();
    return gpu.check(gpu.driver().cuCtxSynchronize(), "kernel execution (cuCtxSynchronize)");
}

std::string DeviceProblem::download_raw(std::vector<unsigned char>* bytes) const {
    bytes->resize(o.bytes());
    return o.download(bytes->data(), bytes->size());
}

std::string DeviceProblem::download_output(const HostProblem& h, std::vector<double>* dense) const {
    std::vector<unsigned char> raw;
    std::string err = download_raw(&raw);
    if (err.empty()) dense_output(h, raw, dense);
    return err;
}

void DeviceProblem::dense_output(const HostProblem& h, const std::vector<unsigned char>& raw,
                                 std::vector<double>* dense) const {
    const int64_t row = int64_t{h.spec.num_q_heads} * h.spec.head_dim;
    dense->resize(static_cast<size_t>(h.total_q * row));
    for (int64_t t = 0; t < h.total_q; ++t)
        for (int64_t e = 0; e < row; ++e) {
            const int64_t i = t * h.q_token_stride() + e;  // o's element, past the caller's row padding
            double& x = (*dense)[static_cast<size_t>(t * row + e)];
            if (o_dtype == WIDEATTN_DTYPE_F64) {
                std::memcpy(&x, raw.data() + i * sizeof(double), sizeof(double));
            } else if (o_dtype == WIDEATTN_DTYPE_F32) {
                float f;
                std::memcpy(&f, raw.data() + i * sizeof(float), sizeof(float));
                x = f;
            } else {
                uint16_t b;
                std::memcpy(&b, raw.data() + i * sizeof(uint16_t), sizeof(uint16_t));
                x = bf16_to_float(b);
            }
        }
}

std::string DeviceProblem::download_lse(const HostProblem& h, std::vector<double>* out) const {
    out->clear();
    if (!h.spec.want_lse) return {};
    const int64_t n = h.lse_elements();
    out->resize(static_cast<size_t>(n));
    if (o_dtype == WIDEATTN_DTYPE_F64) return lse.download(out->data(), static_cast<size_t>(n) * sizeof(double));
    std::vector<float> f(static_cast<size_t>(n));
    std::string err = lse.download(f.data(), f.size() * sizeof(float));
    for (int64_t i = 0; i < n; ++i) (*out)[i] = f[i];
    return err;
}

std::string attach_device_cos_sin(const GpuDevice& gpu, const std::vector<uint32_t>& table, DeviceBuffer* buffer,
                                  wideattn_k_from_v* kfv, int32_t word_offset) {
    if (word_offset < 0) return "attach_device_cos_sin: word_offset=" + std::to_string(word_offset) + " must be >= 0";
    int32_t positions = 0;
    std::string err = cos_sin_table_rows(table.size(), kfv->rotary_dims, &positions);
    std::vector<uint32_t> placed(static_cast<size_t>(word_offset), 0u);
    placed.insert(placed.end(), table.begin(), table.end());
    if (err.empty()) err = buffer->allocate(gpu, placed.size() * sizeof(uint32_t));
    if (err.empty()) err = buffer->upload(placed.data(), placed.size() * sizeof(uint32_t));
    if (!err.empty()) return err;
    kfv->cos_sin = static_cast<const uint32_t*>(buffer->get()) + word_offset;
    kfv->cos_sin_positions = positions;
    return {};
}

std::string RebuildScratch::create(const GpuDevice& gpu, const HostProblem& h, int32_t pages) {
    const int32_t blocks = pages * static_cast<int32_t>(h.spec.q_lens.size());
    table.resize(static_cast<size_t>(blocks));
    for (int32_t i = 0; i < blocks; ++i) table[static_cast<size_t>(i)] = i;
    const int64_t slot_stride = int64_t{h.spec.num_kv_heads} * h.spec.head_dim;
    const size_t bytes = static_cast<size_t>(blocks) * h.spec.block_size * slot_stride * sizeof(uint16_t);
    std::string err = k.allocate(gpu, bytes);
    if (err.empty()) err = v.allocate(gpu, bytes);
    if (err.empty()) err = device_table.allocate(gpu, table.size() * sizeof(int32_t));
    if (err.empty()) err = upload_table();
    out.struct_size = sizeof(out);
    out.k_cache = k.get();
    out.v_cache = v.get();
    out.k_head_stride = out.v_head_stride = h.spec.head_dim;
    out.k_slot_stride = out.v_slot_stride = slot_stride;
    out.k_block_stride = out.v_block_stride = slot_stride * h.spec.block_size;
    out.block_table = static_cast<const int32_t*>(device_table.get());
    out.block_table_stride = pages;
    out.num_blocks = blocks;
    return err;
}

std::string RebuildScratch::upload_table() { return device_table.upload(table.data(), table.size() * sizeof(int32_t)); }

wideattn_prefill_params k_and_v_call(const wideattn_prefill_params& from_v, const wideattn_k_from_v_rebuild_out& out) {
    wideattn_prefill_params kv = from_v;
    kv.flags &= ~WIDEATTN_FLAG_K_FROM_V;
    kv.k_from_v = nullptr;
    kv.kv_dtype = WIDEATTN_DTYPE_BF16;
    kv.k_scale = kv.v_scale = nullptr;
    kv.k_cache = out.k_cache;
    kv.k_block_stride = out.k_block_stride;
    kv.k_slot_stride = out.k_slot_stride;
    kv.k_head_stride = out.k_head_stride;
    kv.v_cache = out.v_cache;
    kv.v_block_stride = out.v_block_stride;
    kv.v_slot_stride = out.v_slot_stride;
    kv.v_head_stride = out.v_head_stride;
    kv.block_table = out.block_table;
    kv.block_table_stride = out.block_table_stride;
    kv.num_blocks = out.num_blocks;
    return kv;
}

}  // namespace wideattn
