// block_timeline.h - `wideattn bench --block-timeline`: the block-timeline records of the loaded
// kernels built with -DWIDEATTN_BLOCK_TIMELINE_RECORDS (kernels/common/block_timeline.cuh), read
// back after each case and printed as the lines tools/bench/block_timeline.py summarises.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "kernels/common/block_timeline_record.h"
#include "tools/harness/device_problem.h"
#include "wideattn.h"

namespace wideattn {

// `count` records as lines "wideattn-timeline NAME X Y Z SMID START_NS END_NS"; a name is read to
// its first NUL or its kNameBytes, and a record whose name is empty or holds a character outside
// [A-Za-z0-9_] is printed with the name "?" (the line stays parseable).
std::string timeline_lines(const BlockTimelineRecord* records, size_t count);

// For every module `ctx` has loaded that holds the records: writes its records' lines to `out`
// (a note line, starting "#", when more blocks finished than the module keeps) and sets its count
// back to 0, so the next case starts empty. *modules: how many modules held records (0: none of
// the loaded kernels was built with the records form). Returns "" or the driver error.
std::string drain_block_timeline(wideattn_context* ctx, const GpuDevice& gpu, std::FILE* out, int* modules);

}  // namespace wideattn
