// test_split_range.cpp - the key ranges of split-KV (kernels/common/split_range.h, the arithmetic
// restrict_to_split runs in every split kernel): the splits of a sequence cover its keys once, in
// order, each starting on a granule; they differ by at most one granule, the last holds the
// partial one, none is empty while there are as many granules as splits, and none is larger than
// a ceil(kv_end / S) share rounded up to whole granules.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "kernels/common/split_range.h"

using namespace wideattn;

namespace {

constexpr int64_t kMaxSplits = 128;             // WIDEATTN_MAX_SPLITS
constexpr int64_t kLargestKeys = (1LL << 31) - 1;  // kv_end is an int32 in the kernels

// Empty when the ranges of (kv_end, granule, splits) hold every property; else the first failure.
std::string check_ranges(int64_t kv_end, int64_t granule, int64_t splits) {
    const std::string at = "kv_end=" + std::to_string(kv_end) + " granule=" + std::to_string(granule) +
                           " splits=" + std::to_string(splits) + ": ";
    const int64_t granules = (kv_end + granule - 1) / granule;
    const int64_t fewest = granules / splits, most = (granules + splits - 1) / splits;
    const int64_t rounded_share = ((kv_end + splits - 1) / splits + granule - 1) / granule * granule;
    int64_t next = 0;
    for (int64_t z = 0; z < splits; ++z) {
        const SplitRange r = split_range(kv_end, granule, z, splits);
        const std::string split = at + "split " + std::to_string(z) + " [" + std::to_string(r.begin) + ", " +
                                  std::to_string(r.end) + ")";
        if (r.begin != next) return split + " does not start where the one before ends (" + std::to_string(next) + ")";
        if (r.end < r.begin || r.end > kv_end) return split + " is not inside [0, kv_end)";
        if (r.begin % granule != 0 && r.begin != kv_end) return split + " does not start on a granule";
        const int64_t held = (r.end - r.begin + granule - 1) / granule;
        if (held < fewest || held > most) return split + " holds " + std::to_string(held) + " granules";
        if (r.end - r.begin > rounded_share) return split + " is larger than the rounded share";
        if (r.begin == r.end && granules >= splits) return split + " is empty though there are enough granules";
        next = r.end;
    }
    if (next != kv_end) return at + "the splits end at " + std::to_string(next);
    const SplitRange last = split_range(kv_end, granule, splits - 1, splits);
    if (kv_end > 0 && (last.end != kv_end || last.begin == last.end))
        return at + "the last split does not hold the last (partial) granule";
    return {};
}

}  // namespace

TEST_CASE("split ranges: every key once, in order, on granules, at most one granule apart") {
    int checked = 0;
    for (const int64_t granule : {16, 32, 48, 64, 256})
        for (int64_t splits = 2; splits <= kMaxSplits; splits += (splits < 40 ? 1 : 7))
            for (int64_t kv_end = 0; kv_end <= 4 * granule * splits + 3; kv_end += (kv_end < 600 ? 1 : 37)) {
                const std::string err = check_ranges(kv_end, granule, splits);
                REQUIRE_MESSAGE(err.empty(), err);
                ++checked;
            }
    for (const int64_t kv_end : {kLargestKeys, kLargestKeys - 1, int64_t{1} << 30, int64_t{131073}, int64_t{32769}})
        for (const int64_t splits : {int64_t{2}, int64_t{31}, int64_t{32}, int64_t{33}, kMaxSplits}) {
            const std::string err = check_ranges(kv_end, 64, splits);
            REQUIRE_MESSAGE(err.empty(), err);
            ++checked;
        }
    MESSAGE(checked << " (kv_end, granule, splits) shapes checked");
}

TEST_CASE("split ranges: the decode suite's shapes") {
    // 1 x 32k: 32769 keys (the new token after 32768) over 32 splits of 16-key granules: 31 splits
    // of 1024 keys and the last of 1025 (a 1040-key share rounded up gave 31 of 1040, the last 529).
    for (int64_t z = 0; z < 31; ++z) {
        const SplitRange r = split_range(32769, 16, z, 32);
        CHECK(r.end - r.begin == 1024);
    }
    CHECK(split_range(32769, 16, 31, 32).end - split_range(32769, 16, 31, 32).begin == 1025);
    // 5 tokens x 1 @ 20k on 32-key tiles: 20485 keys, 31 splits of 640 and the last of 645; the
    // rounded share (672) left split 31 empty.
    for (int64_t z = 0; z < 31; ++z) CHECK(split_range(20485, 32, z, 32).end - split_range(20485, 32, z, 32).begin == 640);
    CHECK(split_range(20485, 32, 31, 32).begin == 19840);
    CHECK(split_range(20485, 32, 31, 32).end == 20485);
    // Fewer granules than splits (3 of 16 keys, 8 splits): five splits are empty, three hold a granule.
    int empty = 0;
    for (int64_t z = 0; z < 8; ++z) empty += split_range(40, 16, z, 8).begin == split_range(40, 16, z, 8).end;
    CHECK(empty == 5);
}

TEST_CASE("split granules: lcm of the key tile and the page") {
    CHECK(split_granule(16, 16) == 16);
    CHECK(split_granule(32, 16) == 32);
    CHECK(split_granule(64, 48) == 192);
    CHECK(split_granule(16, 256) == 256);
    CHECK(split_granule(32, 1) == 32);
}
