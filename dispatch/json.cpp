// json.cpp - see json.h. Recursive descent over RFC 8259 with a nesting limit; numbers are
// converted with std::from_chars, so the result does not depend on the process's locale.
#include "dispatch/json.h"

#include <charconv>
#include <cstdio>
#include <cstring>
#include <system_error>

namespace wideattn {
namespace {

constexpr unsigned kHighSurrogateFirst = 0xD800, kLowSurrogateFirst = 0xDC00, kSurrogateEnd = 0xE000;
constexpr unsigned kSupplementaryFirst = 0x10000;
constexpr size_t kUnicodeEscapeDigits = 4;

bool is_digit(char c) { return c >= '0' && c <= '9'; }

int hex_value(char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
}

bool is_continuation(unsigned char c) { return (c & 0xC0) == 0x80; }

// Length of the well-formed UTF-8 sequence (RFC 3629: no overlong forms, no surrogates, at most
// U+10FFFF) starting at text[pos] with a byte >= 0x80, or 0 when it is not one.
size_t utf8_sequence_length(const std::string& text, size_t pos) {
    const auto byte = [&](size_t i) { return static_cast<unsigned char>(pos + i < text.size() ? text[pos + i] : 0); };
    const unsigned char lead = byte(0);
    size_t length = 0;
    unsigned char second_lo = 0x80, second_hi = 0xBF;
    if (lead >= 0xC2 && lead <= 0xDF) {
        length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
        length = 3;
        if (lead == 0xE0) second_lo = 0xA0;  // overlong below U+0800
        if (lead == 0xED) second_hi = 0x9F;  // UTF-16 surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
        length = 4;
        if (lead == 0xF0) second_lo = 0x90;  // overlong below U+10000
        if (lead == 0xF4) second_hi = 0x8F;  // above U+10FFFF
    } else {
        return 0;
    }
    if (byte(1) < second_lo || byte(1) > second_hi) return 0;
    for (size_t i = 2; i < length; ++i)
        if (!is_continuation(byte(i))) return 0;
    return length;
}

void append_utf8(unsigned code, std::string* out) {
    if (code < 0x80) {
        *out += static_cast<char>(code);
    } else if (code < 0x800) {
        *out += static_cast<char>(0xC0 | (code >> 6));
        *out += static_cast<char>(0x80 | (code & 0x3F));
    } else if (code < kSupplementaryFirst) {
        *out += static_cast<char>(0xE0 | (code >> 12));
        *out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        *out += static_cast<char>(0x80 | (code & 0x3F));
    } else {
        *out += static_cast<char>(0xF0 | (code >> 18));
        *out += static_cast<char>(0x80 | ((code >> 12) & 0x3F));
        *out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
        *out += static_cast<char>(0x80 | (code & 0x3F));
    }
}

class Parser {
public:
    explicit Parser(const std::string& text) : text_(text) {}

