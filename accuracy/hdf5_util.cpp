// hdf5_util.cpp - see hdf5_util.h.
#include "accuracy/hdf5_util.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/stat.h>

#include "accuracy/accuracy_error.h"

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
    if (!file.valid())
        throw AccuracyError("'" + path + "' has an HDF5 signature but cannot be opened (truncated or corrupt?)");
    return file;
}

H5Handle create_hdf5_file(const std::string& path) {
    silence_hdf5_errors();
    H5Handle file(H5Fcreate(path.c_str(), H5F_ACC_TRUNC, H5P_DEFAULT, H5P_DEFAULT));
    if (!file.valid()) throw AccuracyError("cannot create HDF5 file '" + path + "'");
    return file;
}

bool has_link(hid_t location, const std::string& name) {
    return H5Lexists(location, name.c_str(), H5P_DEFAULT) > 0;
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

std::optional<std::string> read_string_attribute(hid_t object, const std::string& name) {
    if (H5Aexists(object, name.c_str()) <= 0) return std::nullopt;
    H5Handle attribute(H5Aopen(object, name.c_str(), H5P_DEFAULT));
    if (!attribute.valid()) return std::nullopt;
    H5Handle file_type(H5Aget_type(attribute.get()));
    if (H5Tget_class(file_type.get()) != H5T_STRING) return std::nullopt;
    H5Handle space(H5Aget_space(attribute.get()));
    if (H5Sget_simple_extent_npoints(space.get()) != 1) return std::nullopt;
    if (H5Tis_variable_str(file_type.get()) > 0) {
        H5Handle memory_type(H5Tcopy(H5T_C_S1));
        H5Tset_size(memory_type.get(), H5T_VARIABLE);
        char* text = nullptr;
        if (H5Aread(attribute.get(), memory_type.get(), &text) < 0 || text == nullptr) return std::nullopt;
        std::string value(text);
        H5free_memory(text);
        return value;
    }
    const size_t size = H5Tget_size(file_type.get());
    H5Handle memory_type(H5Tcopy(H5T_C_S1));
    H5Tset_size(memory_type.get(), size);
    H5Tset_strpad(memory_type.get(), H5T_STR_NULLPAD);
    std::string buffer(size, '\0');
    if (H5Aread(attribute.get(), memory_type.get(), buffer.data()) < 0) return std::nullopt;
    buffer.resize(std::strlen(buffer.c_str()));
    return buffer;
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
    H5Handle space(H5Aget_space(attribute.get()));
    if (H5Sget_simple_extent_npoints(space.get()) != 1) return std::nullopt;
    double value = 0.0;
    if (H5Aread(attribute.get(), H5T_NATIVE_DOUBLE, &value) < 0) return std::nullopt;
    return value;
}

std::vector<int64_t> dataset_dims(hid_t dataset) {
    H5Handle space(H5Dget_space(dataset));
    const int rank = space.valid() ? H5Sget_simple_extent_ndims(space.get()) : -1;
    if (rank < 0) throw AccuracyError("cannot read a dataset's dataspace");
    std::vector<hsize_t> dims(static_cast<size_t>(rank));
    if (rank > 0) H5Sget_simple_extent_dims(space.get(), dims.data(), nullptr);
    return std::vector<int64_t>(dims.begin(), dims.end());
}

}  // namespace wideattn::accuracy
