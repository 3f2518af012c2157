// output_path.h - whether a report can be written to a path, asked before a long computation
// whose result would go there (the gate's and kl's --json, bench --json, tune --out), so a
// mistyped directory fails at once instead of after the work.
#pragma once

#include <string>

namespace wideattn::accuracy {

// "" when `path` looks writable: an existing file other than a directory (a regular file, or
// e.g. /dev/null) that may be written, or a new name in an existing directory that may be written. Otherwise the reason, e.g. "No such file or
// directory" (the directory is missing) or "Is a directory". Nothing is created.
std::string output_path_problem(const std::string& path);

}  // namespace wideattn::accuracy
