// logit_dump.cpp - see logit_dump.h.
#include "accuracy/logit_dump.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <iterator>
#include <limits>
#include <string>

#include "accuracy/accuracy_error.h"
#include "accuracy/bf16.h"
#include "accuracy/checked_size.h"
#include "accuracy/float16.h"
#include "accuracy/row_ranges.h"

namespace wideattn::accuracy {
namespace {

// Chunk-cache slots (a prime, as HDF5 recommends) and the most memory the cache may use.
constexpr size_t kChunkCacheSlots = 521;
constexpr int64_t kMaxChunkCacheBytes = int64_t{64} << 20;
constexpr const char* kMetadataKeys[] = {"model", "variant", "engine"};

// IEEE binary16, little-endian, built the way h5py builds it.
H5Handle make_float16_type() {
    H5Handle type(H5Tcopy(H5T_IEEE_F32LE));
    H5Tset_fields(type.get(), 15, 10, 5, 0, 10);
    H5Tset_size(type.get(), 2);
    H5Tset_ebias(type.get(), 15);
    return type;
}

std::string where(const std::string& path) { return "'" + path + "' dataset '" + kLogitsDataset + "'"; }

// The bit fields of a 16-bit HDF5 float type: sign position, exponent position and size,
// mantissa position and size, exponent bias.
struct FloatFields {
    size_t sign, exponent_position, exponent_size, mantissa_position, mantissa_size, bias;
};
constexpr FloatFields kBinary16Fields{15, 10, 5, 0, 10, 15};
constexpr FloatFields kBFloat16Fields{15, 7, 8, 0, 7, 127};

bool has_fields(hid_t type, const FloatFields& want) {
    size_t sign = 0, exponent_position = 0, exponent_size = 0, mantissa_position = 0, mantissa_size = 0;
    if (H5Tget_fields(type, &sign, &exponent_position, &exponent_size, &mantissa_position, &mantissa_size) < 0)
        return false;
    return sign == want.sign && exponent_position == want.exponent_position && exponent_size == want.exponent_size &&
           mantissa_position == want.mantissa_position && mantissa_size == want.mantissa_size &&
           H5Tget_ebias(type) == want.bias;
}

// ", dtype=\"x\"", ", dtype attribute <problem>" or "" for messages.
std::string dtype_text(const StringAttribute& dtype) {
    switch (dtype.status) {
        case StringAttribute::Status::kAbsent: return ", no dtype attribute";
        case StringAttribute::Status::kValue: return ", dtype=\"" + dtype.value + "\"";
        case StringAttribute::Status::kUnreadable: return ", dtype attribute " + dtype.problem;
    }
    return "";
}

// Throws AccuracyError naming the rows of `dataset` (`name`, of `rows` rows) that have no storage
// in the file (rows_without_storage): libhdf5 would read them as the fill value, which for logits
// is a uniform distribution and for token ids the id 0, with no sign that they were never written.
void check_rows_written(hid_t dataset, const std::string& name, int64_t rows) {
    const std::vector<RowRange> unwritten = rows_without_storage(dataset, name);
    if (unwritten.empty()) return;
    const int64_t count = rows_in(unwritten);
    const bool one = count == 1;
    H5Handle create_props(H5Dget_create_plist(dataset));
    const bool chunked = create_props.valid() && H5Pget_layout(create_props.get()) == H5D_CHUNKED;
    throw AccuracyError(name + ": " + row_ranges_text(unwritten) + " (" + std::to_string(count) + " of " +
                        std::to_string(rows) + ") " + (one ? "was" : "were") +
                        " never written: the file holds no data " + (one ? "for it (" : "for them (") +
                        (chunked ? "chunks missing from the chunk index" : "the dataset's space was never allocated") +
                        "), which libhdf5 would read as the fill value; a writer that stopped or was killed before " +
                        (one ? "writing it" : "writing them") + " leaves such a file");
}

}  // namespace

LogitDumpReader::ElementType LogitDumpReader::element_type(hid_t dataset, const std::string& path,
                                                           const LogitType* known) {
    H5Handle file_type(H5Dget_type(dataset));
    if (!file_type.valid()) throw AccuracyError("cannot read the element type of " + where(path) + " (corrupt file?)");
    const H5T_class_t type_class = H5Tget_class(file_type.get());
    const size_t type_size = H5Tget_size(file_type.get());
    const bool binary16 = type_class == H5T_FLOAT && type_size == 2 && has_fields(file_type.get(), kBinary16Fields);
    // The dtype attribute decides for integer data, and is checked on IEEE float16 data (bfloat16
    // bits viewed as float16 would read as other numbers); a child that checked the file has read it.
    StringAttribute dtype;
    if (type_class == H5T_INTEGER && known != nullptr) {
        dtype.status = StringAttribute::Status::kValue;
        dtype.value = *known == LogitType::kBFloat16 ? kBFloat16Name : "";
    } else if (type_class == H5T_INTEGER || (binary16 && known == nullptr)) {
        dtype = read_string_attribute_checked(dataset, kDtypeAttribute);
    }
    if (type_class == H5T_FLOAT && type_size == 4) return {LogitType::kFloat32, H5Handle(H5Tcopy(H5T_NATIVE_FLOAT))};
    if (binary16 && dtype.status == StringAttribute::Status::kValue && dtype.value == kBFloat16Name)
        throw AccuracyError(where(path) + " is IEEE float16 but has dtype=\"bfloat16\": bfloat16 bits viewed as "
                            "float16 would be read as other numbers; store the bits as uint16 or int16 "
                            "(tensor.view(torch.int16)), or float16 values without that attribute");
    if (binary16) return {LogitType::kFloat16, make_float16_type()};
    if (type_class == H5T_FLOAT && type_size == 2 && has_fields(file_type.get(), kBFloat16Fields)) {
        // The file's own format in the machine's byte order: HDF5 only reorders the bytes.
        H5Handle memory_type(H5Tcopy(file_type.get()));
        H5Tset_order(memory_type.get(), H5Tget_order(H5T_NATIVE_UINT16));
        return {LogitType::kBFloat16, std::move(memory_type)};
    }
    if (type_class == H5T_INTEGER && type_size == 2 && dtype.status == StringAttribute::Status::kValue &&
        dtype.value == kBFloat16Name) {
        // bfloat16 bits in 16-bit integers, unsigned or signed (torch's tensor.view(torch.int16)):
        // read as integers of the same signedness, so HDF5 never converts a value, and used bit for bit.
        const bool is_signed = H5Tget_sign(file_type.get()) == H5T_SGN_2;
        return {LogitType::kBFloat16, H5Handle(H5Tcopy(is_signed ? H5T_NATIVE_INT16 : H5T_NATIVE_UINT16))};
    }
    const std::string described = hdf5_class_text(type_class) + " type of " + std::to_string(type_size) + " bytes" +
                                  (type_class == H5T_INTEGER ? dtype_text(dtype) : "");
    throw AccuracyError(where(path) + " has an unsupported element type (" + described +
                        "); expected float32, float16, or 16-bit integers (uint16 or int16) with dtype=\"bfloat16\"");
}

const char* logit_type_name(LogitType type) {
    switch (type) {
        case LogitType::kFloat32: return "float32";
        case LogitType::kFloat16: return "float16";
        case LogitType::kBFloat16: return "bfloat16";
    }
    return "unknown";
}

bool parse_logit_type(const std::string& name, LogitType* type) {
    for (LogitType candidate : {LogitType::kFloat32, LogitType::kFloat16, LogitType::kBFloat16}) {
        if (name == logit_type_name(candidate)) {
            *type = candidate;
            return true;
        }
    }
    return false;
}

int64_t logit_type_bytes(LogitType type) { return type == LogitType::kFloat32 ? 4 : 2; }

LogitDumpWriter::LogitDumpWriter(const std::string& path, int64_t vocab, LogitType type,
                                 const DumpMetadata& metadata, int64_t chunk_rows)
    : path_(path), vocab_(vocab), type_(type) {
    if (vocab < 1 || vocab > kMaxVocab)
        throw AccuracyError("logit dump '" + path + "': vocab must be in 1.." + std::to_string(kMaxVocab) + ", got " +
                            std::to_string(vocab));
    if (chunk_rows < 0) throw AccuracyError("logit dump '" + path + "': chunk_rows must be >= 0");
    if (chunk_rows == 0)
        chunk_rows = std::max<int64_t>(1, kTargetChunkBytes / (vocab * logit_type_bytes(type)));
    file_ = create_hdf5_file(path);
    write_string_attribute(file_.get(), kMetadataKeys[0], metadata.model);
    write_string_attribute(file_.get(), kMetadataKeys[1], metadata.variant);
    write_string_attribute(file_.get(), kMetadataKeys[2], metadata.engine);

    switch (type) {
        case LogitType::kFloat32: file_type_ = H5Handle(H5Tcopy(H5T_IEEE_F32LE)); break;
        case LogitType::kFloat16: file_type_ = make_float16_type(); break;
        case LogitType::kBFloat16: file_type_ = H5Handle(H5Tcopy(H5T_STD_U16LE)); break;
    }
    const hsize_t dims[2] = {0, static_cast<hsize_t>(vocab)};
    const hsize_t max_dims[2] = {H5S_UNLIMITED, static_cast<hsize_t>(vocab)};
    const hsize_t chunk[2] = {static_cast<hsize_t>(chunk_rows), static_cast<hsize_t>(vocab)};
    H5Handle space(H5Screate_simple(2, dims, max_dims));
    H5Handle create_props(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_chunk(create_props.get(), 2, chunk);
    H5Pset_obj_track_times(create_props.get(), 0);  // no timestamps: same inputs, same bytes
    dataset_ = H5Handle(H5Dcreate2(file_.get(), kLogitsDataset, file_type_.get(), space.get(), H5P_DEFAULT,
                                   create_props.get(), H5P_DEFAULT));
    if (!dataset_.valid()) throw AccuracyError("cannot create " + where(path));
    if (type == LogitType::kBFloat16) write_string_attribute(dataset_.get(), kDtypeAttribute, kBFloat16Name);
}

LogitDumpWriter::~LogitDumpWriter() {
    try {
        close();
    } catch (const AccuracyError&) {
        // A destructor cannot report; close() explicitly to see errors.
    }
}

void LogitDumpWriter::append_rows(const float* rows, int64_t count) {
    if (!file_.valid()) throw AccuracyError("logit dump '" + path_ + "' is already closed");
    if (count <= 0) return;
    const int64_t rows_after = checked_add(rows_written_, count, "logit dump '" + path_ + "': rows");
    const hsize_t new_dims[2] = {static_cast<hsize_t>(rows_after), static_cast<hsize_t>(vocab_)};
    if (H5Dset_extent(dataset_.get(), new_dims) < 0) throw AccuracyError("cannot extend " + where(path_));
    H5Handle file_space(H5Dget_space(dataset_.get()));
    const hsize_t start[2] = {static_cast<hsize_t>(rows_written_), 0};
    const hsize_t block[2] = {static_cast<hsize_t>(count), static_cast<hsize_t>(vocab_)};
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, block, nullptr);
    H5Handle memory_space(H5Screate_simple(2, block, nullptr));
    const int64_t elements = checked_mul(count, vocab_, "logit dump '" + path_ + "': rows appended");
    herr_t status;
    if (type_ == LogitType::kFloat32) {
        status = H5Dwrite(dataset_.get(), H5T_NATIVE_FLOAT, memory_space.get(), file_space.get(), H5P_DEFAULT, rows);
    } else {
        converted_.resize(static_cast<size_t>(elements));
        for (int64_t i = 0; i < elements; ++i)
            converted_[i] = type_ == LogitType::kFloat16 ? float_to_float16(rows[i]) : float_to_bf16(rows[i]);
        status = H5Dwrite(dataset_.get(), file_type_.get(), memory_space.get(), file_space.get(), H5P_DEFAULT,
                          converted_.data());
    }
    if (status < 0) throw AccuracyError("cannot write rows to " + where(path_));
    rows_written_ += count;
}

void LogitDumpWriter::write_tokens(const std::vector<int32_t>& tokens) {
    if (!file_.valid()) throw AccuracyError("logit dump '" + path_ + "' is already closed");
    const hsize_t dims[1] = {static_cast<hsize_t>(tokens.size())};
    H5Handle space(H5Screate_simple(1, dims, nullptr));
    H5Handle create_props(H5Pcreate(H5P_DATASET_CREATE));
    H5Pset_obj_track_times(create_props.get(), 0);
    H5Handle dataset(H5Dcreate2(file_.get(), kTokensDataset, H5T_STD_I32LE, space.get(), H5P_DEFAULT,
                                create_props.get(), H5P_DEFAULT));
    if (!dataset.valid() ||
        (!tokens.empty() && H5Dwrite(dataset.get(), H5T_NATIVE_INT32, H5S_ALL, H5S_ALL, H5P_DEFAULT, tokens.data()) < 0))
        throw AccuracyError("cannot write dataset 'tokens' of '" + path_ + "'");
}

void LogitDumpWriter::close() {
    if (!file_.valid()) return;
    dataset_.reset();
    file_type_.reset();
    const herr_t status = H5Fflush(file_.get(), H5F_SCOPE_LOCAL);
    file_.reset();
    if (status < 0) throw AccuracyError("cannot flush logit dump '" + path_ + "'");
}

struct LogitDumpReader::DirectLayout {
    // Entries of `offsets` not known yet, and of chunks stored some other way (read by H5Dread).
    static constexpr int64_t kNotLookedUp = -1;
    static constexpr int64_t kNotDirect = -2;

