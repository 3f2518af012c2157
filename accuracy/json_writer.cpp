// json_writer.cpp - see json_writer.h.
#include "accuracy/json_writer.h"

#include <cmath>
#include <cstdio>

namespace wideattn::accuracy {

std::string JsonWriter::escape(const std::string& text) {
    std::string out = "\"";
    for (unsigned char c : text) {
        switch (c) {
            case '"': out += "\\\""; break;
            case '\\': out += "\\\\"; break;
            case '\b': out += "\\b"; break;
            case '\f': out += "\\f"; break;
            case '\n': out += "\\n"; break;
            case '\r': out += "\\r"; break;
            case '\t': out += "\\t"; break;
            default:
                if (c < 0x20) {
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
