// hdf5_util.cpp - see hdf5_util.h.
#include "accuracy/hdf5_util.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <new>
#include <sys/stat.h>

#include "accuracy/accuracy_error.h"
#include "accuracy/checked_size.h"
#include "accuracy/filtered_chunks.h"
#include "accuracy/isolated_call.h"
#include "accuracy/output_path.h"

namespace wideattn::accuracy {

H5Handle& H5Handle::operator=(H5Handle&& other) noexcept {
    if (this != &other) {
        reset();
        id_ = other.id_;
        other.id_ = H5I_INVALID_HID;
    }
    return *this;
}

void H5Handle::reset() {
    if (id_ < 0) return;
    switch (H5Iget_type(id_)) {
        case H5I_FILE: H5Fclose(id_); break;
        case H5I_GROUP: H5Gclose(id_); break;
        case H5I_DATATYPE: H5Tclose(id_); break;
        case H5I_DATASPACE: H5Sclose(id_); break;
        case H5I_DATASET: H5Dclose(id_); break;
        case H5I_ATTR: H5Aclose(id_); break;
        case H5I_GENPROP_LST: H5Pclose(id_); break;
        default: break;
    }
    id_ = H5I_INVALID_HID;
}

std::mutex& hdf5_call_mutex() {
    static std::mutex mutex;
    return mutex;
}

void silence_hdf5_errors() { H5Eset_auto2(H5E_DEFAULT, nullptr, nullptr); }

namespace {

// Why H5Fopen refused a file, from the error stack it left: another process's lock (a writer
// has it open), the superblock's flags of a file open for writing, or anything else.
enum class OpenRefusal { kOther, kLocked, kMarkedOpen };

// libhdf5 1.10's description of a file whose superblock flags say a writer has it open.
constexpr const char* kMarkedOpenText = "already open for write";

herr_t note_open_refusal(unsigned, const H5E_error2_t* entry, void* data) {
    auto* refusal = static_cast<OpenRefusal*>(data);
    if (entry->min_num == H5E_CANTLOCKFILE) *refusal = OpenRefusal::kLocked;
    else if (*refusal == OpenRefusal::kOther && entry->desc != nullptr && std::strstr(entry->desc, kMarkedOpenText))
        *refusal = OpenRefusal::kMarkedOpen;
    return 0;
}

OpenRefusal open_refusal() {
    OpenRefusal refusal = OpenRefusal::kOther;
    H5Ewalk2(H5E_DEFAULT, H5E_WALK_DOWNWARD, note_open_refusal, &refusal);
    return refusal;
}

}  // namespace

H5Handle open_hdf5_for_reading(const std::string& path) {
    silence_hdf5_errors();
    struct stat info {};
    if (stat(path.c_str(), &info) != 0)
        throw AccuracyError("cannot open '" + path + "': " + std::strerror(errno));
    if (!S_ISREG(info.st_mode)) throw AccuracyError("'" + path + "' is not a regular file");
    if (info.st_size == 0) throw AccuracyError("'" + path + "' is empty (0 bytes), not an HDF5 file");
    if (H5Fis_hdf5(path.c_str()) <= 0)
        throw AccuracyError("'" + path + "' is not an HDF5 file (no HDF5 signature)");
    H5Handle file(H5Fopen(path.c_str(), H5F_ACC_RDONLY, H5P_DEFAULT));
    if (!file.valid()) {
        const OpenRefusal refusal = open_refusal();
        if (refusal == OpenRefusal::kLocked)
            throw AccuracyError("'" + path + "' is locked by a program that has it open for writing (HDF5 file "
                                "locking): close the file in the writer (e.g. leave its h5py 'with' block) first");
        if (refusal == OpenRefusal::kMarkedOpen)
            throw AccuracyError("'" + path + "' is marked as still open for writing (its HDF5 superblock's "
                                "consistency flags): close the file in the writer first; if the writer ended "
                                "without closing it, the file may be incomplete (h5clear -s clears the flags)");
        throw AccuracyError("'" + path + "' has an HDF5 signature but cannot be opened (truncated or corrupt?)");
    }
    return file;
}

H5Handle create_hdf5_file(const std::string& path) {
    silence_hdf5_errors();
    H5Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    if (!file.valid()) {
        const std::string problem = output_path_problem(path);
        throw AccuracyError("cannot create HDF5 file '" + path + "'" + (problem.empty() ? "" : ": " + problem));
    }
    return file;
}

bool has_link(hid_t location, const std::string& name) {
    return H5Lexists(location, name.c_str(), H5P_DEFAULT) > 0;
}

std::string hdf5_class_text(H5T_class_t type_class) {
    switch (type_class) {
        case H5T_INTEGER: return "an integer";
        case H5T_FLOAT: return "a float";
        case H5T_STRING: return "a string";
        case H5T_COMPOUND: return "a compound";
        case H5T_ARRAY: return "an array";
        case H5T_VLEN: return "a variable-length sequence";
        default: return "a class " + std::to_string(static_cast<int>(type_class));
    }
}

void write_string_attribute(hid_t object, const std::string& name, const std::string& value) {
    H5Handle type(H5Tcopy(H5T_C_S1));
    H5Tset_size(type.get(), value.empty() ? 1 : value.size());
    H5Tset_strpad(type.get(), H5T_STR_NULLPAD);
    H5Handle space(H5Screate(H5S_SCALAR));
    H5Handle attribute(H5Acreate2(object, name.c_str(), type.get(), space.get(), H5P_DEFAULT, H5P_DEFAULT));
    const std::string padded = value.empty() ? std::string(1, '\0') : value;
    if (!attribute.valid() || H5Awrite(attribute.get(), type.get(), padded.data()) < 0)
        throw AccuracyError("cannot write string attribute '" + name + "'");
}

namespace {

// Widest numeric attribute read (a long double or a 128-bit integer at most).
constexpr size_t kMaxNumberBytes = 16;

// Bytes a variable-length element occupies in the file: its length (4 bytes) and a global-heap
// reference (the file's address size + a 4-byte index); 0 when the file's sizes cannot be read.
hsize_t variable_length_element_bytes(hid_t object) {
    constexpr hsize_t kLengthBytes = 4, kHeapIndexBytes = 4;
    H5Handle file(H5Iget_file_id(object));
    if (!file.valid()) return 0;
    H5Handle props(H5Fget_create_plist(file.get()));
    size_t address_bytes = 0, length_bytes = 0;
    if (!props.valid() || H5Pget_sizes(props.get(), &address_bytes, &length_bytes) < 0) return 0;
    return kLengthBytes + address_bytes + kHeapIndexBytes;
}

// One element in a scalar or simple dataspace, or a description of what is there instead.
std::string single_element_problem(hid_t attribute) {
    H5Handle space(H5Aget_space(attribute));
    if (!space.valid()) return "has an unreadable dataspace";
    const H5S_class_t space_class = H5Sget_simple_extent_type(space.get());
    const hssize_t points = H5Sget_simple_extent_npoints(space.get());
    if ((space_class != H5S_SCALAR && space_class != H5S_SIMPLE) || points != 1)
        return "holds " + std::to_string(points) + " elements, not one";
    return "";
}

StringAttribute unreadable(const std::string& problem) {
    StringAttribute result;
    result.status = StringAttribute::Status::kUnreadable;
    result.problem = problem;
    return result;
}

StringAttribute read_variable_string(hid_t attribute, hid_t file_type) {
    const hsize_t expected = variable_length_element_bytes(attribute);
    const hsize_t stored = H5Aget_storage_size(attribute);
    if (expected == 0 || stored != expected)
        return unreadable("stores " + std::to_string(stored) + " bytes for one variable-length string (expected " +
                          std::to_string(expected) + "; corrupt?)");
    H5Handle memory_type(H5Tcopy(H5T_C_S1));
    H5Tset_size(memory_type.get(), H5T_VARIABLE);
    H5Tset_cset(memory_type.get(), H5Tget_cset(file_type));
    char* text = nullptr;
    if (H5Aread(attribute, memory_type.get(), &text) < 0) return unreadable("cannot be read (corrupt?)");
    StringAttribute result;
    result.status = StringAttribute::Status::kValue;
    if (text != nullptr) {
        result.value = text;
        H5free_memory(text);
    }
    if (result.value.size() > kMaxStringAttributeBytes)
        return unreadable("is a variable-length string of " + std::to_string(result.value.size()) + " bytes (at most " +
                          std::to_string(kMaxStringAttributeBytes) + " are read)");
    return result;
}

StringAttribute read_fixed_string(hid_t attribute, hid_t file_type) {
    const size_t size = H5Tget_size(file_type);
    if (size == 0 || size > kMaxStringAttributeBytes)
        return unreadable("is a fixed-length string of " + std::to_string(size) + " bytes (at most " +
                          std::to_string(kMaxStringAttributeBytes) + " are read)");
    const hsize_t stored = H5Aget_storage_size(attribute);
    if (stored != size)
        return unreadable("stores " + std::to_string(stored) + " bytes for a string of " + std::to_string(size) +
                          " (corrupt?)");
    H5Handle memory_type(H5Tcopy(H5T_C_S1));
    H5Tset_size(memory_type.get(), size);
    H5Tset_strpad(memory_type.get(), H5T_STR_NULLPAD);
    H5Tset_cset(memory_type.get(), H5Tget_cset(file_type));
    std::string buffer(size, '\0');
    if (H5Aread(attribute, memory_type.get(), buffer.data()) < 0) return unreadable("cannot be read (corrupt?)");
    buffer.resize(std::strlen(buffer.c_str()));
    StringAttribute result;
    result.status = StringAttribute::Status::kValue;
    result.value = std::move(buffer);
    return result;
}

}  // namespace

StringAttribute read_string_attribute_checked(hid_t object, const std::string& name) {
    const htri_t exists = H5Aexists(object, name.c_str());
    if (exists == 0) return {};
    if (exists < 0) return unreadable("cannot be looked up (corrupt object header?)");
    H5Handle attribute(H5Aopen(object, name.c_str(), H5P_DEFAULT));
    if (!attribute.valid()) return unreadable("cannot be opened (corrupt?)");
    H5Handle file_type(H5Aget_type(attribute.get()));
    if (!file_type.valid()) return unreadable("has an unreadable type");
    const H5T_class_t type_class = H5Tget_class(file_type.get());
    if (type_class != H5T_STRING) return unreadable("is " + hdf5_class_text(type_class) + " attribute, not a string");
    const std::string shape_problem = single_element_problem(attribute.get());
    if (!shape_problem.empty()) return unreadable(shape_problem);
    const H5T_cset_t cset = H5Tget_cset(file_type.get());
    if (cset != H5T_CSET_ASCII && cset != H5T_CSET_UTF8)
        return unreadable("has character set " + std::to_string(static_cast<int>(cset)) + " (not ASCII or UTF-8)");
    const htri_t variable = H5Tis_variable_str(file_type.get());
    if (variable < 0) return unreadable("has an unreadable string type");
    return variable > 0 ? read_variable_string(attribute.get(), file_type.get())
                        : read_fixed_string(attribute.get(), file_type.get());
}

std::optional<std::string> read_string_attribute(hid_t object, const std::string& name) {
    StringAttribute attribute = read_string_attribute_checked(object, name);
    if (attribute.status != StringAttribute::Status::kValue) return std::nullopt;
    return std::move(attribute.value);
}

void write_double_attribute(hid_t object, const std::string& name, double value) {
    H5Handle space(H5Screate(H5S_SCALAR));
    H5Handle attribute(H5Acreate2(object, name.c_str(), H5T_IEEE_F64LE, space.get(), H5P_DEFAULT, H5P_DEFAULT));
    if (!attribute.valid() || H5Awrite(attribute.get(), H5T_NATIVE_DOUBLE, &value) < 0)
        throw AccuracyError("cannot write attribute '" + name + "'");
}

std::optional<double> read_double_attribute(hid_t object, const std::string& name) {
    if (H5Aexists(object, name.c_str()) <= 0) return std::nullopt;
    H5Handle attribute(H5Aopen(object, name.c_str(), H5P_DEFAULT));
    if (!attribute.valid()) return std::nullopt;
    H5Handle file_type(H5Aget_type(attribute.get()));
    const H5T_class_t type_class = H5Tget_class(file_type.get());
    if (type_class != H5T_FLOAT && type_class != H5T_INTEGER) return std::nullopt;
    if (!single_element_problem(attribute.get()).empty()) return std::nullopt;
    const size_t size = H5Tget_size(file_type.get());
    if (size == 0 || size > kMaxNumberBytes || H5Aget_storage_size(attribute.get()) != size) return std::nullopt;
    double value = 0.0;
    if (H5Aread(attribute.get(), H5T_NATIVE_DOUBLE, &value) < 0) return std::nullopt;
    return value;
}

std::vector<int64_t> dataset_dims(hid_t dataset, const std::string& where) {
    H5Handle space(H5Dget_space(dataset));
    const int rank = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
    if (rank < 0) throw AccuracyError("cannot read the dataspace of " + where + " (corrupt file?)");
    std::vector<hsize_t> dims(static_cast<size_t>(rank));
    if (rank > 0 && H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr) < 0)
        throw AccuracyError("cannot read the dimensions of " + where + " (corrupt file?)");
    std::vector<int64_t> result;
    for (hsize_t d : dims) {
        if (d > static_cast<hsize_t>(std::numeric_limits<int64_t>::max()))
            throw AccuracyError(where + " declares a dimension of " + std::to_string(d) + " (more than 2^63 - 1)");
        result.push_back(static_cast<int64_t>(d));
    }
    return result;
}

