// tensor_map_cache.cpp - see tensor_map_cache.h.
#include "dispatch/tensor_map_cache.h"

namespace wideattn {
namespace {

uint64_t mix(uint64_t h, uint64_t v) {
    h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
    return h;
}

size_t set_of(const TensorMapKey& key) {
    uint64_t h = mix(0, key.base >> 4);  // bases are 16-byte aligned
    h = mix(h, key.data_type);
    for (const uint64_t d : key.layout.dims) h = mix(h, d);
    for (const uint64_t s : key.layout.strides) h = mix(h, s);
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return static_cast<size_t>(h % TensorMapCache::kSets);
}

}  // namespace

wideattn_status TensorMapCache::get(const Driver& driver, const TensorMapKey& key, const char* name, CUtensorMap* map,
                                    std::string* message, bool* hit) {
    Entry* set = &entries_[set_of(key) * kWays];
    {
        std::lock_guard<std::mutex> lock(mutex_);
        for (int w = 0; w < kWays; ++w)
            if (set[w].used && set[w].key == key) {
                set[w].used = ++tick_;
                *map = set[w].map;
                if (hit) *hit = true;
                return WIDEATTN_OK;
            }
    }
    if (hit) *hit = false;
    // Encoded outside the lock (a host-only driver call); two threads missing on one key both
    // encode it, the same bytes, and the second insert finds the first.
    const wideattn_status status = encode_kv_tensor_map(driver, key, name, map, message);
    if (status != WIDEATTN_OK) return status;
    std::lock_guard<std::mutex> lock(mutex_);
    Entry* victim = &set[0];
    for (int w = 0; w < kWays; ++w) {
        if (set[w].used && set[w].key == key) return WIDEATTN_OK;
        if (set[w].used < victim->used) victim = &set[w];
    }
    victim->key = key;
    victim->map = *map;
    victim->used = ++tick_;
    return WIDEATTN_OK;
}

int TensorMapCache::size() const {
    std::lock_guard<std::mutex> lock(mutex_);
    int n = 0;
    for (const Entry& e : entries_) n += e.used != 0;
    return n;
}

}  // namespace wideattn
