// row_ranges.cpp - see row_ranges.h.
#include "accuracy/row_ranges.h"

#include <algorithm>

namespace wideattn::accuracy {

void add_rows(std::vector<RowRange>* ranges, int64_t first, int64_t last) {
    if (!ranges->empty() && first <= ranges->back().last + 1) {
        ranges->back().last = std::max(ranges->back().last, last);
        return;
    }
    ranges->push_back({first, last});
}

std::vector<RowRange> flagged_rows(const std::vector<uint8_t>& flags, int64_t end) {
    std::vector<RowRange> ranges;
    const int64_t rows = std::min(end, static_cast<int64_t>(flags.size()));
    for (int64_t row = 0; row < rows; ++row)
        if (flags[static_cast<size_t>(row)] != 0) add_rows(&ranges, row, row);
    return ranges;
}

int64_t rows_in(const std::vector<RowRange>& ranges) {
    int64_t rows = 0;
    for (const RowRange& range : ranges) rows += range.last - range.first + 1;
    return rows;
}

std::string row_ranges_text(const std::vector<RowRange>& ranges) {
    const bool one_row = ranges.size() == 1 && ranges[0].first == ranges[0].last;
    std::string text = one_row ? "row " : "rows ";
    const size_t named = std::min(ranges.size(), kRowRangesNamed);
    for (size_t i = 0; i < named; ++i) {
        text += i == 0 ? "" : ", ";
        text += std::to_string(ranges[i].first);
        if (ranges[i].last != ranges[i].first) text += ".." + std::to_string(ranges[i].last);
    }
    const size_t more = ranges.size() - named;
    if (more > 0) text += " and " + std::to_string(more) + (more == 1 ? " more range" : " more ranges");
    return text;
}

}  // namespace wideattn::accuracy
