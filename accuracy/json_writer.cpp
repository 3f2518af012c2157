// json_writer.cpp - see json_writer.h.
#include "accuracy/json_writer.h"

#include <cmath>
#include <cstdint>
#include <cstdio>

namespace wideattn::accuracy {

namespace {

constexpr unsigned char kFirstPrintable = 0x20, kFirstNonAscii = 0x80;
constexpr unsigned char kContinuationMask = 0xc0, kContinuationBits = 0x80;
constexpr int kContinuationPayloadBits = 6;
constexpr uint32_t kLastCodePoint = 0x10ffff;
constexpr uint32_t kFirstSurrogate = 0xd800, kLastSurrogate = 0xdfff;
constexpr const char* kReplacement = "\\ufffd";

// The length of the well-formed UTF-8 sequence starting at text[i] (1 to 4 bytes), or 0 when
// the bytes there are not one: a stray continuation byte, a truncated sequence, an overlong
// encoding, a surrogate or a code point above U+10FFFF.
size_t utf8_sequence_length(const std::string& text, size_t i) {
    struct FirstByte {
        unsigned char mask, bits, payload;
        size_t length;
        uint32_t smallest;  // the smallest code point this length may encode (no overlong forms)
    };
    static constexpr FirstByte kFirstBytes[] = {
        {0xe0, 0xc0, 0x1f, 2, 0x80}, {0xf0, 0xe0, 0x0f, 3, 0x800}, {0xf8, 0xf0, 0x07, 4, 0x10000}};
    const unsigned char first = static_cast<unsigned char>(text[i]);
    if (first < kFirstNonAscii) return 1;
    for (const FirstByte& form : kFirstBytes) {
        if ((first & form.mask) != form.bits) continue;
        if (text.size() - i < form.length) return 0;
        uint32_t code_point = first & form.payload;
        for (size_t k = 1; k < form.length; ++k) {
            const unsigned char next = static_cast<unsigned char>(text[i + k]);
            if ((next & kContinuationMask) != kContinuationBits) return 0;
            const uint32_t payload = next & static_cast<unsigned char>(~kContinuationMask);
            code_point = (code_point << kContinuationPayloadBits) | payload;
        }
        const bool valid = code_point >= form.smallest && code_point <= kLastCodePoint &&
                           (code_point < kFirstSurrogate || code_point > kLastSurrogate);
        return valid ? form.length : 0;
    }
    return 0;
}

}  // namespace

std::string JsonWriter::escape(const std::string& text) {
    std::string out = "\"";
    for (size_t i = 0; i < text.size();) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if (c >= kFirstNonAscii) {
            const size_t length = utf8_sequence_length(text, i);
            if (length == 0) {
                out += kReplacement;  // one U+FFFD per byte that is not part of valid UTF-8
                ++i;
            } else {
                out.append(text, i, length);
                i += length;
            }
            continue;
        }
        ++i;
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < kFirstPrintable) {
                    char code[8];
                    std::snprintf(code, sizeof code, "\\u%04x", c);
                    out += code;
                } else {
                    out += static_cast<char>(c);
                }
        }
    }
    out += '"';
    return out;
}

void JsonWriter::before_value() {
    if (after_key_) {
        after_key_ = false;
        return;
    }
    if (!first_in_level_.empty()) {
        if (!first_in_level_.back()) out_ += ',';
        first_in_level_.back() = false;
    }
}

void JsonWriter::begin_object() {
    before_value();
    out_ += '{';
    first_in_level_.push_back(true);
}

void JsonWriter::end_object() {
    first_in_level_.pop_back();
    out_ += '}';
}

void JsonWriter::begin_array() {
    before_value();
    out_ += '[';
    first_in_level_.push_back(true);
}

void JsonWriter::end_array() {
    first_in_level_.pop_back();
    out_ += ']';
}

void JsonWriter::key(const std::string& name) {
    before_value();
    out_ += escape(name);
    out_ += ':';
    after_key_ = true;
}

void JsonWriter::value(const std::string& text) {
    before_value();
    out_ += escape(text);
}

void JsonWriter::value(const char* text) { value(std::string(text)); }

void JsonWriter::value(double number) {
    before_value();
    if (std::isnan(number)) {
        out_ += "\"nan\"";
    } else if (std::isinf(number)) {
        out_ += number > 0 ? "\"inf\"" : "\"-inf\"";
    } else {
        char digits[32];
        std::snprintf(digits, sizeof digits, "%.17g", number);
        out_ += digits;
    }
}

void JsonWriter::value(int64_t number) {
    before_value();
    out_ += std::to_string(number);
}

void JsonWriter::value(bool flag) {
    before_value();
    out_ += flag ? "true" : "false";
}

}  // namespace wideattn::accuracy
