// dependent_launch.h - programmatic dependent launch (PDL) of the split-KV merge kernel: the
// environment switch WIDEATTN_PDL (read once per context, at wideattn_open) and the decision
// whether a merge launch carries CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION, so the
// merge grid can be scheduled while the split kernel's last blocks finish (it waits for their
// results with griddepcontrol.wait: kernels/merge/splits_bf16/kernel.cu). Pure functions:
// unit-testable without a driver. docs/design.md "Split-KV".
#pragma once

#include <string>

namespace wideattn {

// The environment variable that turns programmatic dependent launch of the merge kernel off ("0").
constexpr const char* kPdlEnv = "WIDEATTN_PDL";

// The first arch (major) with programmatic dependent launch and the griddepcontrol instructions
// (sm_90); the merge kernel's cubins for earlier archs have no griddepcontrol.wait.
constexpr int kPdlMinArchMajor = 9;

// Reads the value of WIDEATTN_PDL (NULL: unset) into *on: unset, "" and "1" are on (the default),
// "0" is off. Any other value returns false with *message naming the variable and the value.
bool parse_pdl_env(const char* value, bool* on, std::string* message);

// Whether the merge launch after a split kernel is a programmatic dependent launch: the context
// allows it (`context_pdl`, from WIDEATTN_PDL), the driver has cuLaunchKernelEx (the one launch
// call that takes launch attributes) and the merge cubin is for sm_90 or later (`merge_arch_major`,
// the manifest arch of the selected merge kernel; selection runs a cubin only on a device of its
// own major, so this is the device's compute capability major too). A cubin of that arch waits
// for the split kernel's results with griddepcontrol.wait; an earlier one does not have it, and
// must be launched after the split kernel has finished.
bool programmatic_merge_launch(bool context_pdl, bool driver_has_launch_ex, int merge_arch_major);

}  // namespace wideattn
