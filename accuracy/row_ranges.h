// row_ranges.h - runs of consecutive rows of a logit dump (rows never written, rows of one value),
// built from ascending rows or per-row flags and named in messages as "rows 8..15, 20".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wideattn::accuracy {

// Rows first..last of a dataset, both included.
struct RowRange {
    int64_t first = 0;
    int64_t last = 0;
};

// Ranges named in a message; the rest are counted ("and 3 more ranges").
inline constexpr size_t kRowRangesNamed = 5;

// Adds rows first..last to `ranges`, whose ranges are in ascending order and none starts after
// `first`: joined to the last range when they overlap or continue it, else a range of their own.
void add_rows(std::vector<RowRange>* ranges, int64_t first, int64_t last);

// The ranges of the rows r < `end` whose flags[r] is non-zero.
std::vector<RowRange> flagged_rows(const std::vector<uint8_t>& flags, int64_t end);

// The number of rows the ranges cover.
int64_t rows_in(const std::vector<RowRange>& ranges);

// "row 8", "rows 8..15", "rows 2..3, 8..15 and 4 more ranges": the first kRowRangesNamed ranges.
std::string row_ranges_text(const std::vector<RowRange>& ranges);

}  // namespace wideattn::accuracy
