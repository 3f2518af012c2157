// bundle_dir.cpp - see bundle_dir.h.
#include "tools/harness/bundle_dir.h"

#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <fstream>

#include "dispatch/manifest_format.h"

namespace wideattn {

std::string executable_dir() {
    char exe[PATH_MAX] = {};
    const ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
    const std::string path = n > 0 ? std::string(exe, static_cast<size_t>(n)) : std::string();
    const size_t slash = path.find_last_of('/');
    return slash == std::string::npos ? std::string() : path.substr(0, slash);
}

std::string build_tree_bundle_dir() {
    const std::string dir = executable_dir();
    if (dir.empty()) return {};
    const std::string candidate = dir + "/../bundle";
    char resolved[PATH_MAX] = {};
    if (std::ifstream(candidate + "/" + kManifestFileName) && realpath(candidate.c_str(), resolved)) return resolved;
    return {};
}

}  // namespace wideattn
