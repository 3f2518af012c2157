// output_path.cpp - output_path_problem: stat and access checks of a report's path.
#include "accuracy/output_path.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace wideattn::accuracy {

std::string output_path_problem(const std::string& path) {
    if (path.empty()) return "the path is empty";
    struct stat info {};
    if (stat(path.c_str(), &info) == 0) {
        if (S_ISDIR(info.st_mode)) return std::strerror(EISDIR);
        return access(path.c_str(), W_OK) == 0 ? "" : std::strerror(errno);
    }
    if (errno != ENOENT) return std::strerror(errno);
    const size_t slash = path.find_last_of('/');
    const std::string directory = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
    if (stat(directory.c_str(), &info) != 0) return std::strerror(errno);
    if (!S_ISDIR(info.st_mode)) return std::strerror(ENOTDIR);
    return access(directory.c_str(), W_OK) == 0 ? "" : std::strerror(errno);
}

}  // namespace wideattn::accuracy
