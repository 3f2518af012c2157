// test_tensor_map_cache.cpp - each context's bounded cache of encoded K/V tensor maps
// (dispatch/tensor_map_cache.h) with a counting stand-in for cuTensorMapEncodeTiled: a key is
// encoded once and then found, keys differing in any part are distinct maps, the cache never
// holds more than WIDEATTN_TENSOR_MAP_CACHE_ENTRIES maps and replaces the least recently used
// of a set, and an encoding the driver refuses is reported and not cached.
#include <doctest/doctest.h>

#include <cstring>
#include <memory>
#include <string>

#include "dispatch/kv_tensor_maps.h"
#include "dispatch/tensor_map_cache.h"
#include "tests/test_helpers.h"

using namespace wideattn;

namespace {

int g_encodes = 0;
bool g_refuse = false;

CUresult CUDAAPI counting_encode(CUtensorMap* map, CUtensorMapDataType, cuuint32_t, void* base, const cuuint64_t*,
                                 const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                 CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill) {
    if (g_refuse) return CUDA_ERROR_INVALID_VALUE;
    ++g_encodes;
    std::memset(map, 0, sizeof *map);
    std::memcpy(map, &base, sizeof base);  // the "encoding": the base in the first bytes
    return CUDA_SUCCESS;
}

Driver counting_driver() {
    Driver d;
    d.cuTensorMapEncodeTiled = counting_encode;
    return d;
}

TensorMapKey key_at(uintptr_t base) {
    return kv_map_key(test::valid_params(), false, reinterpret_cast<const void*>(base));
}

uintptr_t base_in(const CUtensorMap& map) {
    uintptr_t base = 0;
    std::memcpy(&base, &map, sizeof base);
    return base;
}

}  // namespace

TEST_CASE("tensor map cache: encoded once per key, bounded, least recently used replaced") {
    const Driver driver = counting_driver();
    auto cache = std::make_unique<TensorMapCache>();
    std::string message;
    CUtensorMap map;
    bool hit = true;
    g_encodes = 0;
    REQUIRE(cache->get(driver, key_at(0x100000), "k_cache", &map, &message, &hit) == WIDEATTN_OK);
    CHECK_FALSE(hit);
    CHECK(base_in(map) == 0x100000);
    REQUIRE(cache->get(driver, key_at(0x100000), "k_cache", &map, &message, &hit) == WIDEATTN_OK);
    CHECK(hit);
    CHECK(g_encodes == 1);
    // Another layout over the same base is another map.
    TensorMapKey other = key_at(0x100000);
    other.layout.dims[kKvMapDimBlock] += 1;
    REQUIRE(cache->get(driver, other, "k_cache", &map, &message, &hit) == WIDEATTN_OK);
    CHECK_FALSE(hit);
    CHECK(g_encodes == 2);
    // Many more caches than entries: the size stays bounded, every answer is the right map.
    for (uintptr_t i = 0; i < 4 * TensorMapCache::kEntries; ++i) {
        REQUIRE(cache->get(driver, key_at(0x200000 + i * 0x1000), "k_cache", &map, &message) == WIDEATTN_OK);
        CHECK(base_in(map) == 0x200000 + i * 0x1000);
    }
    CHECK(cache->size() == TensorMapCache::kEntries);
    // A working set that fits (one model's layers) stays cached while others come and go.
    g_encodes = 0;
    for (int round = 0; round < 3; ++round)
        for (uintptr_t layer = 0; layer < 10; ++layer)
            REQUIRE(cache->get(driver, key_at(0x9000000 + layer * 0x1000), "k_cache", &map, &message) == WIDEATTN_OK);
    CHECK(g_encodes == 10);
}

TEST_CASE("tensor map cache: a refused encoding is reported and not cached") {
    const Driver driver = counting_driver();
    auto cache = std::make_unique<TensorMapCache>();
    std::string message;
    CUtensorMap map;
    g_refuse = true;
    CHECK(cache->get(driver, key_at(0x100000), "v_cache", &map, &message) == WIDEATTN_ERROR_CUDA);
    CHECK(message.find("cuTensorMapEncodeTiled(v_cache) failed: ") == 0);
    g_refuse = false;
    CHECK(cache->size() == 0);
    const Driver none;
    CHECK(cache->get(none, key_at(0x100000), "v_cache", &map, &message) == WIDEATTN_ERROR_NO_DRIVER);
    CHECK(message.find("lacks cuTensorMapEncodeTiled") != std::string::npos);
}