    int fd = -1;
    int64_t chunk_rows = 0;  // rows per chunk of `offsets` (all rows when contiguous)
    // File offset of each chunk's first row, looked up when a read first needs it: HDF5 1.10
    // walks the chunk index up to the chunk it is asked for, so looking up every chunk at open
    // costs the square of their number before any work starts; spread over the reads, one
    // thread's lookups overlap the others' computation. Readers in several threads share the
    // table; a chunk looked up twice at once gets the same value twice.
    std::unique_ptr<std::atomic<int64_t>[]> offsets;

    DirectLayout() = default;
    DirectLayout(const DirectLayout&) = delete;
    DirectLayout& operator=(const DirectLayout&) = delete;
    ~DirectLayout() {
        if (fd >= 0) ::close(fd);
    }
};

struct LogitDumpReader::ChildFindings {
    LogitType type = LogitType::kFloat32;
    DumpMetadata metadata;
    std::vector<std::string> warnings;
};

namespace {

// The child's findings as text: fields "<length>:<bytes>", the type's name first, then model,
// variant, engine and each warning.
void append_field(std::string* out, const std::string& field) { *out += std::to_string(field.size()) + ":" + field; }

std::vector<std::string> split_fields(const std::string& text, const std::string& path) {
    const std::string malformed = "'" + path + "': the child process that checked the file returned malformed findings";
    std::vector<std::string> fields;
    for (size_t at = 0; at < text.size();) {
        const size_t colon = text.find(':', at);
        if (colon == std::string::npos) throw AccuracyError(malformed);
        size_t length = 0;
        const std::from_chars_result parsed = std::from_chars(text.data() + at, text.data() + colon, length);
        if (parsed.ec != std::errc() || parsed.ptr != text.data() + colon || length > text.size() - colon - 1)
            throw AccuracyError(malformed);
        fields.push_back(text.substr(colon + 1, length));
        at = colon + 1 + length;
    }
    return fields;
}

}  // namespace

LogitDumpReader::LogitDumpReader(const std::string& path) : LogitDumpReader(path, OpenMode::kPrimary) {}

std::optional<LogitDumpReader::ChildFindings> LogitDumpReader::check_in_child(const std::string& path) {
    const std::optional<std::string> text = probe_in_child(path, [&path] {
        LogitDumpReader reader(path, OpenMode::kInChild);
        try {
            reader.read_tokens();
        } catch (const AccuracyError&) {
            // Reported by read_tokens() in the parent when it is called; only a crash counts here.
        }
        const LogitDumpInfo& info = reader.info();
        std::string findings;
        for (const std::string& field : {std::string(logit_type_name(info.type)), info.metadata.model,
                                         info.metadata.variant, info.metadata.engine})
            append_field(&findings, field);
        for (const std::string& warning : info.warnings) append_field(&findings, warning);
        return findings;
    });
    if (!text) return std::nullopt;
    const std::vector<std::string> fields = split_fields(*text, path);
    constexpr size_t kFixedFields = 4;
    ChildFindings findings;
    if (fields.size() < kFixedFields || !parse_logit_type(fields[0], &findings.type))
        throw AccuracyError("'" + path + "': the child process that checked the file returned malformed findings");
    findings.metadata = {fields[1], fields[2], fields[3]};
    findings.warnings.assign(fields.begin() + kFixedFields, fields.end());
    return findings;
}

std::unique_ptr<LogitDumpReader> LogitDumpReader::another_reader() const {
    std::unique_ptr<LogitDumpReader> reader(new LogitDumpReader(info_.path, OpenMode::kAnother));
    const LogitDumpInfo& other = reader->info();
    if (other.tokens != info_.tokens || other.vocab != info_.vocab || other.type != info_.type ||
        other.chunk_rows != info_.chunk_rows)
        throw AccuracyError(where(info_.path) + " changed while open: logits [" + std::to_string(other.tokens) + ", " +
                            std::to_string(other.vocab) + "] " + logit_type_name(other.type) + " in chunks of " +
                            std::to_string(other.chunk_rows) + " rows, was [" + std::to_string(info_.tokens) + ", " +
                            std::to_string(info_.vocab) + "] " + logit_type_name(info_.type) + " in chunks of " +
                            std::to_string(info_.chunk_rows) + " rows");
    reader->direct_ = direct_;
    return reader;
}

LogitDumpReader::LogitDumpReader(const std::string& path, OpenMode mode) {
    info_.path = path;
    const std::optional<ChildFindings> findings =
        mode == OpenMode::kPrimary ? check_in_child(path) : std::optional<ChildFindings>();
    file_ = open_hdf5_for_reading(path);
    if (!has_link(file_.get(), kLogitsDataset))
        throw AccuracyError("'" + path + "' has no dataset '" + kLogitsDataset + "' (not a logit dump?)");

    // Open once without a cache to learn the chunk shape, then reopen with a sized cache.
    {
        H5Handle probe(H5Dopen2(file_.get(), kLogitsDataset, H5P_DEFAULT));
        if (!probe.valid()) throw AccuracyError("cannot open " + where(path) + " (not a dataset?)");
        read_shape(probe.get());
        ElementType element = element_type(probe.get(), path, findings ? &findings->type : nullptr);
        info_.type = element.type;
        memory_type_ = std::move(element.memory_type);
        check_storage(probe.get(),
                      mode == OpenMode::kPrimary ? FilteredChunks::kCheckSizes : FilteredChunks::kSkip);
        if (mode != OpenMode::kAnother) check_rows_written(probe.get(), where(path), info_.tokens);
    }
    open_dataset(true);
    info_.has_tokens = has_link(file_.get(), kTokensDataset);
    if (mode == OpenMode::kAnother) return;
    set_direct_reads(true);
    if (!findings) {
        read_metadata();
        return;
    }
    info_.metadata = findings->metadata;
    info_.warnings = findings->warnings;
}

void LogitDumpReader::read_shape(hid_t dataset) {
    const std::vector<int64_t> dims = dataset_dims(dataset, where(info_.path));
    if (dims.size() != 2)
        throw AccuracyError(where(info_.path) + " must be 2-D [tokens, vocab], has rank " + std::to_string(dims.size()));
    info_.tokens = dims[0];
    info_.vocab = dims[1];
    if (info_.tokens == 0 || info_.vocab == 0)
        throw AccuracyError("'" + info_.path + "' is an empty dump: logits shape [" + std::to_string(info_.tokens) +
                            ", " + std::to_string(info_.vocab) + "]");
    if (info_.vocab > kMaxVocab)
        throw AccuracyError(where(info_.path) + " declares a vocab of " + std::to_string(info_.vocab) + " (at most " +
                            std::to_string(kMaxVocab) + ": token ids are int32)");
}

void LogitDumpReader::check_storage(hid_t dataset, FilteredChunks filtered) {
    const std::string shape = where(info_.path) + " [" + std::to_string(info_.tokens) + ", " +
                              std::to_string(info_.vocab) + "] " + logit_type_name(info_.type);
    const int64_t row_bytes = checked_mul(info_.vocab, logit_type_bytes(info_.type), shape + ": bytes per row");
    check_dataset_storage(dataset, checked_mul(info_.tokens, row_bytes, shape + ": declared bytes"), shape, filtered);
    info_.chunk_rows = chunk_rows_of(dataset, where(info_.path));
}

void LogitDumpReader::read_metadata() {
    std::string* fields[] = {&info_.metadata.model, &info_.metadata.variant, &info_.metadata.engine};
    for (size_t i = 0; i < std::size(kMetadataKeys); ++i) {
        const StringAttribute attribute = read_string_attribute_checked(file_.get(), kMetadataKeys[i]);
        if (attribute.status == StringAttribute::Status::kValue) *fields[i] = attribute.value;
        if (attribute.status == StringAttribute::Status::kUnreadable)
            info_.warnings.push_back("'" + info_.path + "' root attribute '" + kMetadataKeys[i] + "' " +
                                     attribute.problem + "; left empty");
    }
}

void LogitDumpReader::open_dataset(bool chunk_cache) {
    // Sizes were checked at open: a row fits int64; a chunk larger than the cache's cap is capped.
    const int64_t row_bytes = info_.vocab * logit_type_bytes(info_.type);
    const int64_t chunk_rows = std::max<int64_t>(1, info_.chunk_rows);
    const int64_t chunk_bytes = chunk_rows > kMaxChunkCacheBytes / row_bytes ? kMaxChunkCacheBytes : chunk_rows * row_bytes;
    H5Handle access_props(H5Pcreate(H5P_DATASET_ACCESS));
    const size_t cache_bytes = chunk_cache ? static_cast<size_t>(std::min(chunk_bytes, kMaxChunkCacheBytes)) : 0;
    H5Pset_chunk_cache(access_props.get(), kChunkCacheSlots, cache_bytes, 1.0);
    dataset_.reset();
    dataset_ = H5Handle(H5Dopen2(file_.get(), kLogitsDataset, access_props.get()));
    if (!dataset_.valid()) throw AccuracyError("cannot open " + where(info_.path));
}

void LogitDumpReader::set_chunk_cache(bool enabled) { open_dataset(enabled); }

LogitDumpReader::~LogitDumpReader() = default;

void LogitDumpReader::set_direct_reads(bool enabled) { direct_ = enabled ? open_direct() : nullptr; }

std::shared_ptr<const LogitDumpReader::DirectLayout> LogitDumpReader::open_direct() {
    auto layout = std::make_shared<DirectLayout>();
    const int64_t row_bytes = info_.vocab * static_cast<int64_t>(sizeof(float));
    {
        std::lock_guard<std::mutex> lock(hdf5_call_mutex());
        if (info_.type != LogitType::kFloat32) return nullptr;
        H5Handle file_type(H5Dget_type(dataset_.get()));
        if (H5Tequal(file_type.get(), H5T_NATIVE_FLOAT) <= 0) return nullptr;
        // Offsets count from the file's start only without a user block (base address 0).
        H5Handle file_props(H5Fget_create_plist(file_.get()));
        hsize_t user_block = 0;
        if (!file_props.valid() || H5Pget_userblock(file_props.get(), &user_block) < 0 || user_block != 0) return nullptr;
        H5Handle access_props(H5Fget_access_plist(file_.get()));
        if (!access_props.valid() || H5Pget_driver(access_props.get()) != H5FD_SEC2) return nullptr;
        H5Handle create_props(H5Dget_create_plist(dataset_.get()));
        if (!create_props.valid() || H5Pget_nfilters(create_props.get()) != 0) return nullptr;
        const H5D_layout_t storage = H5Pget_layout(create_props.get());
        if (storage == H5D_CONTIGUOUS) {
            const haddr_t offset = H5Dget_offset(dataset_.get());
            if (offset == HADDR_UNDEF) return nullptr;  // never written
            int64_t data_bytes = 0;
            if (__builtin_mul_overflow(info_.tokens, row_bytes, &data_bytes) ||
                offset > static_cast<haddr_t>(std::numeric_limits<int64_t>::max() - data_bytes))
                return nullptr;
            layout->chunk_rows = info_.tokens;
            layout->offsets.reset(new std::atomic<int64_t>[1]);
            layout->offsets[0].store(static_cast<int64_t>(offset), std::memory_order_relaxed);
        } else if (storage == H5D_CHUNKED) {
            hsize_t chunk[2] = {0, 0};
            if (H5Pget_chunk(create_props.get(), 2, chunk) != 2 || static_cast<int64_t>(chunk[1]) != info_.vocab ||
                chunk[0] == 0)
                return nullptr;  // chunks that split rows
            layout->chunk_rows = static_cast<int64_t>(chunk[0]);
            int64_t chunk_bytes = 0;
            if (__builtin_mul_overflow(layout->chunk_rows, row_bytes, &chunk_bytes)) return nullptr;
            const int64_t chunks = ceil_div(info_.tokens, layout->chunk_rows);
            if (chunks > kMaxDirectChunks) return nullptr;  // the lookups would cost more than they save
            layout->offsets.reset(new std::atomic<int64_t>[static_cast<size_t>(chunks)]);
            for (int64_t c = 0; c < chunks; ++c)
                layout->offsets[c].store(DirectLayout::kNotLookedUp, std::memory_order_relaxed);
        } else {
            return nullptr;
        }
    }
    layout->fd = ::open(info_.path.c_str(), O_RDONLY | O_CLOEXEC);
    if (layout->fd < 0) return nullptr;
    if (chunk_offset(*layout, 0) == DirectLayout::kNotDirect) return nullptr;
    // The first row both ways must agree, or the offsets are not what they seem.
    std::vector<float> direct(static_cast<size_t>(info_.vocab)), through_hdf5(static_cast<size_t>(info_.vocab));
    try {
        read_direct(*layout, 0, 1, direct.data());
    } catch (const AccuracyError&) {
        return nullptr;
    }
    read_raw(0, 1, through_hdf5.data(), memory_type_.get());
    if (std::memcmp(direct.data(), through_hdf5.data(), static_cast<size_t>(row_bytes)) != 0) return nullptr;
    return layout;
}

int64_t LogitDumpReader::chunk_offset(const DirectLayout& layout, int64_t chunk) {
    int64_t offset = layout.offsets[chunk].load(std::memory_order_relaxed);
    if (offset != DirectLayout::kNotLookedUp) return offset;
    const int64_t row_bytes = info_.vocab * static_cast<int64_t>(sizeof(float));
    const hsize_t coord[2] = {static_cast<hsize_t>(chunk * layout.chunk_rows), 0};
    unsigned filter_mask = 0;
    haddr_t address = HADDR_UNDEF;
    hsize_t size = 0;
    {
        std::lock_guard<std::mutex> lock(hdf5_call_mutex());
        const herr_t status = H5Dget_chunk_info_by_coord(dataset_.get(), coord, &filter_mask, &address, &size);
        // A chunk stored differently, at an address whose end does not fit a file offset (a
        // corrupt index) or missing (refused at open, so only in a file changed since) reads
        // through H5Dread. The chunk's byte count cannot overflow: open_direct checked it.
        const int64_t chunk_bytes = layout.chunk_rows * row_bytes;
        const bool usable = status >= 0 && address != HADDR_UNDEF && filter_mask == 0 &&
                            size == static_cast<hsize_t>(chunk_bytes) &&
                            address <= static_cast<haddr_t>(std::numeric_limits<int64_t>::max() - chunk_bytes);
        offset = usable ? static_cast<int64_t>(address) : DirectLayout::kNotDirect;
    }
    layout.offsets[chunk].store(offset, std::memory_order_relaxed);
    return offset;
}

void LogitDumpReader::read_direct(const DirectLayout& layout, int64_t first, int64_t count, float* out) {
    const int64_t row_bytes = info_.vocab * static_cast<int64_t>(sizeof(float));
    for (int64_t row = first; row < first + count;) {
        const int64_t chunk = row / layout.chunk_rows;
        const int64_t in_chunk = row - chunk * layout.chunk_rows;
        const int64_t rows = std::min(layout.chunk_rows - in_chunk, first + count - row);
        char* destination = reinterpret_cast<char*>(out + (row - first) * info_.vocab);
        const int64_t chunk_start = chunk_offset(layout, chunk);
        if (chunk_start == DirectLayout::kNotDirect) {
            read_raw(row, rows, destination, memory_type_.get());
            row += rows;
            continue;
        }
        int64_t offset = chunk_start + in_chunk * row_bytes;
        int64_t remaining = rows * row_bytes;
        while (remaining > 0) {
            const ssize_t got = ::pread(layout.fd, destination, static_cast<size_t>(remaining), static_cast<off_t>(offset));
            if (got < 0 && errno == EINTR) continue;
            if (got <= 0)
                throw AccuracyError("cannot read rows " + std::to_string(first) + ".." + std::to_string(first + count - 1) +
                                    " of " + where(info_.path) + " at byte " + std::to_string(offset) + ": " +
                                    (got < 0 ? std::strerror(errno) : "end of file (truncated file?)"));
            destination += got;
            offset += got;
            remaining -= got;
        }
        row += rows;
    }
}

std::vector<int32_t> LogitDumpReader::read_tokens() const {
    std::vector<int32_t> tokens;
    if (!info_.has_tokens) return tokens;
    const std::string name = "'" + info_.path + "' dataset '" + kTokensDataset + "'";
    H5Handle dataset(H5Dopen2(file_.get(), kTokensDataset, H5P_DEFAULT));
    if (!dataset.valid()) throw AccuracyError("cannot open " + name + " (not a dataset?)");
    const std::vector<int64_t> dims = dataset_dims(dataset.get(), name);
    if (dims.size() != 1 || dims[0] != info_.tokens)
        throw AccuracyError(name + " must be 1-D with " + std::to_string(info_.tokens) + " entries (one per logits row)");
    H5Handle file_type(H5Dget_type(dataset.get()));
    if (H5Tget_class(file_type.get()) != H5T_INTEGER) throw AccuracyError(name + " must hold integers");
    const int64_t element_bytes = static_cast<int64_t>(H5Tget_size(file_type.get()));
    check_dataset_storage(dataset.get(), checked_mul(info_.tokens, element_bytes, name + ": declared bytes"), name);
    check_rows_written(dataset.get(), name, info_.tokens);
    // Read as int64, so HDF5 converts every integer type by value without clamping to int32
    // (an unsigned id above 2^63 - 1 still clamps, to a value outside the vocab).
    std::vector<int64_t> wide(checked_size(info_.tokens, name));
    if (H5Dread(dataset.get(), H5T_NATIVE_INT64, H5S_ALL, H5S_ALL, H5P_DEFAULT, wide.data()) < 0)
        throw AccuracyError("cannot read " + name + " (truncated or corrupt file?)");
    tokens.resize(wide.size());
    for (size_t i = 0; i < wide.size(); ++i) {
        if (wide[i] < 0 || wide[i] >= info_.vocab)
            throw AccuracyError(name + "[" + std::to_string(i) + "] = " + std::to_string(wide[i]) +
                                " is outside the vocab 0.." + std::to_string(info_.vocab - 1));
        tokens[i] = static_cast<int32_t>(wide[i]);
    }
    return tokens;
}

void LogitDumpReader::check_row_range(int64_t first, int64_t count) const {
    if (first < 0 || count < 0 || first > info_.tokens || count > info_.tokens - first)
        throw AccuracyError(where(info_.path) + ": " + std::to_string(count) + " rows from row " + std::to_string(first) +
                            " are outside 0.." + std::to_string(info_.tokens));
}

void LogitDumpReader::read_raw(int64_t first, int64_t count, void* out, hid_t memory_type) {
    std::lock_guard<std::mutex> lock(hdf5_call_mutex());
    H5Handle file_space(H5Dget_space(dataset_.get()));
    const hsize_t start[2] = {static_cast<hsize_t>(first), 0};
    const hsize_t block[2] = {static_cast<hsize_t>(count), static_cast<hsize_t>(info_.vocab)};
    H5Sselect_hyperslab(file_space.get(), H5S_SELECT_SET, start, nullptr, block, nullptr);
    H5Handle memory_space(H5Screate_simple(2, block, nullptr));
    if (H5Dread(dataset_.get(), memory_type, memory_space.get(), file_space.get(), H5P_DEFAULT, out) < 0)
        throw AccuracyError("cannot read rows " + std::to_string(first) + ".." + std::to_string(first + count - 1) +
                            " of " + where(info_.path) + " (truncated or corrupt file?)");
}

void LogitDumpReader::read_rows(int64_t first, int64_t count, float* out) {
    check_row_range(first, count);
    if (info_.type == LogitType::kFloat32) {
        if (direct_) {
            read_direct(*direct_, first, count, out);
        } else {
            read_raw(first, count, out, memory_type_.get());
        }
        return;
    }
    const size_t elements = static_cast<size_t>(count * info_.vocab);
    raw16_.resize(elements);
    read_raw(first, count, raw16_.data(), memory_type_.get());
    if (info_.type == LogitType::kFloat16) {
        for (size_t i = 0; i < elements; ++i) out[i] = float16_to_float(raw16_[i]);
    } else {
        for (size_t i = 0; i < elements; ++i) out[i] = bf16_to_float(raw16_[i]);
    }
}

void LogitDumpReader::read_rows(int64_t first, int64_t count, double* out) {
    check_row_range(first, count);
    staging_.resize(static_cast<size_t>(count * info_.vocab));
    read_rows(first, count, staging_.data());
    std::copy(staging_.begin(), staging_.end(), out);
}

}  // namespace wideattn::accuracy
