// block_timeline_record.h - one block's record in the records form of the block timeline
// (block_timeline.cuh, -DWIDEATTN_BLOCK_TIMELINE_RECORDS): the layout, the records a module keeps
// and the names of the module globals, shared by the kernels that write the records,
// `wideattn bench --block-timeline` that reads them (tools/cli/block_timeline.cpp) and the
// stand-in driver that emulates them (tests/fake_driver/fake_libcuda.cpp).
#pragma once

#include <cstdint>

namespace wideattn {

struct BlockTimelineRecord {
    static constexpr int kNameBytes = 32;  // the name, NUL-padded (cut to 31 characters)
    char name[kNameBytes];
    uint32_t block_x, block_y, block_z, smid;
    uint64_t start_ns, end_ns;
};
static_assert(sizeof(BlockTimelineRecord) == 64, "one record: the name, four words, two times");

constexpr uint32_t kBlockTimelineRecords = 65536;  // 4 MB of records a module

// The names block_timeline.cuh gives the module's records and their count (unmangled).
constexpr const char* kBlockTimelineRecordsSymbol = "wideattn_block_timeline_records";
constexpr const char* kBlockTimelineCountSymbol = "wideattn_block_timeline_count";

}  // namespace wideattn
