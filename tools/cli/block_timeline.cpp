// block_timeline.cpp - reading back the block-timeline records (block_timeline.h).
#include "tools/cli/block_timeline.h"

#include <algorithm>
#include <mutex>
#include <vector>

#include "dispatch/context.h"

namespace wideattn {

namespace {

bool plain_name(const char* name, size_t length) {
    if (length == 0) return false;
    for (size_t i = 0; i < length; ++i) {
        const char c = name[i];
        if (!((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_')) return false;
    }
    return true;
}

}  // namespace

std::string timeline_lines(const BlockTimelineRecord* records, size_t count) {
    std::string lines;
    char line[256];
    for (size_t i = 0; i < count; ++i) {
        const BlockTimelineRecord& r = records[i];
        size_t length = 0;
        while (length < size_t{BlockTimelineRecord::kNameBytes} && r.name[length] != '\0') ++length;
        const std::string name = plain_name(r.name, length) ? std::string(r.name, length) : std::string("?");
        std::snprintf(line, sizeof line, "wideattn-timeline %s %u %u %u %u %llu %llu\n", name.c_str(), r.block_x,
                      r.block_y, r.block_z, r.smid, static_cast<unsigned long long>(r.start_ns),
                      static_cast<unsigned long long>(r.end_ns));
        lines += line;
    }
    return lines;
}

std::string drain_block_timeline(wideattn_context* ctx, const GpuDevice& gpu, std::FILE* out, int* modules) {
    *modules = 0;
    const Driver& d = gpu.driver();
    if (!d.cuModuleGetGlobal) return "the CUDA driver has no cuModuleGetGlobal";
    std::vector<CUmodule> loaded;
    {
        std::lock_guard<std::mutex> lock(ctx->mutex);
        for (const auto& entry : ctx->loaded) loaded.push_back(entry.second.module);
    }
    std::string err = gpu.check(d.cuCtxSynchronize(), "cuCtxSynchronize");
    std::vector<BlockTimelineRecord> records;
    for (CUmodule module : loaded) {
        if (!err.empty()) break;
        CUdeviceptr count_ptr = 0, records_ptr = 0;
        size_t count_bytes = 0, records_bytes = 0;
        if (d.cuModuleGetGlobal(&count_ptr, &count_bytes, module, kBlockTimelineCountSymbol) != CUDA_SUCCESS ||
            d.cuModuleGetGlobal(&records_ptr, &records_bytes, module, kBlockTimelineRecordsSymbol) != CUDA_SUCCESS)
            continue;  // not built with the records form
        if (count_bytes != sizeof(uint32_t) || records_bytes != kBlockTimelineRecords * sizeof(BlockTimelineRecord))
            return std::string(kBlockTimelineRecordsSymbol) + " of " + std::to_string(records_bytes) + " bytes or " +
                   kBlockTimelineCountSymbol + " of " + std::to_string(count_bytes) +
                   " bytes: not the layout of kernels/common/block_timeline_record.h";
        ++*modules;
        uint32_t count = 0;
        err = gpu.check(d.cuMemcpyDtoH(&count, count_ptr, sizeof count), "cuMemcpyDtoH(timeline count)");
        if (!err.empty()) break;
        const uint32_t kept = std::min(count, kBlockTimelineRecords);
        records.resize(kept);
        if (kept)
            err = gpu.check(d.cuMemcpyDtoH(records.data(), records_ptr, kept * sizeof(BlockTimelineRecord)),
                            "cuMemcpyDtoH(timeline records)");
        if (!err.empty()) break;
        std::fputs(timeline_lines(records.data(), kept).c_str(), out);
        if (count > kept)
            std::fprintf(out, "# block timeline: %u blocks finished, the first %u kept\n", count, kept);
        const uint32_t zero = 0;
        err = gpu.check(d.cuMemcpyHtoD(count_ptr, &zero, sizeof zero), "cuMemcpyHtoD(timeline count)");
    }
    return err;
}

}  // namespace wideattn
