// json.cpp - see json.h. Recursive descent over RFC 8259 with a nesting limit.
#include "dispatch/json.h"

#include <cstdlib>
#include <cstring>

namespace wideattn {
namespace {

constexpr int kMaxDepth = 64;

class Parser {
public:
    explicit Parser(const std::string& text) : text_(text) {}

    bool parse(JsonValue* out, std::string* error) {
        skip_space();
        if (!value(out, 0)) {
            *error = "offset " + std::to_string(pos_) + ": " + error_;
            return false;
        }
        skip_space();
        if (pos_ != text_.size()) {
            *error = "offset " + std::to_string(pos_) + ": trailing characters after the JSON value";
            return false;
        }
        return true;
    }

private:
    bool fail(const char* what) {
        error_ = what;
        return false;
    }
    void skip_space() {
        while (pos_ < text_.size() && std::strchr(" \t\r\n", text_[pos_]) && text_[pos_] != '\0') ++pos_;
    }
    bool literal(const char* word) {
        const size_t n = std::strlen(word);
        if (text_.compare(pos_, n, word) != 0) return fail("invalid literal");
        pos_ += n;
        return true;
    }
    bool value(JsonValue* out, int depth) {
        if (depth > kMaxDepth) return fail("nesting too deep");
        if (pos_ >= text_.size()) return fail("unexpected end of input");
        const char c = text_[pos_];
        if (c == '{') return object(out, depth);
        if (c == '[') return array(out, depth);
        if (c == '"') {
            out->type = JsonValue::Type::kString;
            return string(&out->string);
        }
        if (c == 't') {
            out->type = JsonValue::Type::kBool;
            out->boolean = true;
            return literal("true");
        }
        if (c == 'f') {
            out->type = JsonValue::Type::kBool;
            return literal("false");
        }
        if (c == 'n') {
            out->type = JsonValue::Type::kNull;
            return literal("null");
        }
        return number(out);
    }
    bool number(JsonValue* out) {
        const size_t start = pos_;
        if (pos_ < text_.size() && text_[pos_] == '-') ++pos_;
        bool digits = false;
        while (pos_ < text_.size() && std::strchr("0123456789.eE+-", text_[pos_]) && text_[pos_] != '\0') {
            digits = true;
            ++pos_;
        }
        if (!digits) return fail("expected a value");
        const std::string token = text_.substr(start, pos_ - start);
        char* end = nullptr;
        out->type = JsonValue::Type::kNumber;
        out->number = std::strtod(token.c_str(), &end);
        if (end != token.c_str() + token.size()) {
            pos_ = start;
            return fail("malformed number");
        }
        return true;
    }
    bool string(std::string* out) {
        ++pos_;  // opening quote
        while (pos_ < text_.size()) {
            const char c = text_[pos_++];
            if (c == '"') return true;
            if (static_cast<unsigned char>(c) < 0x20) return fail("control character in string");
            if (c != '\\') {
                *out += c;
                continue;
            }
            if (pos_ >= text_.size()) break;
            const char e = text_[pos_++];
            switch (e) {
                case '"': *out += '"'; break;
                case '\\': *out += '\\'; break;
                case '/': *out += '/'; break;
                case 'b': *out += '\b'; break;
                case 'f': *out += '\f'; break;
                case 'n': *out += '\n'; break;
                case 'r': *out += '\r'; break;
                case 't': *out += '\t'; break;
                case 'u': {
                    if (pos_ + 4 > text_.size()) return fail("truncated \\u escape");
                    const unsigned code = std::strtoul(text_.substr(pos_, 4).c_str(), nullptr, 16);
                    pos_ += 4;
                    if (code < 0x80) {
                        *out += static_cast<char>(code);
                    } else if (code < 0x800) {
                        *out += static_cast<char>(0xC0 | (code >> 6));
                        *out += static_cast<char>(0x80 | (code & 0x3F));
                    } else {
                        *out += static_cast<char>(0xE0 | (code >> 12));
                        *out += static_cast<char>(0x80 | ((code >> 6) & 0x3F));
                        *out += static_cast<char>(0x80 | (code & 0x3F));
                    }
                    break;
                }
                default: return fail("invalid escape in string");
            }
        }
        return fail("unterminated string");
    }
    bool array(JsonValue* out, int depth) {
        out->type = JsonValue::Type::kArray;
        ++pos_;
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == ']') {
            ++pos_;
            return true;
        }
        while (true) {
            out->array.emplace_back();
            skip_space();
            if (!value(&out->array.back(), depth + 1)) return false;
            skip_space();
            if (pos_ >= text_.size()) return fail("unterminated array");
            if (text_[pos_] == ',') {
                ++pos_;
                continue;
            }
            if (text_[pos_] == ']') {
                ++pos_;
                return true;
            }
            return fail("expected ',' or ']' in array");
        }
    }
    bool object(JsonValue* out, int depth) {
        out->type = JsonValue::Type::kObject;
        ++pos_;
        skip_space();
        if (pos_ < text_.size() && text_[pos_] == '}') {
            ++pos_;
            return true;
        }
        while (true) {
            skip_space();
            if (pos_ >= text_.size() || text_[pos_] != '"') return fail("expected a string key in object");
            std::string key;
            if (!string(&key)) return false;
            skip_space();
            if (pos_ >= text_.size() || text_[pos_] != ':') return fail("expected ':' after object key");
            ++pos_;
            skip_space();
            if (!value(&out->object[key], depth + 1)) return false;
            skip_space();
            if (pos_ >= text_.size()) return fail("unterminated object");
            if (text_[pos_] == ',') {
                ++pos_;
                continue;
            }
            if (text_[pos_] == '}') {
                ++pos_;
                return true;
            }
            return fail("expected ',' or '}' in object");
        }
    }

    const std::string& text_;
    size_t pos_ = 0;
    std::string error_;
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

}  // namespace wideattn
