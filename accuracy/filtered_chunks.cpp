// filtered_chunks.cpp - see filtered_chunks.h.
#include "accuracy/filtered_chunks.h"

#include <zlib.h>

#include <algorithm>
#include <limits>
#include <vector>

#include "accuracy/accuracy_error.h"
#include "accuracy/hdf5_util.h"

namespace wideattn::accuracy {
namespace {

// Bytes of a fletcher32 checksum, which its filter appends to the chunk.
constexpr int64_t kFletcherBytes = 4;
// Inflated output is counted through a scratch buffer of this size, never kept.
constexpr size_t kInflateScratchBytes = size_t{64} << 10;
// The most a stored chunk may exceed its decoded bytes: deflate's stored blocks add 5 bytes per
// 64 KiB block, zlib's header and sum 6, fletcher32 4 per filter; anything past this is not a
// chunk of this shape.
constexpr int64_t kStoredSlackBytes = 1024;
constexpr int64_t kStoredSlackDivisor = 1024;

std::string offset_text(const std::vector<hsize_t>& offset) {
    std::string text = "[";
    for (size_t d = 0; d < offset.size(); ++d) text += (d ? ", " : "") + std::to_string(offset[d]);
    return text + "]";
}

// Bytes the first `stream_bytes` of `stream` inflate to, counted through `scratch` (never kept),
// stopping once they pass `limit`; -1 when they are not a complete zlib stream.
int64_t inflated_bytes(const std::vector<unsigned char>& stream, int64_t stream_bytes, int64_t limit,
                       std::vector<unsigned char>& scratch) {
    z_stream z{};
    if (inflateInit(&z) != Z_OK) throw std::bad_alloc();
    z.next_in = const_cast<unsigned char*>(stream.data());
    int64_t total = 0;
    int status = Z_OK;
    for (int64_t fed = 0; status == Z_OK && total <= limit;) {
        if (z.avail_in == 0 && fed < stream_bytes) {
            const int64_t step = std::min<int64_t>(stream_bytes - fed, std::numeric_limits<uInt>::max());
            z.avail_in = static_cast<uInt>(step);
            fed += step;
        }
        z.next_out = scratch.data();
        z.avail_out = static_cast<uInt>(scratch.size());
        status = inflate(&z, Z_NO_FLUSH);
        total += static_cast<int64_t>(scratch.size() - z.avail_out);
        if (status == Z_BUF_ERROR && z.avail_in == 0 && fed == stream_bytes) break;  // input ran out
    }
    inflateEnd(&z);
    if (total > limit) return total;
    return status == Z_STREAM_END ? total : -1;
}

}  // namespace

bool is_size_checked_filter(H5Z_filter_t filter) {
    return filter == H5Z_FILTER_DEFLATE || filter == H5Z_FILTER_SHUFFLE || filter == H5Z_FILTER_FLETCHER32;
}

void check_filtered_chunk_sizes(hid_t dataset, hid_t create_props, int64_t chunk_bytes, const std::string& where) {
    const int filter_count = H5Pget_nfilters(create_props);
    if (filter_count <= 0) return;
    std::vector<H5Z_filter_t> filters(static_cast<size_t>(filter_count));
    for (int f = 0; f < filter_count; ++f) {
        unsigned flags = 0;
        size_t values = 0;
        filters[static_cast<size_t>(f)] =
            H5Pget_filter2(create_props, static_cast<unsigned>(f), &flags, &values, nullptr, 0, nullptr, nullptr);
    }
    const std::vector<int64_t> dims = dataset_dims(dataset, where);
    const int rank = static_cast<int>(dims.size());
    std::vector<hsize_t> chunk(dims.size());
    if (rank < 1 || H5Pget_chunk(create_props, rank, chunk.data()) != rank)
        throw AccuracyError("cannot read the chunk shape of " + where + " (corrupt file?)");
    for (int64_t d : dims)
        if (d == 0) return;
    // A chunk stores at most what it could compress to and what the file holds (the buffer for
    // it is allocated before libhdf5 reads it).
    hsize_t file_bytes = 0;
    H5Handle file(H5Iget_file_id(dataset));
    if (!file.valid() || H5Fget_filesize(file.get(), &file_bytes) < 0)
        throw AccuracyError("cannot read the size of the file of " + where);
    const int64_t max_stored = std::min<int64_t>(chunk_bytes + chunk_bytes / kStoredSlackDivisor + kStoredSlackBytes,
                                                 static_cast<int64_t>(std::min<hsize_t>(
                                                     file_bytes, std::numeric_limits<int64_t>::max())));
    const int64_t decoded_limit = chunk_bytes + kFletcherBytes * filter_count;
    std::vector<unsigned char> stored, scratch(kInflateScratchBytes);
    for_each_chunk_offset(dims, chunk, [&](const std::vector<hsize_t>& offset) {
        unsigned mask = 0;
        haddr_t address = HADDR_UNDEF;
        hsize_t bytes = 0;
        const auto at = [&] { return where + " chunk at " + offset_text(offset); };
        if (H5Dget_chunk_info_by_coord(dataset, offset.data(), &mask, &address, &bytes) < 0)
            throw AccuracyError("cannot look up " + at() + " in the chunk index (corrupt file?)");
        if (address == HADDR_UNDEF || bytes == 0) return true;  // not stored: check_rows_written names it
        if (bytes > static_cast<hsize_t>(max_stored))
            throw AccuracyError(at() + " is stored in " + std::to_string(bytes) + " bytes, more than a chunk of " +
                                std::to_string(chunk_bytes) + " bytes takes or the file's " +
                                std::to_string(file_bytes) + " hold (corrupt chunk index?)");
        stored.resize(static_cast<size_t>(bytes));
        uint32_t read_mask = 0;
        if (H5Dread_chunk(dataset, H5P_DEFAULT, offset.data(), &read_mask, stored.data()) < 0)
            throw AccuracyError("cannot read " + at() + " (truncated or corrupt file?)");
        int64_t size = static_cast<int64_t>(bytes);
        bool inflated = false;
        for (int f = filter_count - 1; f >= 0 && size >= 0; --f) {
            if (mask & (1u << f)) continue;  // this filter was skipped for this chunk
            switch (filters[static_cast<size_t>(f)]) {
                case H5Z_FILTER_FLETCHER32: size = size >= kFletcherBytes ? size - kFletcherBytes : -1; break;
                case H5Z_FILTER_DEFLATE:
                    if (inflated) throw AccuracyError(where + " is deflated twice (not read)");
                    size = inflated_bytes(stored, size, decoded_limit, scratch);
                    inflated = true;
                    break;
                case H5Z_FILTER_SHUFFLE: break;
                default:  // refused with the dataset's filters (check_dataset_storage)
                    throw AccuracyError(where + " uses HDF5 filter " + std::to_string(filters[static_cast<size_t>(f)]) +
                                        " (not read)");
            }
        }
        if (size < 0)
            throw AccuracyError(at() + " does not decode: its deflate stream or checksum is cut short (corrupt?)");
        if (size != chunk_bytes)
            throw AccuracyError(at() + " decodes to " + std::to_string(size) + " bytes, not the " +
                                std::to_string(chunk_bytes) + " of its chunk shape (corrupt chunk shape?)");
        return true;
    });
}

}  // namespace wideattn::accuracy
