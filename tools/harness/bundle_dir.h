// bundle_dir.h - where a program of the build tree finds the bundle built beside it: shared by
// the `wideattn` CLI's bundle lookup and the GPU test suite's fixture.
#pragma once

#include <string>

namespace wideattn {

// Directory of the running executable ("" if unknown).
std::string executable_dir();

// The build tree's bundle next to the running executable (its ../bundle, resolved) when that
// directory holds a manifest; "" otherwise.
std::string build_tree_bundle_dir();

}  // namespace wideattn
