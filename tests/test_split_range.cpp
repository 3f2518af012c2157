// test_split_range.cpp - the key ranges of split-KV (kernels/common/split_range.h, the arithmetic
// restrict_to_split runs in every split kernel), both forms: the splits of a sequence cover its
// keys once, in order, each starting on a granule; the rounded shares are each a ceil(kv_end / S)
// share rounded up to whole granules but the last (the rest, maybe empty); the even ranges differ
// by at most one granule, the last holds the partial one, none is empty while there are as many
// granules as splits, and none is larger than the rounded share.
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

using RangeForm = SplitRange (*)(int64_t, int64_t, int64_t, int64_t);

// The prefix of a failure's message: the shape it was found on.
std::string shape_text(int64_t kv_end, int64_t granule, int64_t splits) {
    return "kv_end=" + std::to_string(kv_end) + " granule=" + std::to_string(granule) + " splits=" +
           std::to_string(splits) + ": ";
}

// Empty when the splits of (kv_end, granule, splits) cover [0, kv_end) once, in order, each
// starting on a granule; else the first failure.
std::string check_cover(RangeForm form, int64_t kv_end, int64_t granule, int64_t splits) {
    const std::string at = shape_text(kv_end, granule, splits);
    int64_t next = 0;
    for (int64_t z = 0; z < splits; ++z) {
        const SplitRange r = form(kv_end, granule, z, splits);
        const std::string split = at + "split " + std::to_string(z) + " [" + std::to_string(r.begin) + ", " +
                                  std::to_string(r.end) + ")";
        if (r.begin != next) return split + " does not start where the one before ends (" + std::to_string(next) + ")";
        if (r.end < r.begin || r.end > kv_end) return split + " is not inside [0, kv_end)";
        if (r.begin % granule != 0 && r.begin != kv_end) return split + " does not start on a granule";
        next = r.end;
    }
    if (next != kv_end) return at + "the splits end at " + std::to_string(next);
    return {};
}

// Empty when the rounded shares of (kv_end, granule, splits) are what the form promises.
std::string check_rounded(int64_t kv_end, int64_t granule, int64_t splits) {
    const std::string cover = check_cover(split_range_rounded, kv_end, granule, splits);
    if (!cover.empty()) return cover;
    const int64_t share = ((kv_end + splits - 1) / splits + granule - 1) / granule * granule;
    for (int64_t z = 0; z < splits; ++z) {
        const SplitRange r = split_range_rounded(kv_end, granule, z, splits);
        const int64_t expected = std::min(share, std::max<int64_t>(0, kv_end - z * share));
        if (r.end - r.begin != expected)
            return shape_text(kv_end, granule, splits) + "split " + std::to_string(z) + " holds " +
                   std::to_string(r.end - r.begin) + " keys, not " + std::to_string(expected);
    }
    return {};
}

// Empty when the even ranges of (kv_end, granule, splits) hold every property; else the first failure.
std::string check_ranges(int64_t kv_end, int64_t granule, int64_t splits) {
    const std::string cover = check_cover(split_range_even, kv_end, granule, splits);
    if (!cover.empty()) return cover;
    const std::string at = shape_text(kv_end, granule, splits);
    const int64_t granules = (kv_end + granule - 1) / granule;
    const int64_t fewest = granules / splits, most = (granules + splits - 1) / splits;
    const int64_t rounded_share = ((kv_end + splits - 1) / splits + granule - 1) / granule * granule;
    for (int64_t z = 0; z < splits; ++z) {
        const SplitRange r = split_range_even(kv_end, granule, z, splits);
        const std::string split = at + "split " + std::to_string(z) + " [" + std::to_string(r.begin) + ", " +
                                  std::to_string(r.end) + ")";
        const int64_t held = (r.end - r.begin + granule - 1) / granule;
        if (held < fewest || held > most) return split + " holds " + std::to_string(held) + " granules";
        if (r.end - r.begin > rounded_share) return split + " is larger than the rounded share";
        if (r.begin == r.end && granules >= splits) return split + " is empty though there are enough granules";
    }
    const SplitRange last = split_range_even(kv_end, granule, splits - 1, splits);
    if (kv_end > 0 && (last.end != kv_end || last.begin == last.end))
        return at + "the last split does not hold the last (partial) granule";
    return {};
}

