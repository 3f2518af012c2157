// filtered_chunks.h - the size check of a filtered chunked dataset's chunks, made before
// libhdf5 reads them: libhdf5 1.10 copies a chunk's bytes (its shape times the element size)
// out of whatever buffer the filters returned, so a chunk that decodes to fewer bytes (a corrupt
// chunk shape, index or stream) was read past that buffer by H5Dread.
#pragma once

#include <hdf5.h>

#include <cstdint>
#include <string>

namespace wideattn::accuracy {

// The filters whose output size the check can work out, the only ones a filtered dataset may
// use: deflate (inflated with zlib), shuffle (keeps the size) and fletcher32 (a 4-byte sum).
bool is_size_checked_filter(H5Z_filter_t filter);

// Reads every stored chunk of a chunked dataset with filters as stored (H5Dread_chunk) and
// undoes its filters as far as their output size, in reverse order and skipping those the
// chunk's filter mask skipped; throws AccuracyError naming `where` and the chunk's offset when a
// chunk is stored in more bytes than `chunk_bytes` can compress to, does not inflate, or decodes
// to other than `chunk_bytes` (the chunk's shape times its element size). `create_props` is the
// dataset's creation property list; the caller checked its filters with is_size_checked_filter.
void check_filtered_chunk_sizes(hid_t dataset, hid_t create_props, int64_t chunk_bytes, const std::string& where);

}  // namespace wideattn::accuracy
