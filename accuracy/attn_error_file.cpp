// attn_error_file.cpp - see attn_error_file.h.
#include "accuracy/attn_error_file.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "accuracy/accuracy_error.h"
#include "accuracy/bf16.h"
#include "accuracy/checked_size.h"
#include "accuracy/hdf5_util.h"
#include "accuracy/logit_dump.h"
#include "accuracy/reference_cpu.h"
#include "wideattn.h"

namespace wideattn::accuracy {
namespace {

constexpr const char* kScaleAttribute = "softmax_scale";

std::string dims_text(const std::vector<int64_t>& dims) {
    std::string text = "[";
    for (size_t i = 0; i < dims.size(); ++i) text += (i ? ", " : "") + std::to_string(dims[i]);
    return text + "]";
}

H5Handle open_dataset(hid_t file, const std::string& path, const std::string& name) {
    if (!has_link(file, name)) throw AccuracyError("'" + path + "' has no dataset '" + name + "'");
    H5Handle dataset(H5Dopen2(file, name.c_str(), H5P_DEFAULT));
    if (!dataset.valid()) throw AccuracyError("cannot open '" + path + "' dataset '" + name + "'");
    return dataset;
}

// The element count of a dataset of `dims` with elements of `element_bytes`, checked for
// overflow and against the bytes the dataset stores.
int64_t checked_elements(hid_t dataset, const std::vector<int64_t>& dims, int64_t element_bytes,
                         const std::string& where) {
    const std::string what = where + " " + dims_text(dims);
    const int64_t elements = checked_product(dims, what + ": elements");
    check_dataset_storage(dataset, checked_mul(elements, element_bytes, what + ": declared bytes"), what);
    return elements;
}

AttnTensor read_tensor(hid_t file, const std::string& path, const std::string& name, size_t rank) {
    const std::string where = "'" + path + "' dataset '" + name + "'";
    H5Handle dataset = open_dataset(file, path, name);
    AttnTensor tensor;
    tensor.dims = dataset_dims(dataset.get(), where);
    if (tensor.dims.size() != rank)
        throw AccuracyError(where + " must have rank " + std::to_string(rank) + ", has shape " + dims_text(tensor.dims));
    H5Handle type(H5Dget_type(dataset.get()));
    const H5T_class_t type_class = H5Tget_class(type.get());
    const size_t size = H5Tget_size(type.get());
    // The dtype attribute decides only for integer data (it may need a child process to read).
    const std::optional<std::string> dtype =
        type_class == H5T_INTEGER ? read_string_attribute(dataset.get(), kDtypeAttribute) : std::nullopt;
    herr_t status;
    if (type_class == H5T_FLOAT && size == 4) {
        tensor.type = TensorType::kFloat32;
        tensor.f32.resize(checked_size(checked_elements(dataset.get(), tensor.dims, 4, where), where));
        status = H5Dread(dataset.get(), H5T_NATIVE_FLOAT, H5S_ALL, H5S_ALL, H5P_DEFAULT, tensor.f32.data());
    } else if (type_class == H5T_INTEGER && size == 2 && dtype && *dtype == kBFloat16Name) {
        // bfloat16 bits in uint16 or int16: read with the file's signedness (no value
        // conversion), used bit for bit.
        tensor.type = TensorType::kBFloat16;
        tensor.bf16.resize(checked_size(checked_elements(dataset.get(), tensor.dims, 2, where), where));
        const hid_t memory_type = H5Tget_sign(type.get()) == H5T_SGN_2 ? H5T_NATIVE_INT16 : H5T_NATIVE_UINT16;
        status = H5Dread(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, tensor.bf16.data());
    } else {
        throw AccuracyError(where + " must be float32, or uint16 / int16 with dtype=\"bfloat16\"");
    }
    if (status < 0) throw AccuracyError("cannot read " + where + " (truncated or corrupt file?)");
    return tensor;
}

// An integer dataset read by value as int64 (no clamping), each value checked to fit int32.
std::vector<int32_t> read_int_array(hid_t file, const std::string& path, const std::string& name, size_t rank,
                                    std::vector<int64_t>* dims_out) {
    const std::string where = "'" + path + "' dataset '" + name + "'";
    H5Handle dataset = open_dataset(file, path, name);
    const std::vector<int64_t> dims = dataset_dims(dataset.get(), where);
    if (dims.size() != rank)
        throw AccuracyError(where + " must have rank " + std::to_string(rank) + ", has shape " + dims_text(dims));
    H5Handle type(H5Dget_type(dataset.get()));
    if (H5Tget_class(type.get()) != H5T_INTEGER) throw AccuracyError(where + " must hold integers");
    const int64_t count =
        checked_elements(dataset.get(), dims, static_cast<int64_t>(H5Tget_size(type.get())), where);
    std::vector<int64_t> wide(checked_size(count, where));
    if (count > 0 && H5Dread(dataset.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, wide.data()) < 0)
        throw AccuracyError("cannot read " + where + " (truncated or corrupt file?)");
    std::vector<int32_t> values(wide.size());
    for (size_t i = 0; i < wide.size(); ++i) {
        if (wide[i] < std::numeric_limits<int32_t>::min() || wide[i] > std::numeric_limits<int32_t>::max())
            throw AccuracyError(where + "[" + std::to_string(i) + "] = " + std::to_string(wide[i]) +
                                " does not fit int32");
        values[i] = static_cast<int32_t>(wide[i]);
    }
    if (dims_out) *dims_out = dims;
    return values;
}

void write_dataset(hid_t file, const std::string& name, const std::vector<int64_t>& dims, hid_t file_type,
                   hid_t memory_type, const void* data, bool bfloat16) {
    std::vector<hsize_t> extent(dims.begin(), dims.end());
    H5Handle space(H5Screate_simple(static_cast<int>(extent.size()), extent.data(), nullptr));
    H5Handle create_props(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_obj_track_times(create_props.get(), 0);  // no timestamps: same inputs, same bytes
    H5Handle dataset(H5Dcreate2(file, name.c_str(), file_type, space.get(), H5P_DEFAULT, create_props.get(), H5P_DEFAULT));
    if (!dataset.valid() || H5Dwrite(dataset.get(), memory_type, H5S_ALL, H5S_ALL, H5P_DEFAULT, data) < 0)
        throw AccuracyError("cannot write dataset '" + name + "'");
    if (bfloat16) write_string_attribute(dataset.get(), kDtypeAttribute, kBFloat16Name);
}

void write_tensor(hid_t file, const std::string& name, const AttnTensor& tensor) {
    if (tensor.type == TensorType::kFloat32)
        write_dataset(file, name, tensor.dims, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, tensor.f32.data(), false);
    else
        write_dataset(file, name, tensor.dims, H5T_STD_U16LE, H5T_NATIVE_UINT16, tensor.bf16.data(), true);
}

int32_t dtype_of(const AttnTensor& tensor) {
    return tensor.type == TensorType::kFloat32 ? WIDEATTN_DTYPE_F32 : WIDEATTN_DTYPE_BF16;
}

OutputType output_type_of(const AttnTensor& tensor) {
    return tensor.type == TensorType::kFloat32 ? OutputType::kF32 : OutputType::kBF16;
}

void fill_bf16(AttnTensor* tensor, std::vector<int64_t> dims, uint64_t* state) {
    tensor->dims = std::move(dims);
    tensor->type = TensorType::kBFloat16;
    tensor->bf16.resize(static_cast<size_t>(tensor->elements()));
    for (auto& value : tensor->bf16) {
        *state = *state * 6364136223846793005ull + 1442695040888963407ull;  // LCG step
        const double uniform = static_cast<double>(*state >> 11) * 0x1.0p-53;
        value = float_to_bf16(static_cast<float>(2.0 * uniform - 1.0));
    }
}

// The sizes wideattn_prefill_params holds as int32 must fit it (never truncated).
void check_int32_sizes(const AttnCase& c, const std::string& file_name) {
    const struct {
        const char* name;
        int64_t value;
    } sizes[] = {{"total_q (q dimension 0)", c.q.dims[0]},
                 {"num_q_heads (q dimension 1)", c.q.dims[1]},
                 {"head_dim (q dimension 2)", c.q.dims[2]},
                 {"num_blocks (k_cache dimension 0)", c.k_cache.dims[0]},
                 {"block_size (k_cache dimension 1)", c.k_cache.dims[1]},
                 {"num_kv_heads (k_cache dimension 2)", c.k_cache.dims[2]},
                 {"num_seqs (seq_lens_k entries)", static_cast<int64_t>(c.seq_lens_k.size())}};
    for (const auto& size : sizes)
        if (size.value > std::numeric_limits<int32_t>::max())
            throw AccuracyError(file_name + size.name + " = " + std::to_string(size.value) +
                                " does not fit int32 (the C API's field)");
}

}  // namespace

int64_t AttnTensor::elements() const { return checked_product(dims, "tensor " + dims_text(dims) + ": elements"); }

const void* AttnTensor::data() const {
    return type == TensorType::kFloat32 ? static_cast<const void*>(f32.data()) : static_cast<const void*>(bf16.data());
}

AttnCase read_attn_case(const std::string& path) {
    probe_in_child(path, [&path] {
        read_attn_case_here(path);
        return std::string();
    });
    return read_attn_case_here(path);
}

AttnCase read_attn_case_here(const std::string& path) {
    H5Handle file = open_hdf5_for_reading(path);
    AttnCase c;
    c.q = read_tensor(file.get(), path, "q", 3);
    c.k_cache = read_tensor(file.get(), path, "k_cache", 4);
    c.v_cache = read_tensor(file.get(), path, "v_cache", 4);
    c.out = read_tensor(file.get(), path, "out", 3);
    std::vector<int64_t> dims;
    c.cu_seqlens_q = read_int_array(file.get(), path, "cu_seqlens_q", 1, nullptr);
    c.seq_lens_k = read_int_array(file.get(), path, "seq_lens_k", 1, nullptr);
    c.block_table = read_int_array(file.get(), path, "block_table", 2, &dims);
    c.block_table_stride = dims[1];
    const std::optional<double> scale = read_double_attribute(file.get(), kScaleAttribute);
    if (!scale) throw AccuracyError("'" + path + "' has no numeric root attribute '" + kScaleAttribute + "'");
    c.softmax_scale = *scale;

    const std::string file_name = "'" + path + "': ";
    if (c.k_cache.dims != c.v_cache.dims || c.k_cache.type != c.v_cache.type)
        throw AccuracyError(file_name + "k_cache " + dims_text(c.k_cache.dims) + " and v_cache " +
                            dims_text(c.v_cache.dims) + " must have the same shape and type");
    if (c.out.dims != c.q.dims)
        throw AccuracyError(file_name + "out " + dims_text(c.out.dims) + " must have the shape of q " + dims_text(c.q.dims));
    if (c.k_cache.dims[3] != c.q.dims[2])
        throw AccuracyError(file_name + "head_dim of q (" + std::to_string(c.q.dims[2]) + ") and k_cache (" +
                            std::to_string(c.k_cache.dims[3]) + ") differ");
    if (c.cu_seqlens_q.size() < 2 || c.seq_lens_k.size() != c.cu_seqlens_q.size() - 1)
        throw AccuracyError(file_name + "need cu_seqlens_q [num_seqs + 1] and seq_lens_k [num_seqs] with num_seqs >= 1, got " +
                            std::to_string(c.cu_seqlens_q.size()) + " and " + std::to_string(c.seq_lens_k.size()) + " entries");
    if (static_cast<int64_t>(c.seq_lens_k.size()) != dims[0])
        throw AccuracyError(file_name + "block_table has " + std::to_string(dims[0]) + " rows for " +
                            std::to_string(c.seq_lens_k.size()) + " sequences");
    if (c.q.dims[0] == 0) throw AccuracyError(file_name + "q has no tokens (empty case)");
    check_int32_sizes(c, file_name);
    if (has_link(file.get(), "lse")) {
        const AttnTensor lse = read_tensor(file.get(), path, "lse", 2);
        if (lse.type != TensorType::kFloat32 || lse.dims != std::vector<int64_t>{c.q.dims[1], c.q.dims[0]})
            throw AccuracyError(file_name + "lse must be float32 [num_q_heads, total_q] = [" + std::to_string(c.q.dims[1]) +
                                ", " + std::to_string(c.q.dims[0]) + "], got " + dims_text(lse.dims));
        c.has_lse = true;
        c.lse = lse.f32;
    }
    return c;
}

void write_attn_case(const std::string& path, const AttnCase& c) {
    H5Handle file = create_hdf5_file(path);
    write_tensor(file.get(), "q", c.q);
    write_tensor(file.get(), "k_cache", c.k_cache);
    write_tensor(file.get(), "v_cache", c.v_cache);
    write_tensor(file.get(), "out", c.out);
    write_dataset(file.get(), "cu_seqlens_q", {static_cast<int64_t>(c.cu_seqlens_q.size())}, H5T_STD_I32LE,
                  H5T_NATIVE_INT32, c.cu_seqlens_q.data(), false);
    write_dataset(file.get(), "seq_lens_k", {static_cast<int64_t>(c.seq_lens_k.size())}, H5T_STD_I32LE,
                  H5T_NATIVE_INT32, c.seq_lens_k.data(), false);
    write_dataset(file.get(), "block_table", {static_cast<int64_t>(c.seq_lens_k.size()), c.block_table_stride},
                  H5T_STD_I32LE, H5T_NATIVE_INT32, c.block_table.data(), false);
    if (c.has_lse)
        write_dataset(file.get(), "lse", {c.q.dims[1], c.q.dims[0]}, H5T_IEEE_F32LE, H5T_NATIVE_FLOAT, c.lse.data(), false);
    write_double_attribute(file.get(), kScaleAttribute, c.softmax_scale);
}

AttnErrorResult evaluate_attn_case(const AttnCase& c) {
    const int64_t total_q = c.q.dims[0], num_q_heads = c.q.dims[1], head_dim = c.q.dims[2];
    const int64_t num_blocks = c.k_cache.dims[0], block_size = c.k_cache.dims[1], num_kv_heads = c.k_cache.dims[2];
    wideattn_prefill_params p{};
    p.q = c.q.data();
    p.q_head_stride = head_dim;
    p.q_token_stride = num_q_heads * head_dim;
    p.k_cache = c.k_cache.data();
    p.v_cache = c.v_cache.data();
    p.k_head_stride = p.v_head_stride = head_dim;
    p.k_slot_stride = p.v_slot_stride = num_kv_heads * head_dim;
    p.k_block_stride = p.v_block_stride = block_size * num_kv_heads * head_dim;
    p.o_head_stride = head_dim;
    p.o_token_stride = num_q_heads * head_dim;
    p.lse_head_stride = total_q;
    p.cu_seqlens_q = c.cu_seqlens_q.data();
    p.seq_lens_k = c.seq_lens_k.data();
    p.block_table = c.block_table.data();
    p.block_table_stride = c.block_table_stride;
    p.num_seqs = static_cast<int32_t>(c.seq_lens_k.size());
    p.total_q = static_cast<int32_t>(total_q);
    p.num_q_heads = static_cast<int32_t>(num_q_heads);
    p.num_kv_heads = static_cast<int32_t>(num_kv_heads);
    p.head_dim = static_cast<int32_t>(head_dim);
    p.block_size = static_cast<int32_t>(block_size);
    p.num_blocks = static_cast<int32_t>(num_blocks);
    p.q_dtype = dtype_of(c.q);
    p.kv_dtype = dtype_of(c.k_cache);
    p.o_dtype = WIDEATTN_DTYPE_F64;
    p.softmax_scale = static_cast<float>(c.softmax_scale);

    AttnErrorResult result;
    result.reference_out.assign(static_cast<size_t>(c.out.elements()), 0.0);
    result.reference_lse.assign(static_cast<size_t>(num_q_heads * total_q), 0.0);
    const std::string error = reference_attention_cpu(p, result.reference_out.data(), result.reference_lse.data());
    if (!error.empty()) throw AccuracyError(error);

    result.out_stats = compute_error_stats(result.reference_out.data(), c.out.data(), output_type_of(c.out), c.out.elements());
    result.max_abs_at = locate_token_head_dim(result.out_stats.max_abs_index, num_q_heads, head_dim);
    for (int64_t h = 0; h < num_q_heads; ++h) {
        std::vector<double> reference_head, out_head;
        for (int64_t t = 0; t < total_q; ++t) {
            for (int64_t d = 0; d < head_dim; ++d) {
                const int64_t index = (t * num_q_heads + h) * head_dim + d;
                reference_head.push_back(result.reference_out[static_cast<size_t>(index)]);
                out_head.push_back(c.out.type == TensorType::kFloat32 ? c.out.f32[index] : bf16_to_float(c.out.bf16[index]));
            }
        }
        result.per_head.push_back(compute_error_stats(reference_head.data(), out_head.data(), OutputType::kF64,
                                                      static_cast<int64_t>(out_head.size())));
    }
    if (c.has_lse) {
        std::vector<double> reference_lse, kernel_lse;
        for (size_t i = 0; i < c.lse.size(); ++i) {
            if (!std::isfinite(result.reference_lse[i])) continue;  // rows with no visible key
            reference_lse.push_back(result.reference_lse[i]);
            kernel_lse.push_back(c.lse[i]);
        }
        result.has_lse = true;
        result.lse_stats = compute_error_stats(reference_lse.data(), kernel_lse.data(), OutputType::kF64,
                                               static_cast<int64_t>(kernel_lse.size()));
    }
    return result;
}

AttnCase make_sample_attn_case(uint64_t seed) {
    constexpr int64_t kHeadDim = 512, kQueryHeads = 4, kKvHeads = 2, kBlockSize = 16, kBlocks = 5;
    AttnCase c;
    c.cu_seqlens_q = {0, 5, 17};
    c.seq_lens_k = {37, 12};  // sequence 0 has 32 cached keys, sequence 1 none
    c.block_table_stride = 3;
    c.block_table = {3, 0, 4, 1, 2, 2};  // shuffled; sequence 1 uses one block
    c.softmax_scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim)) * 4.0;
    const int64_t total_q = c.cu_seqlens_q.back();
    uint64_t state = seed;
    fill_bf16(&c.q, {total_q, kQueryHeads, kHeadDim}, &state);
    fill_bf16(&c.k_cache, {kBlocks, kBlockSize, kKvHeads, kHeadDim}, &state);
    fill_bf16(&c.v_cache, {kBlocks, kBlockSize, kKvHeads, kHeadDim}, &state);
    c.out.dims = c.q.dims;
    c.out.type = TensorType::kBFloat16;
    c.out.bf16.assign(static_cast<size_t>(c.q.elements()), 0);
    c.has_lse = true;
    c.lse.assign(static_cast<size_t>(kQueryHeads * total_q), 0.0f);
    const AttnErrorResult exact = evaluate_attn_case(c);
    for (size_t i = 0; i < c.out.bf16.size(); ++i) c.out.bf16[i] = float_to_bf16(static_cast<float>(exact.reference_out[i]));
    for (size_t i = 0; i < c.lse.size(); ++i) c.lse[i] = static_cast<float>(exact.reference_lse[i]);
    return c;
}

}  // namespace wideattn::accuracy
