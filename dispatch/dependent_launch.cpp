// dependent_launch.cpp - the WIDEATTN_PDL switch and the programmatic-launch decision of the
// split-KV merge kernel (dependent_launch.h).
#include "dispatch/dependent_launch.h"

#include <cstring>
#include <string>

namespace wideattn {

bool parse_pdl_env(const char* value, bool* on, std::string* message) {
    if (!value || !*value || std::strcmp(value, "1") == 0) {
        *on = true;
        return true;
    }
    if (std::strcmp(value, "0") == 0) {
        *on = false;
        return true;
    }
    *message = std::string(kPdlEnv) + "=" + value + " is not 0 or 1 (0 launches the split-KV merge kernel after " +
               "the split kernel without programmatic dependent launch; unset, empty or 1 uses it on sm_90 and later)";
    return false;
}

bool programmatic_merge_launch(bool context_pdl, bool driver_has_launch_ex, int merge_arch_major) {
    return context_pdl && driver_has_launch_ex && merge_arch_major >= kPdlMinArchMajor;
}

}  // namespace wideattn
