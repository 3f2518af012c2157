// fuzz_manifest.cpp - libFuzzer target of the manifest.json reader (dispatch/json.cpp and
// dispatch/manifest.cpp), built with -Dfuzz=true under ASan and UBSan; an input that breaks an
// invariant of manifest_fuzz_check.h traps. tests/fuzz/README.md has the command to run it.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "tests/fuzz/manifest_fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    const std::string text(reinterpret_cast<const char*>(data), size);
    const std::string problem = wideattn::fuzz::manifest_input_problem(text);
    if (!problem.empty()) {
        std::fprintf(stderr, "manifest reader invariant broken: %s\n", problem.c_str());
        __builtin_trap();
    }
    return 0;
}