    bool parse(JsonValue* out, std::string* error) {
        skip_space();
        bool ok = value(out, 0);
        if (ok) {
            skip_space();
            if (pos_ != text_.size()) ok = fail("trailing characters after the JSON value");
        }
        if (!ok) *error = "offset " + std::to_string(error_pos_) + ": " + error_;
        return ok;
    }

private:
    bool fail(const std::string& what) { return fail_at(pos_, what); }
    bool fail_at(size_t pos, const std::string& what) {
        error_ = what;
        error_pos_ = pos;
        return false;
    }
    bool at_end() const { return pos_ >= text_.size(); }
    char peek() const { return text_[pos_]; }
    void skip_space() {
        while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\r' || peek() == '\n')) ++pos_;
    }
    bool literal(const char* word) {
        const size_t n = std::strlen(word);
        if (text_.compare(pos_, n, word) != 0) return fail("invalid literal");
        pos_ += n;
        return true;
    }
    bool value(JsonValue* out, int depth) {
        if (at_end()) return fail("unexpected end of input");
        const char c = peek();
        if (c == '{' || c == '[') {
            if (depth >= kJsonMaxDepth)
                return fail("nesting too deep (more than " + std::to_string(kJsonMaxDepth) + " levels)");
            return c == '{' ? object(out, depth + 1) : array(out, depth + 1);
        }
        if (c == '"') {
            out->type = JsonValue::Type::kString;
            return string(&out->string);
        }
        if (c == 't' || c == 'f') {
            out->type = JsonValue::Type::kBool;
            out->boolean = c == 't';
            return literal(c == 't' ? "true" : "false");
        }
        if (c == 'n') {
            out->type = JsonValue::Type::kNull;
            return literal("null");
        }
        if (c == '-' || is_digit(c)) return number(out);
        return fail("expected a value");
    }
    // Consumes one or more digits; false when there is none.
    bool digits() {
        const size_t start = pos_;
        while (!at_end() && is_digit(peek())) ++pos_;
        return pos_ > start;
    }
    // number = [ "-" ] ( "0" / [1-9] *DIGIT ) [ "." 1*DIGIT ] [ ("e" / "E") [ "-" / "+" ] 1*DIGIT ]
    bool number(JsonValue* out) {
        const size_t start = pos_;
        if (peek() == '-') ++pos_;
        if (at_end() || !is_digit(peek())) return fail("malformed number: a digit must follow '-'");
        if (peek() == '0') {
            ++pos_;
            if (!at_end() && is_digit(peek())) return fail_at(start, "malformed number: leading zero");
        } else {
            digits();
        }
        bool integral = true;
        if (!at_end() && peek() == '.') {
            ++pos_;
            integral = false;
            if (!digits()) return fail("malformed number: a digit must follow '.'");
        }
        if (!at_end() && (peek() == 'e' || peek() == 'E')) {
            ++pos_;
            integral = false;
            if (!at_end() && (peek() == '+' || peek() == '-')) ++pos_;
            if (!digits()) return fail("malformed number: the exponent has no digits");
        }
        const char* first = text_.data() + start;
        const char* last = text_.data() + pos_;
        out->type = JsonValue::Type::kNumber;
        out->literal.assign(first, last);
        const std::from_chars_result as_double = std::from_chars(first, last, out->number);
        if (as_double.ec != std::errc() || as_double.ptr != last)
            return fail_at(start, "number " + json_quoted(out->literal) + " is outside the range of a double");
        if (integral) {
            const std::from_chars_result as_int = std::from_chars(first, last, out->integer);
            out->is_integer = as_int.ec == std::errc() && as_int.ptr == last;
        }
        return true;
    }
    // The code unit of a \uXXXX escape whose 'u' was consumed; false when malformed.
    bool unicode_unit(unsigned* unit) {
        if (text_.size() - pos_ < kUnicodeEscapeDigits) return fail("truncated \\u escape");
        *unit = 0;
        for (size_t i = 0; i < kUnicodeEscapeDigits; ++i) {
            const int digit = hex_value(text_[pos_ + i]);
            if (digit < 0) return fail("\\u escape needs four hex digits");
            *unit = *unit * 16 + static_cast<unsigned>(digit);
        }
        pos_ += kUnicodeEscapeDigits;
        return true;
    }
    // A \u escape (the backslash and 'u' consumed), a surrogate pair as one code point.
    bool unicode_escape(std::string* out) {
        const size_t start = pos_ - 2;
        unsigned code = 0;
        if (!unicode_unit(&code)) return false;
        if (code == 0) return fail_at(start, "\\u0000 (NUL) is not allowed in strings");
        if (code >= kLowSurrogateFirst && code < kSurrogateEnd)
            return fail_at(start, "\\u escape is a low surrogate without a high surrogate before it");
        if (code >= kHighSurrogateFirst && code < kLowSurrogateFirst) {
            unsigned low = 0;
            if (text_.compare(pos_, 2, "\\u") != 0)
                return fail_at(start, "\\u escape is a high surrogate without a low surrogate after it");
            pos_ += 2;
            if (!unicode_unit(&low)) return false;
            if (low < kLowSurrogateFirst || low >= kSurrogateEnd)
                return fail_at(start, "\\u escape is a high surrogate without a low surrogate after it");
            code = kSupplementaryFirst + ((code - kHighSurrogateFirst) << 10) + (low - kLowSurrogateFirst);
        }
        append_utf8(code, out);
        return true;
    }
    bool escape(std::string* out) {
        if (at_end()) return fail("unterminated string");
        const char e = text_[pos_++];
        switch (e) {
            case '"': *out += '"'; return true;
            case '\\': *out += '\\'; return true;
            case '/': *out += '/'; return true;
            case 'b': *out += '\b'; return true;
            case 'f': *out += '\f'; return true;
            case 'n': *out += '\n'; return true;
            case 'r': *out += '\r'; return true;
            case 't': *out += '\t'; return true;
            case 'u': return unicode_escape(out);
            default: --pos_; return fail("invalid escape in string");
        }
    }
    bool string(std::string* out) {
        ++pos_;  // opening quote
        while (!at_end()) {
            const unsigned char c = static_cast<unsigned char>(peek());
            if (c == '"') {
                ++pos_;
                return true;
            }
            if (c < 0x20) return fail("control character in string");
            if (c == '\\') {
                ++pos_;
                if (!escape(out)) return false;
            } else if (c < 0x80) {
                *out += static_cast<char>(c);
                ++pos_;
            } else {
                const size_t length = utf8_sequence_length(text_, pos_);
                if (length == 0) return fail("invalid UTF-8 in string");
                out->append(text_, pos_, length);
                pos_ += length;
            }
        }
        return fail("unterminated string");
    }
    bool array(JsonValue* out, int depth) {
        out->type = JsonValue::Type::kArray;
        ++pos_;
        skip_space();
        if (!at_end() && peek() == ']') {
            ++pos_;
            return true;
        }
        while (true) {
            out->array.emplace_back();
            skip_space();
            if (!value(&out->array.back(), depth)) return false;
            skip_space();
            if (at_end()) return fail("unterminated array");
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() == ']') {
                ++pos_;
                return true;
            }
            return fail("expected ',' or ']' in array");
        }
    }
    // One "key": value member into out->object; a key seen before is refused.
    bool member(JsonValue* out, int depth) {
        skip_space();
        if (at_end() || peek() != '"') return fail("expected a string key in object");
        const size_t key_pos = pos_;
        std::string key;
        if (!string(&key)) return false;
        if (out->object.count(key)) return fail_at(key_pos, "duplicate key " + json_quoted(key) + " in object");
        skip_space();
        if (at_end() || peek() != ':') return fail("expected ':' after object key");
        ++pos_;
        skip_space();
        JsonValue item;
        if (!value(&item, depth)) return false;
        out->object.emplace(std::move(key), std::move(item));
        return true;
    }
    bool object(JsonValue* out, int depth) {
        out->type = JsonValue::Type::kObject;
        ++pos_;
        skip_space();
        if (!at_end() && peek() == '}') {
            ++pos_;
            return true;
        }
        while (true) {
            if (!member(out, depth)) return false;
            skip_space();
            if (at_end()) return fail("unterminated object");
            if (peek() == ',') {
                ++pos_;
                continue;
            }
            if (peek() == '}') {
                ++pos_;
                return true;
            }
            return fail("expected ',' or '}' in object");
        }
    }

    const std::string& text_;
    size_t pos_ = 0;
    std::string error_;
    size_t error_pos_ = 0;
};

}  // namespace

const JsonValue* JsonValue::find(const std::string& key) const {
    if (type != Type::kObject) return nullptr;
    const auto it = object.find(key);
    return it == object.end() ? nullptr : &it->second;
}

bool parse_json(const std::string& text, JsonValue* out, std::string* error) {
    *out = JsonValue{};
    return Parser(text).parse(out, error);
}

std::string json_quoted(const std::string& text, size_t limit) {
    std::string quoted = "'";
    for (size_t i = 0; i < text.size() && i < limit; ++i) {
        const unsigned char c = static_cast<unsigned char>(text[i]);
        if (c >= 0x20 && c < 0x7F && c != '\'' && c != '\\') {
            quoted += static_cast<char>(c);
        } else {
            char hex[8];
            std::snprintf(hex, sizeof hex, "\\x%02x", c);
            quoted += hex;
        }
    }
    if (text.size() > limit) quoted += "...";
    return quoted + "'";
}

}  // namespace wideattn