namespace {

// Layout, external files and filters (see check_dataset_storage).
void check_layout_and_filters(hid_t create_props, H5D_layout_t layout, const std::string& where) {
    if (layout != H5D_CONTIGUOUS && layout != H5D_CHUNKED && layout != H5D_COMPACT)
        throw AccuracyError(where + " has storage layout " + std::to_string(static_cast<int>(layout)) +
                            " (only contiguous, chunked or compact datasets are read; not virtual ones)");
    if (H5Pget_external_count(create_props) != 0)
        throw AccuracyError(where + " keeps its data in external files (not read)");
    const int filters = H5Pget_nfilters(create_props);
    for (int f = 0; f < filters; ++f) {
        unsigned flags = 0;
        size_t values = 0;
        const H5Z_filter_t filter =
            H5Pget_filter2(create_props, static_cast<unsigned>(f), &flags, &values, nullptr, 0, nullptr, nullptr);
        if (filter < 0 || H5Zfilter_avail(filter) <= 0)
            throw AccuracyError(where + " is compressed with HDF5 filter " + std::to_string(filter) +
                                ", which this HDF5 library does not have");
        if (!is_size_checked_filter(filter))
            throw AccuracyError(where + " is stored with HDF5 filter " + std::to_string(filter) +
                                ", whose output the reader cannot size (only deflate, shuffle and fletcher32 "
                                "are read)");
    }
}

// Bytes of one chunk: the chunk's extent times the element size. The chunk must have the
// dataset's rank and, in a dimension of fixed size, be no larger than it (HDF5's own rule when
// a dataset is made; a corrupt chunk shape larger than that made libhdf5 1.10 copy past the
// buffer its filters returned).
int64_t chunk_bytes_of(hid_t dataset, hid_t create_props, const std::string& where) {
    hsize_t chunk[H5S_MAX_RANK] = {};
    hsize_t dims[H5S_MAX_RANK] = {};
    hsize_t max_dims[H5S_MAX_RANK] = {};
    const int rank = H5Pget_chunk(create_props, H5S_MAX_RANK, chunk);
    H5Handle type(H5Dget_type(dataset));
    H5Handle space(H5Dget_space(dataset));
    const int space_rank = space.valid() ? H5Sget_simple_extent_dims(space.get(), dims, max_dims) : -1;
    if (rank < 1 || rank != space_rank || !type.valid())
        throw AccuracyError("cannot read the chunk shape of " + where + " (corrupt file?)");
    int64_t bytes = static_cast<int64_t>(H5Tget_size(type.get()));
    for (int d = 0; d < rank; ++d) {
        const bool too_large = max_dims[d] != H5S_UNLIMITED && chunk[d] > max_dims[d];
        if (chunk[d] == 0 || too_large || chunk[d] > static_cast<hsize_t>(std::numeric_limits<int64_t>::max()) ||
            __builtin_mul_overflow(bytes, static_cast<int64_t>(chunk[d]), &bytes))
            throw AccuracyError(where + " has chunks of " + std::to_string(chunk[d]) + " in dimension " +
                                std::to_string(d) + " of at most " + std::to_string(max_dims[d]) +
                                " (corrupt chunk shape?)");
    }
    if (bytes > kMaxChunkBytes)
        throw AccuracyError(where + " has chunks of " + std::to_string(bytes) + " bytes (at most " +
                            std::to_string(kMaxChunkBytes) +
                            " are read: libhdf5 holds a whole chunk in memory; corrupt chunk shape?)");
    return bytes;
}

// The stored bytes against what the layout implies.
void check_stored_bytes(hid_t dataset, hid_t create_props, H5D_layout_t layout, int64_t declared_bytes,
                        int64_t stored_bytes, const std::string& where, FilteredChunks filtered) {
    const std::string stores = where + " stores " + std::to_string(stored_bytes) + " bytes";
    if (layout == H5D_COMPACT && stored_bytes != declared_bytes)
        throw AccuracyError(stores + " of compact data for " + std::to_string(declared_bytes) + " declared (corrupt?)");
    if (layout == H5D_CONTIGUOUS && stored_bytes != 0 && stored_bytes != declared_bytes)
        throw AccuracyError(stores + " of contiguous data for " + std::to_string(declared_bytes) +
                            " declared (corrupt?)");
    if (layout != H5D_CHUNKED) return;
    const int64_t chunk_bytes = chunk_bytes_of(dataset, create_props, where);
    if (H5Pget_nfilters(create_props) != 0) {  // compressed chunks store any number of bytes: decode them
        if (filtered == FilteredChunks::kCheckSizes) check_filtered_chunk_sizes(dataset, create_props, chunk_bytes, where);
        return;
    }
    hsize_t chunks = 0;
    H5Handle space(H5Dget_space(dataset));
    if (!space.valid() || H5Dget_num_chunks(dataset, space.get(), &chunks) < 0)
        throw AccuracyError("cannot read the chunk index of " + where + " (corrupt file?)");
    int64_t expected = 0;
    if (chunks > static_cast<hsize_t>(std::numeric_limits<int64_t>::max()) ||
        __builtin_mul_overflow(static_cast<int64_t>(chunks), chunk_bytes, &expected) || expected != stored_bytes)
        throw AccuracyError(stores + " in " + std::to_string(chunks) + " unfiltered chunks of " +
                            std::to_string(chunk_bytes) + " bytes (corrupt chunk index?)");
}

}  // namespace

