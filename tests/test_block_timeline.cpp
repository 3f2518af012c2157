// test_block_timeline.cpp - the lines `wideattn bench --block-timeline` prints from the kernels'
// block records (tools/cli/block_timeline.h): the format tools/bench/block_timeline.py reads, the
// names cut at the record's size, and names that are no identifier printed as "?".
#include <doctest/doctest.h>

#include <cstddef>
#include <cstring>
#include <string>
#include <vector>

#include "tools/cli/block_timeline.h"

using namespace wideattn;

namespace {

BlockTimelineRecord record(const char* name, size_t name_bytes, uint32_t x, uint32_t y, uint32_t z, uint32_t sm,
                          uint64_t start, uint64_t end) {
    BlockTimelineRecord r{};
    std::memcpy(r.name, name, name_bytes);
    r.block_x = x;
    r.block_y = y;
    r.block_z = z;
    r.smid = sm;
    r.start_ns = start;
    r.end_ns = end;
    return r;
}

}  // namespace

TEST_CASE("block timeline: records as the summary's lines") {
    static_assert(offsetof(BlockTimelineRecord, block_x) == 32 && offsetof(BlockTimelineRecord, start_ns) == 48,
                  "the layout the kernels write (kernels/common/block_timeline_record.h)");
    const char split[] = "wgmma_bf16_d512_split";
    const char merge[] = "merge_splits_bf16_rows";
    const std::vector<BlockTimelineRecord> records = {
        record(split, sizeof split, 0, 3, 31, 131, 1765000000123456789ull, 1765000000123500000ull),
        record(merge, sizeof merge, 7, 0, 0, 0, 5, 6),
    };
    CHECK(timeline_lines(records.data(), records.size()) ==
          "wideattn-timeline wgmma_bf16_d512_split 0 3 31 131 1765000000123456789 1765000000123500000\n"
          "wideattn-timeline merge_splits_bf16_rows 7 0 0 0 5 6\n");
    CHECK(timeline_lines(records.data(), 0).empty());

    // A name that fills the record (no NUL) is read to the record's end, never past it.
    const std::string full(BlockTimelineRecord::kNameBytes, 'a');
    const BlockTimelineRecord whole = record(full.data(), full.size(), 1, 2, 3, 4, 5, 6);
    CHECK(timeline_lines(&whole, 1) == "wideattn-timeline " + full + " 1 2 3 4 5 6\n");

    // Names the summary could not split on spaces, or none: "?".
    const char spaced[] = "two words";
    const char empty[] = "";
    const BlockTimelineRecord odd[] = {record(spaced, sizeof spaced, 0, 0, 0, 0, 1, 2),
                                      record(empty, sizeof empty, 0, 0, 0, 0, 1, 2)};
    CHECK(timeline_lines(odd, 2) == "wideattn-timeline ? 0 0 0 0 1 2\nwideattn-timeline ? 0 0 0 0 1 2\n");
}
