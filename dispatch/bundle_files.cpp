// bundle_files.cpp - see bundle_files.h. POSIX I/O: open without blocking (a FIFO in place of a
// file must not hang the host), fstat on the open descriptor, then read to the end.
#include "dispatch/bundle_files.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cinttypes>
#include <cstdio>
#include <cstring>

#include "dispatch/manifest_format.h"

namespace wideattn {
namespace {

// What a non-regular file is, for the message.
const char* file_kind(mode_t mode) {
    if (S_ISDIR(mode)) return "a directory";
    if (S_ISFIFO(mode)) return "a FIFO";
    if (S_ISCHR(mode)) return "a character device";
    if (S_ISBLK(mode)) return "a block device";
    if (S_ISSOCK(mode)) return "a socket";
    return "not a regular file";
}

// Closes the descriptor on every return path.
class FileDescriptor {
public:
    explicit FileDescriptor(int fd) : fd_(fd) {}
    ~FileDescriptor() {
        if (fd_ >= 0) close(fd_);
    }
    FileDescriptor(const FileDescriptor&) = delete;
    FileDescriptor& operator=(const FileDescriptor&) = delete;
    int get() const { return fd_; }

private:
    int fd_;
};

}  // namespace

bool read_regular_file(const std::string& path, uint64_t max_bytes, std::string* out, std::string* error,
                       uint64_t* size_seen) {
    if (size_seen) *size_seen = kSizeUnknown;
    const FileDescriptor fd(open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
    if (fd.get() < 0) {
        *error = "cannot open " + path + " (" + std::strerror(errno) + ")";
        return false;
    }
    struct stat st {};
    if (fstat(fd.get(), &st) != 0) {
        *error = "cannot stat " + path + " (" + std::strerror(errno) + ")";
        return false;
    }
    if (!S_ISREG(st.st_mode)) {
        *error = path + " is " + file_kind(st.st_mode) + ", not a regular file";
        return false;
    }
    const uint64_t size = static_cast<uint64_t>(st.st_size);
    if (size_seen) *size_seen = size;
    out->clear();
    if (size > max_bytes) {
        *error = path + " has " + std::to_string(size) + " bytes, more than the limit of " + std::to_string(max_bytes);
        return false;
    }
    out->resize(static_cast<size_t>(size));
    size_t done = 0;
    while (done < out->size()) {
        const ssize_t n = read(fd.get(), &(*out)[done], out->size() - done);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            *error = "cannot read " + path + " (" + std::strerror(errno) + ")";
            out->clear();
            return false;
        }
        if (n == 0) break;  // the file shrank since fstat: what was read is what it holds
        done += static_cast<size_t>(n);
    }
    out->resize(done);
    return true;
}

std::string checksum_text(uint64_t hash) {
    char text[24];
    std::snprintf(text, sizeof text, "%016" PRIx64, hash);
    return text;
}

wideattn_status read_verified_cubin(const std::string& bundle_dir, const ManifestKernel& k, std::string* image,
                                    std::string* message) {
    const std::string path = bundle_dir + "/" + k.cubin;
    std::string why;
    uint64_t size = kSizeUnknown;
    if (!read_regular_file(path, k.cubin_bytes, image, &why, &size)) {
        if (size != kSizeUnknown && size != k.cubin_bytes) {
            *message = "cubin " + path + " has " + std::to_string(size) + " bytes, manifest says " +
                       std::to_string(k.cubin_bytes) + " (truncated or replaced file)";
            return WIDEATTN_ERROR_BUNDLE;
        }
        *message = "cannot read cubin " + path + " of kernel " + k.name + " (" + k.arch + "): " + why;
        return WIDEATTN_ERROR_BUNDLE;
    }
    if (image->size() != k.cubin_bytes) {
        *message = "cubin " + path + " has " + std::to_string(image->size()) + " bytes, manifest says " +
                   std::to_string(k.cubin_bytes) + " (truncated or replaced file)";
        return WIDEATTN_ERROR_BUNDLE;
    }
    const std::string hash = checksum_text(fnv1a64(image->data(), image->size()));
    if (k.cubin_fnv1a64 != hash) {
        *message = "cubin " + path + " checksum " + hash + " does not match the manifest's " + k.cubin_fnv1a64 +
                   " (corrupt file)";
        return WIDEATTN_ERROR_BUNDLE;
    }
    return WIDEATTN_OK;
}

}  // namespace wideattn