void check_dataset_storage(hid_t dataset, int64_t declared_bytes, const std::string& where,
                           FilteredChunks filtered) {
    H5Handle create_props(H5Dget_create_plist(dataset));
    if (!create_props.valid()) throw AccuracyError("cannot read the storage properties of " + where);
    const H5D_layout_t layout = H5Pget_layout(create_props.get());
    check_layout_and_filters(create_props.get(), layout, where);
    const hsize_t stored = H5Dget_storage_size(dataset);
    const int64_t stored_bytes = stored > static_cast<hsize_t>(std::numeric_limits<int64_t>::max())
                                     ? std::numeric_limits<int64_t>::max()
                                     : static_cast<int64_t>(stored);
    int64_t limit = 0;
    if (__builtin_mul_overflow(kMaxDeclaredToStoredRatio, stored_bytes, &limit) ||
        __builtin_add_overflow(limit, kDeclaredSlackBytes, &limit))
        limit = std::numeric_limits<int64_t>::max();
    if (declared_bytes > limit)
        throw AccuracyError(where + " declares " + std::to_string(declared_bytes) + " bytes of data but stores " +
                            std::to_string(stored_bytes) + " (at most " + std::to_string(kMaxDeclaredToStoredRatio) +
                            " x the stored bytes + " + std::to_string(kDeclaredSlackBytes) +
                            " are accepted; the rest would be chunks never written, or a corrupt header)");
    check_stored_bytes(dataset, create_props.get(), layout, declared_bytes, stored_bytes, where, filtered);
}

