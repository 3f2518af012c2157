// metadata_check.cpp - checked mode: the device metadata rules and their driver wrapper (see
// metadata_check.h).
#include "dispatch/metadata_check.h"

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <sstream>
#include <vector>

#include "dispatch/checked_math.h"

namespace wideattn {
namespace {

constexpr const char* kModeNote = "checked mode";

wideattn_status refuse(std::string* message, const std::ostringstream& text) {
    *message = text.str();
    return WIDEATTN_ERROR_INVALID_ARGUMENT;
}

// The rules of cu_seqlens_q alone.
wideattn_status check_cu_seqlens(const wideattn_prefill_params& p, const int32_t* cu, std::string* message) {
    std::ostringstream s;
    for (int32_t i = 0; i <= p.num_seqs; ++i) {
        if (i == 0 && cu[0] != 0) {
            s << "cu_seqlens_q[0] = " << cu[0] << " is not 0 (the first sequence starts at query row 0; "
              << kModeNote << ")";
            return refuse(message, s);
        }
        if (i > 0 && cu[i] < cu[i - 1]) {
            s << "cu_seqlens_q[" << i << "] = " << cu[i] << " is below cu_seqlens_q[" << i - 1 << "] = " << cu[i - 1]
              << " (must be non-decreasing; " << kModeNote << ")";
            return refuse(message, s);
        }
        if (cu[i] > p.total_q) {
            s << "cu_seqlens_q[" << i << "] = " << cu[i] << " is above total_q = " << p.total_q
              << " (no sequence ends past the last query row; " << kModeNote << ")";
            return refuse(message, s);
        }
    }
    if (cu[p.num_seqs] != p.total_q) {
        s << "cu_seqlens_q[" << p.num_seqs << "] = " << cu[p.num_seqs] << " is not total_q = " << p.total_q
          << " (cu_seqlens_q[num_seqs] must equal total_q; " << kModeNote << ")";
        return refuse(message, s);
    }
    return WIDEATTN_OK;
}

// A driver call that failed: WIDEATTN_ERROR_CUDA naming it.
wideattn_status driver_failure(const Driver& drv, const std::string& call, CUresult r, std::string* message) {
    *message = call + " failed in checked mode: " + cuda_error_text(drv, r);
    return WIDEATTN_ERROR_CUDA;
}

// Queues the copy of `count` int32 at device address `src` into `dst` on `stream`.
wideattn_status copy_async(const Driver& drv, int32_t* dst, uintptr_t src, int64_t count, CUstream stream,
                           const char* name, std::string* message) {
    const size_t bytes = static_cast<size_t>(count) * sizeof(int32_t);
    const CUresult r = drv.cuMemcpyDtoHAsync(dst, static_cast<CUdeviceptr>(src), bytes, stream);
    if (r == CUDA_SUCCESS) return WIDEATTN_OK;
    return driver_failure(drv, std::string("cuMemcpyDtoHAsync(") + name + ", " + std::to_string(bytes) + " bytes)", r,
                          message);
}

wideattn_status synchronize(const Driver& drv, CUstream stream, std::string* message) {
    const CUresult r = drv.cuStreamSynchronize(stream);
    return r == CUDA_SUCCESS ? WIDEATTN_OK : driver_failure(drv, "cuStreamSynchronize", r, message);
}

// A stream capturing a CUDA graph cannot be synchronised: refuse before any copy.
wideattn_status refuse_capture(const Driver& drv, CUstream stream, std::string* message) {
    CUstreamCaptureStatus capture = CU_STREAM_CAPTURE_STATUS_NONE;
    const CUresult r = drv.cuStreamIsCapturing(stream, &capture);
    if (r != CUDA_SUCCESS) return driver_failure(drv, "cuStreamIsCapturing", r, message);
    if (capture == CU_STREAM_CAPTURE_STATUS_NONE) return WIDEATTN_OK;
    char pointer[32];
    std::snprintf(pointer, sizeof pointer, "%p", static_cast<void*>(stream));
    *message = std::string("stream=") + pointer +
               " is capturing a CUDA graph: checked mode (WIDEATTN_FLAG_CHECK_METADATA or " + kCheckMetadataEnv +
               "=1) copies the metadata to the host and waits for the stream, which a capture cannot record; "
               "launch outside the capture or without checked mode";
    return WIDEATTN_ERROR_INVALID_ARGUMENT;
}

// The used block_table prefixes, copied into a bounded host buffer and checked a buffer at a
// time: add() queues the copy of a piece of one row, flush() waits for the stream and checks
// every piece queued since the last flush.
class RowStager {
public:
    RowStager(const Driver& drv, const wideattn_prefill_params& p, CUstream stream, int64_t total_entries)
        : drv_(drv), p_(p), stream_(stream),
          buffer_(static_cast<size_t>(std::min(total_entries, kMetadataStagingEntries))) {}