// Runs `check` (check_rounded or check_ranges) over a grid of shapes and the largest key counts;
// the number of shapes checked.
int check_shapes(std::string (*check)(int64_t, int64_t, int64_t)) {
    int checked = 0;
    for (const int64_t granule : {16, 32, 48, 64, 256})
        for (int64_t splits = 2; splits <= kMaxSplits; splits += (splits < 40 ? 1 : 7))
            for (int64_t kv_end = 0; kv_end <= 4 * granule * splits + 3; kv_end += (kv_end < 600 ? 1 : 37)) {
                const std::string err = check(kv_end, granule, splits);
                REQUIRE_MESSAGE(err.empty(), err);
                ++checked;
            }
    for (const int64_t kv_end : {kLargestKeys, kLargestKeys - 1, int64_t{1} << 30, int64_t{131073}, int64_t{32769}})
        for (const int64_t splits : {int64_t{2}, int64_t{31}, int64_t{32}, int64_t{33}, kMaxSplits}) {
            const std::string err = check(kv_end, 64, splits);
            REQUIRE_MESSAGE(err.empty(), err);
            ++checked;
        }
    return checked;
}

}  // namespace

TEST_CASE("split ranges: rounded shares cover every key once, in order, on granules, a share each but the last") {
    MESSAGE(check_shapes(check_rounded) << " (kv_end, granule, splits) shapes checked");
}

TEST_CASE("split ranges: even ranges cover every key once, in order, on granules, at most one granule apart") {
    MESSAGE(check_shapes(check_ranges) << " (kv_end, granule, splits) shapes checked");
}

TEST_CASE("split ranges: the decode suite's shapes in both forms, and the form of this build") {
    const auto keys = [](RangeForm form, int64_t kv_end, int64_t granule, int64_t z, int64_t splits) {
        const SplitRange r = form(kv_end, granule, z, splits);
        return r.end - r.begin;
    };
    // 1 x 32k: 32769 keys (the new token after 32768) over 32 splits of 16-key granules. Rounded:
    // 31 shares of 1040 keys (ceil(32769 / 32) = 1025 rounded up) and the last 529; even: 31 of
    // 1024 and the last 1025.
    for (int64_t z = 0; z < 31; ++z) {
        CHECK(keys(split_range_rounded, 32769, 16, z, 32) == 1040);
        CHECK(keys(split_range_even, 32769, 16, z, 32) == 1024);
    }
    CHECK(keys(split_range_rounded, 32769, 16, 31, 32) == 529);
    CHECK(keys(split_range_even, 32769, 16, 31, 32) == 1025);
    // 5 tokens x 1 @ 20k on 32-key tiles: 20485 keys. Rounded: 30 shares of 672, then 325, then an
    // empty split; even: 31 of 640 and the last 645, from key 19840.
    for (int64_t z = 0; z < 30; ++z) CHECK(keys(split_range_rounded, 20485, 32, z, 32) == 672);
    CHECK(keys(split_range_rounded, 20485, 32, 30, 32) == 325);
    CHECK(keys(split_range_rounded, 20485, 32, 31, 32) == 0);
    CHECK(split_range_rounded(20485, 32, 31, 32).begin == 20485);
    for (int64_t z = 0; z < 31; ++z) CHECK(keys(split_range_even, 20485, 32, z, 32) == 640);
    CHECK(split_range_even(20485, 32, 31, 32).begin == 19840);
    CHECK(split_range_even(20485, 32, 31, 32).end == 20485);
    // Fewer granules than splits (3 of 16 keys, 8 splits): five splits are empty in both forms,
    // the first three (rounded) or three spread out (even) hold a granule.
    int empty_rounded = 0, empty_even = 0;
    for (int64_t z = 0; z < 8; ++z) {
        empty_rounded += keys(split_range_rounded, 40, 16, z, 8) == 0;
        empty_even += keys(split_range_even, 40, 16, z, 8) == 0;
    }
    CHECK(empty_rounded == 5);
    CHECK(empty_even == 5);
    // split_range is the form the build option split_ranges names (the kernels' form).
    const RangeForm built = WIDEATTN_EVEN_SPLIT_RANGES ? split_range_even : split_range_rounded;
    for (int64_t z = 0; z < 32; ++z) {
        CHECK(split_range(20485, 32, z, 32).begin == built(20485, 32, z, 32).begin);
        CHECK(split_range(20485, 32, z, 32).end == built(20485, 32, z, 32).end);
    }
}

TEST_CASE("split granules: lcm of the key tile and the page") {
    CHECK(split_granule(16, 16) == 16);
    CHECK(split_granule(32, 16) == 32);
    CHECK(split_granule(64, 48) == 192);
    CHECK(split_granule(16, 256) == 256);
    CHECK(split_granule(32, 1) == 32);
}
