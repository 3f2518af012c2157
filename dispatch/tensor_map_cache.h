// tensor_map_cache.h - each context's bounded cache of encoded K/V tensor maps, so a launch over a
// cache seen before (one cache tensor per layer, the same every step) costs a lookup instead of a
// cuTensorMapEncodeTiled call. A map is a pure function of its key (base, data type, dims,
// strides): an entry can never go stale, only be evicted. Fixed storage, set-associative (hash of
// the key -> a set of kWays entries, least recently used replaced): no allocation after
// construction, O(1) per lookup, thread-safe (one mutex, held for a lookup or an insert).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <mutex>

#include "dispatch/kv_tensor_maps.h"
#include "wideattn.h"

namespace wideattn {

class TensorMapCache {
public:
    static constexpr int kEntries = WIDEATTN_TENSOR_MAP_CACHE_ENTRIES;
    static constexpr int kWays = 4;
    static constexpr int kSets = kEntries / kWays;

    // The map of `key` into *map: cached, or encoded through `driver` and cached. Returns
    // WIDEATTN_OK, or the status and *message of encode_kv_tensor_map (nothing is cached then;
    // `name` names the cache in its message).
    // *hit (when not NULL) says whether it was cached.
    wideattn_status get(const Driver& driver, const TensorMapKey& key, const char* name, CUtensorMap* map,
                        std::string* message, bool* hit = nullptr);

    // Entries in use (tests).
    int size() const;

private:
    struct Entry {
        TensorMapKey key;
        CUtensorMap map;
        uint64_t used = 0;  // tick of the last use; 0: empty
    };
    mutable std::mutex mutex_;
    Entry entries_[kEntries];
    uint64_t tick_ = 0;
};

static_assert(TensorMapCache::kEntries % TensorMapCache::kWays == 0, "whole sets");

}  // namespace wideattn
