// cpp_ops.cpp - wideattn_cpp::prefill_packed: the CUDA path of wideattn::prefill_packed in C++, so
// that an eager call costs torch's dispatcher of a C++ op, a hash lookup and wideattn_plan_run,
// without the Python of ops._prefill_cuda. Built and loaded on demand by wideattn.cpp_ops (with
// torch.utils.cpp_extension: it needs the headers of the torch the package runs with, so it is not
// part of the Meson build); the Python entry points use it once it is loaded.
//
// Plans stay the Python package's. A call whose plan key this module has not seen (or whose run
// the library refuses) takes the slow path, ops._packed_cuda_handle: it makes or finds the plan in
// ops.plans, runs the call and returns the plan's handle with the address of the
// wideattn_plan_run of the library that made it, which this module keeps under the key. Every
// handle is forgotten when any plan of the package is closed (the package calls clear(): a closed
// plan's address may come back as another plan's). In debug mode and under CUDA-graph capture
// every call takes the slow path, which then launches one-shot, as the Python implementation
// does. The key holds the fields of ops.plan_key for this op's arguments.
#include <c10/cuda/CUDAGraphsC10Utils.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/extension.h>
#include <torch/library.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <cstring>
#include <mutex>
#include <unordered_map>
#include <utility>

namespace {

constexpr int64_t kLayoutLen = 7;                   // reference.LAYOUT_FIELDS
constexpr int64_t kConfigLen = 2 * kLayoutLen + 4;  // ops.CONFIG_LEN
constexpr size_t kMaxPlans = 256;                   // handles kept before all are forgotten

// device, stream, q sizes (3) and strides (3), out strides (3), q / k / out dtypes,
// cu_seqlens_q, seq_lens_k, num_seqs, block_table, its row stride, the two layouts without their
// offsets (2 x 6), max_seqlen_q, max_seqlen_k, num_splits, flags, the softmax scale's bits.
constexpr size_t kKeyLen = 2 + 3 + 3 + 3 + 3 + 5 + 2 * (kLayoutLen - 1) + 4 + 1;
using Key = std::array<int64_t, kKeyLen>;

struct KeyHash {
    size_t operator()(const Key& key) const {
        uint64_t h = 1469598103934665603ull;  // FNV-1a over the words
        for (int64_t word : key) {
            h ^= static_cast<uint64_t>(word);
            h *= 1099511628211ull;
        }
        return static_cast<size_t>(h);
    }
};

using PlanRun = int (*)(const void* plan, const void* q, const void* k_cache, const void* v_cache, void* o,
                        void* lse, void* stream);

// A plan handle and the wideattn_plan_run of the library that made it (wideattn.configure may load
// another library for the next context).
struct Entry {
    const void* plan = nullptr;
    PlanRun run = nullptr;
};

struct State {
    std::atomic<bool> configured{false};
    std::atomic<bool> debug{false};
    std::mutex mutex;
    std::unordered_map<Key, Entry, KeyHash> plans;
    py::object slow_path;  // ops._packed_cuda_handle
    py::object cpu_path;   // ops._packed_cpu
    uint64_t hits = 0, misses = 0;
};

State& state() {
    static State* s = new State();  // never destroyed: the interpreter may outlive static destructors
    return *s;
}

Key make_key(const at::Tensor& q, const at::Tensor& k, const at::Tensor& cu_seqlens_q, const at::Tensor& seq_lens_k,
             const at::Tensor& block_table, const at::Tensor& out, c10::IntArrayRef config, double softmax_scale,
             int64_t device, int64_t stream) {
    Key key{};
    size_t i = 0;
    key[i++] = device;
    key[i++] = stream;
    for (int64_t d = 0; d < 3; ++d) key[i++] = q.size(d);
    for (int64_t d = 0; d < 3; ++d) key[i++] = q.stride(d);
    for (int64_t d = 0; d < 3; ++d) key[i++] = out.stride(d);
    key[i++] = static_cast<int64_t>(q.scalar_type());
    key[i++] = static_cast<int64_t>(k.scalar_type());
    key[i++] = static_cast<int64_t>(out.scalar_type());
    key[i++] = reinterpret_cast<int64_t>(cu_seqlens_q.data_ptr());
    key[i++] = reinterpret_cast<int64_t>(seq_lens_k.data_ptr());
    key[i++] = seq_lens_k.size(0);
    key[i++] = reinterpret_cast<int64_t>(block_table.data_ptr());
    key[i++] = block_table.stride(0);
    for (int64_t c = 1; c < kLayoutLen; ++c) key[i++] = config[c];
    for (int64_t c = kLayoutLen + 1; c < 2 * kLayoutLen; ++c) key[i++] = config[c];
    for (int64_t c = 2 * kLayoutLen; c < kConfigLen; ++c) key[i++] = config[c];
    int64_t bits = 0;
    std::memcpy(&bits, &softmax_scale, sizeof(bits));
    key[i++] = bits;
    return key;
}

// The base pointer moved by a layout offset in elements (the Python path's k.data_ptr() + offset *
// element_size()).
const void* with_offset(const at::Tensor& t, int64_t offset) {
    return static_cast<const char*>(t.data_ptr()) + offset * static_cast<int64_t>(t.element_size());
}

// The slow path: the Python implementation runs the call and returns (its plan's handle, the
// address of wideattn_plan_run), or None when it ran without a cached plan; the pair is kept
// under `key` when `key` is set.
void run_slow(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& cu_seqlens_q,
              const at::Tensor& seq_lens_k, const at::Tensor& block_table, const at::Tensor& out,
              c10::IntArrayRef config, double softmax_scale, const Key* key) {
    State& s = state();
    Entry entry;
    {
        py::gil_scoped_acquire gil;
        TORCH_CHECK(s.slow_path, "wideattn_cpp::prefill_packed: the module is not configured (wideattn.cpp_ops.load)");
        py::object result = s.slow_path(q, k, v, cu_seqlens_q, seq_lens_k, block_table, out, config.vec(),
                                        softmax_scale);
        if (!result.is_none()) {
            const auto pair = result.cast<std::pair<int64_t, int64_t>>();
            entry.plan = reinterpret_cast<const void*>(pair.first);
            entry.run = reinterpret_cast<PlanRun>(pair.second);
        }
    }
    if (key == nullptr || entry.plan == nullptr || entry.run == nullptr) return;
    std::lock_guard<std::mutex> lock(s.mutex);
    ++s.misses;
    if (s.plans.size() >= kMaxPlans) s.plans.clear();
    s.plans[*key] = entry;
}

void prefill_packed_cuda(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                         const at::Tensor& cu_seqlens_q, const at::Tensor& seq_lens_k, const at::Tensor& block_table,
                         const at::Tensor& out, c10::IntArrayRef config, double softmax_scale) {
    State& s = state();
    // Anything but the plain form (a config of another length, tensors of another rank) goes to the
    // Python implementation, whose checks name the argument.
    if (!s.configured.load(std::memory_order_acquire) || s.debug.load(std::memory_order_relaxed) ||
        static_cast<int64_t>(config.size()) != kConfigLen || q.dim() != 3 || out.dim() != 3 ||
        seq_lens_k.dim() != 1 || block_table.dim() != 2 || !q.is_cuda()) {
        run_slow(q, k, v, cu_seqlens_q, seq_lens_k, block_table, out, config, softmax_scale, nullptr);
        return;
    }
    const c10::DeviceIndex device = q.get_device();
    const c10::cuda::CUDAGuard guard(device);
    const c10::cuda::CUDAStream stream = c10::cuda::getCurrentCUDAStream(device);
    if (c10::cuda::currentStreamCaptureStatusMayInitCtx() != c10::cuda::CaptureStatus::None) {
        run_slow(q, k, v, cu_seqlens_q, seq_lens_k, block_table, out, config, softmax_scale, nullptr);
        return;
    }
    const Key key = make_key(q, k, cu_seqlens_q, seq_lens_k, block_table, out, config, softmax_scale, device,
                             reinterpret_cast<int64_t>(stream.stream()));
    Entry entry;
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        const auto found = s.plans.find(key);
        if (found != s.plans.end()) {
            entry = found->second;
            ++s.hits;
        }
    }
    if (entry.plan != nullptr) {
        const int status = entry.run(entry.plan, q.data_ptr(), with_offset(k, config[0]),
                                     with_offset(v, config[kLayoutLen]), out.data_ptr(), nullptr, stream.stream());
        if (status == 0) return;
        // Refused (a plan closed with its context, a thread without the device's context): forget
        // it; the Python implementation makes the call and raises what the library reports.
        std::lock_guard<std::mutex> lock(s.mutex);
        s.plans.erase(key);
    }
    run_slow(q, k, v, cu_seqlens_q, seq_lens_k, block_table, out, config, softmax_scale, &key);
}