int64_t chunk_rows_of(hid_t dataset, const std::string& where) {
    H5Handle create_props(H5Dget_create_plist(dataset));
    if (!create_props.valid()) throw AccuracyError("cannot read the storage properties of " + where);
    if (H5Pget_layout(create_props.get()) != H5D_CHUNKED) return 0;
    hsize_t chunk[2] = {0, 0};
    if (H5Pget_chunk(create_props.get(), 2, chunk) != 2 || chunk[0] == 0 ||
        chunk[0] > static_cast<hsize_t>(std::numeric_limits<int64_t>::max()))
        throw AccuracyError("cannot read the chunk shape of " + where + " (corrupt file?)");
    return static_cast<int64_t>(chunk[0]);
}

void for_each_chunk_offset(const std::vector<int64_t>& dims, const std::vector<hsize_t>& chunk,
                           const std::function<bool(const std::vector<hsize_t>& offset)>& visit) {
    const int rank = static_cast<int>(dims.size());
    std::vector<int64_t> position(dims.size(), 0);  // chunk coordinates
    std::vector<hsize_t> offset(dims.size());
    for (;;) {
        for (int d = 0; d < rank; ++d) offset[d] = static_cast<hsize_t>(position[d]) * chunk[d];
        if (!visit(offset)) return;
        int d = rank - 1;
        for (; d >= 0; --d) {  // the next chunk
            if (++position[d] < ceil_div(dims[d], static_cast<int64_t>(chunk[d]))) break;
            position[d] = 0;
        }
        if (d < 0) return;
    }
}