    // Copies block_table[seq][first .. first + count - 1], flushing whenever the buffer fills.
    wideattn_status add(int32_t seq, int64_t first, int64_t count, std::string* message) {
        while (count > 0) {
            const int64_t room = static_cast<int64_t>(buffer_.size()) - used_;
            if (room == 0) {
                if (const wideattn_status status = flush(message); status != WIDEATTN_OK) return status;
                continue;
            }
            const int64_t piece = std::min(count, room);
            const uintptr_t src = reinterpret_cast<uintptr_t>(p_.block_table) +
                                  static_cast<uintptr_t>(seq * p_.block_table_stride + first) * sizeof(int32_t);
            if (const wideattn_status status =
                    copy_async(drv_, buffer_.data() + used_, src, piece, stream_, "block_table", message);
                status != WIDEATTN_OK)
                return status;
            pieces_.push_back({seq, first, piece, used_});
            used_ += piece;
            first += piece;
            count -= piece;
        }
        return WIDEATTN_OK;
    }

    wideattn_status flush(std::string* message) {
        if (pieces_.empty()) return WIDEATTN_OK;
        if (const wideattn_status status = synchronize(drv_, stream_, message); status != WIDEATTN_OK) return status;
        for (const Piece& piece : pieces_)
            if (const wideattn_status status = check_block_entries(p_, piece.seq, piece.first,
                                                                   buffer_.data() + piece.offset, piece.count, message);
                status != WIDEATTN_OK)
                return status;
        pieces_.clear();
        used_ = 0;
        return WIDEATTN_OK;
    }

private:
    struct Piece {
        int32_t seq;
        int64_t first, count, offset;
    };
    const Driver& drv_;
    const wideattn_prefill_params& p_;
    CUstream stream_;
    std::vector<int32_t> buffer_;
    std::vector<Piece> pieces_;
    int64_t used_ = 0;
};

}  // namespace

bool parse_check_metadata_env(const char* value, bool* on, std::string* message) {
    if (!value || !*value || std::strcmp(value, "0") == 0) {
        *on = false;
        return true;
    }
    if (std::strcmp(value, "1") == 0) {
        *on = true;
        return true;
    }
    *message = std::string(kCheckMetadataEnv) + "=" + value + " is not 0 or 1 (1 puts every prefill of the context " +
               "in checked mode; unset, empty or 0 leaves it to each call's flags)";
    return false;
}

bool checked_mode(const wideattn_prefill_params& p, bool context_default) {
    return context_default || (p.flags & WIDEATTN_FLAG_CHECK_METADATA) != 0;
}

int64_t used_blocks(const wideattn_prefill_params& p, int32_t seq_len_k) {
    if (seq_len_k <= 0) return 0;
    return (static_cast<int64_t>(seq_len_k) + p.block_size - 1) / p.block_size;
}

wideattn_status check_sequence_lengths(const wideattn_prefill_params& p, const int32_t* cu_seqlens_q,
                                       const int32_t* seq_lens_k, std::string* message) {
    if (const wideattn_status status = check_cu_seqlens(p, cu_seqlens_q, message); status != WIDEATTN_OK)
        return status;
    int64_t row_keys = INT64_MAX;  // a product past int64 bounds no int32 key count
    if (!checked_mul(p.block_table_stride, p.block_size, &row_keys)) row_keys = INT64_MAX;
    for (int32_t s = 0; s < p.num_seqs; ++s) {
        const int64_t q_len = static_cast<int64_t>(cu_seqlens_q[s + 1]) - cu_seqlens_q[s];
        std::ostringstream text;
        if (seq_lens_k[s] < q_len) {
            text << "seq_lens_k[" << s << "] = " << seq_lens_k[s] << " is below q_len = " << q_len << " of sequence "
                 << s << " (cu_seqlens_q[" << s + 1 << "] - cu_seqlens_q[" << s
                 << "]; its keys include its new tokens; " << kModeNote << ")";
            return refuse(message, text);
        }
        if (seq_lens_k[s] > row_keys) {
            text << "seq_lens_k[" << s << "] = " << seq_lens_k[s] << " is above block_table_stride * block_size = "
                 << row_keys << " (the keys one block_table row addresses; " << kModeNote << ")";
            return refuse(message, text);
        }
    }
    return WIDEATTN_OK;
}

wideattn_status check_block_entries(const wideattn_prefill_params& p, int32_t seq, int64_t first,
                                    const int32_t* entries, int64_t count, std::string* message) {
    for (int64_t i = 0; i < count; ++i) {
        if (entries[i] >= 0 && entries[i] < p.num_blocks) continue;
        std::ostringstream text;
        text << "block_table[" << seq << "][" << first + i << "] = " << entries[i] << " (sequence " << seq
             << ", key block " << first + i << ") is outside [0, num_blocks = " << p.num_blocks << ") ("
             << kModeNote << ")";
        return refuse(message, text);
    }
    return WIDEATTN_OK;
}

wideattn_status check_host_metadata(const wideattn_prefill_params& p, const int32_t* cu_seqlens_q,
                                    const int32_t* seq_lens_k, const int32_t* block_table, std::string* message) {
    if (const wideattn_status status = check_sequence_lengths(p, cu_seqlens_q, seq_lens_k, message);
        status != WIDEATTN_OK)
        return status;
    for (int32_t s = 0; s < p.num_seqs; ++s)
        if (const wideattn_status status = check_block_entries(p, s, 0, block_table + s * p.block_table_stride,
                                                               used_blocks(p, seq_lens_k[s]), message);
            status != WIDEATTN_OK)
            return status;
    return WIDEATTN_OK;
}

wideattn_status check_device_metadata(const Driver& drv, const wideattn_prefill_params& p, CUstream stream,
                                      std::string* message) {
    wideattn_status status = refuse_capture(drv, stream, message);
    if (status != WIDEATTN_OK) return status;
    std::vector<int32_t> cu(static_cast<size_t>(p.num_seqs) + 1), seq_k(static_cast<size_t>(p.num_seqs));
    if ((status = copy_async(drv, cu.data(), reinterpret_cast<uintptr_t>(p.cu_seqlens_q), p.num_seqs + int64_t{1},
                             stream, "cu_seqlens_q", message)) != WIDEATTN_OK ||
        (status = copy_async(drv, seq_k.data(), reinterpret_cast<uintptr_t>(p.seq_lens_k), p.num_seqs, stream,
                             "seq_lens_k", message)) != WIDEATTN_OK ||
        (status = synchronize(drv, stream, message)) != WIDEATTN_OK ||
        (status = check_sequence_lengths(p, cu.data(), seq_k.data(), message)) != WIDEATTN_OK)
        return status;
    int64_t total = 0;
    for (int32_t s = 0; s < p.num_seqs; ++s) total += used_blocks(p, seq_k[s]);
    RowStager rows(drv, p, stream, total);
    for (int32_t s = 0; s < p.num_seqs; ++s)
        if ((status = rows.add(s, 0, used_blocks(p, seq_k[s]), message)) != WIDEATTN_OK) return status;
    return rows.flush(message);
}

}  // namespace wideattn