// The CPU implementation: wideattn::prefill_packed's (the library's checks, the reference), so a
// call on CPU tensors behaves as it did before the module was loaded.
void prefill_packed_cpu(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& cu_seqlens_q,
                        const at::Tensor& seq_lens_k, const at::Tensor& block_table, const at::Tensor& out,
                        c10::IntArrayRef config, double softmax_scale) {
    State& s = state();
    py::gil_scoped_acquire gil;
    TORCH_CHECK(s.cpu_path, "wideattn_cpp::prefill_packed: the module is not configured (wideattn.cpp_ops.load)");
    s.cpu_path(q, k, v, cu_seqlens_q, seq_lens_k, block_table, out, config.vec(), softmax_scale);
}

void configure(py::object slow_path, py::object cpu_path) {
    State& s = state();
    TORCH_CHECK(!slow_path.is_none() && !cpu_path.is_none(), "wideattn_cpp.configure: a path is None");
    {
        std::lock_guard<std::mutex> lock(s.mutex);
        s.plans.clear();
        s.slow_path = std::move(slow_path);
        s.cpu_path = std::move(cpu_path);
    }
    s.configured.store(true, std::memory_order_release);
}

void clear() {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    s.plans.clear();
}

void set_debug(bool enabled) { state().debug.store(enabled, std::memory_order_relaxed); }

py::dict stats() {
    State& s = state();
    std::lock_guard<std::mutex> lock(s.mutex);
    py::dict d;
    d["plans"] = s.plans.size();
    d["hits"] = s.hits;
    d["misses"] = s.misses;
    return d;
}

}  // namespace

TORCH_LIBRARY(wideattn_cpp, m) {
    m.def("prefill_packed(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor seq_lens_k, "
          "Tensor block_table, Tensor(a!) out, int[] config, float softmax_scale) -> ()");
}

TORCH_LIBRARY_IMPL(wideattn_cpp, CUDA, m) { m.impl("prefill_packed", &prefill_packed_cuda); }

TORCH_LIBRARY_IMPL(wideattn_cpp, CPU, m) { m.impl("prefill_packed", &prefill_packed_cpu); }

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
    m.def("configure", &configure, "slow_path: ops._packed_cuda_handle, cpu_path: ops._packed_cpu");
    m.def("clear", &clear, "forget every plan handle");
    m.def("set_debug", &set_debug, "send every call to the slow path (debug mode) or not");
    m.def("stats", &stats, "plans kept, hits and misses");
}