namespace {

// The rows of the chunks of a chunked dataset missing from its chunk index (see
// rows_without_storage); `dims` is the extent, every dimension non-zero.
std::vector<RowRange> rows_of_missing_chunks(hid_t dataset, hid_t create_props, const std::vector<int64_t>& dims,
                                             const std::string& where) {
    const int rank = static_cast<int>(dims.size());
    std::vector<hsize_t> chunk(dims.size());
    if (H5Pget_chunk(create_props, rank, chunk.data()) != rank)
        throw AccuracyError("cannot read the chunk shape of " + where + " (corrupt file?)");
    // Chunks of the extent (check_dataset_storage checked the chunk shape).
    int64_t chunks = 1;
    for (int d = 0; d < rank; ++d) {
        if (chunk[d] == 0 || chunk[d] > static_cast<hsize_t>(std::numeric_limits<int64_t>::max()))
            throw AccuracyError("cannot read the chunk shape of " + where + " (corrupt file?)");
        chunks = checked_mul(chunks, ceil_div(dims[d], static_cast<int64_t>(chunk[d])), where + ": chunks of the extent");
    }
    hsize_t stored = 0;
    H5Handle space(H5Dget_space(dataset));
    if (!space.valid() || H5Dget_num_chunks(dataset, space.get(), &stored) < 0)
        throw AccuracyError("cannot read the chunk index of " + where + " (corrupt file?)");
    if (stored >= static_cast<hsize_t>(chunks)) return {};
    const int64_t missing = chunks - static_cast<int64_t>(stored);
    std::vector<RowRange> rows;
    int64_t found = 0;
    for_each_chunk_offset(dims, chunk, [&](const std::vector<hsize_t>& offset) {
        hsize_t bytes = 0;
        if (H5Dget_chunk_storage_size(dataset, offset.data(), &bytes) < 0 || bytes == 0) {
            ++found;
            const int64_t first = static_cast<int64_t>(offset[0]);
            add_rows(&rows, first, std::min(dims[0], first + static_cast<int64_t>(chunk[0])) - 1);
        }
        return found < missing;
    });
    return rows;
}

}  // namespace

std::vector<RowRange> rows_without_storage(hid_t dataset, const std::string& where) {
    H5Handle create_props(H5Dget_create_plist(dataset));
    if (!create_props.valid()) throw AccuracyError("cannot read the storage properties of " + where);
    const std::vector<int64_t> dims = dataset_dims(dataset, where);
    for (int64_t d : dims)
        if (d == 0) return {};
    const int64_t rows = dims.empty() ? 1 : dims[0];
    switch (H5Pget_layout(create_props.get())) {
        case H5D_CONTIGUOUS: {
            H5D_space_status_t status = H5D_SPACE_STATUS_ERROR;
            if (H5Dget_space_status(dataset, &status) < 0 || status == H5D_SPACE_STATUS_ERROR)
                throw AccuracyError("cannot read the storage state of " + where + " (corrupt file?)");
            if (status == H5D_SPACE_STATUS_NOT_ALLOCATED) return {{0, rows - 1}};
            return {};
        }
        case H5D_CHUNKED: return rows_of_missing_chunks(dataset, create_props.get(), dims, where);
        default: return {};
    }
}

std::optional<std::string> probe_in_child(const std::string& path, const std::function<std::string()>& check,
                                          int timeout_ms) {
    // The child's value: 'v' and what `check` returned, or 'e' and the message of its error.
    constexpr char kValue = 'v', kError = 'e';
    const auto work = [&check, &path]() -> std::optional<std::string> {
        try {
            return kValue + check();
        } catch (const AccuracyError& e) {
            return kError + std::string(e.what());
        } catch (const std::bad_alloc&) {
            return kError + ("'" + path + "': out of memory while reading the file's structure");
        }
    };
    const IsolatedResult probe = run_isolated(work, timeout_ms, kMaxProbeMessageBytes);
    switch (probe.status) {
        case IsolatedResult::Status::kDone:
            if (probe.value.size() > kMaxProbeMessageBytes)
                throw AccuracyError("'" + path + "': the check of the file's structure returned more than " +
                                    std::to_string(kMaxProbeMessageBytes) + " bytes");
            if (!probe.value.empty() && probe.value[0] == kError) throw AccuracyError(probe.value.substr(1));
            if (probe.value.empty() || probe.value[0] != kValue)
                throw AccuracyError("'" + path + "': the check of the file's structure returned no result");
            return probe.value.substr(1);
        case IsolatedResult::Status::kFailed:
        case IsolatedResult::Status::kCrashed:
            throw AccuracyError("'" + path + "': libhdf5 crashed while reading the file's structure (" + probe.detail +
                                "): the file is corrupt");
        case IsolatedResult::Status::kTimedOut:
            throw AccuracyError("'" + path + "': libhdf5 was still reading the file's structure after " +
                                std::to_string(timeout_ms) + " ms: the file is corrupt (a loop in its metadata?)");
        case IsolatedResult::Status::kNotRun: break;  // no child process: the checks run here only
    }
    return std::nullopt;
}

}  // namespace wideattn::accuracy
