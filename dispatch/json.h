// json.h - a small, strict JSON reader for manifest.json (no external dependency).
// Parses RFC 8259 JSON into a tree of JsonValue and refuses what the RFC leaves open or a
// lenient reader would guess at: duplicate object keys, numbers outside the RFC grammar (leading
// zeros, '+', hex, NaN, Infinity) or outside the range of a double, invalid UTF-8, unpaired
// \u surrogates, \u0000, and nesting deeper than kJsonMaxDepth. Errors carry the byte offset.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace wideattn {

// Arrays and objects nested deeper than this are refused (the manifest needs 3 levels).
constexpr int kJsonMaxDepth = 64;

struct JsonValue {
    enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
    Type type = Type::kNull;
    bool boolean = false;
    double number = 0.0;      // every number, as the nearest double
    bool is_integer = false;  // a number written without fraction or exponent that fits int64
    int64_t integer = 0;      // its exact value when is_integer
    std::string literal;      // a number as written in the text (for error messages)
    std::string string;
    std::vector<JsonValue> array;
    std::map<std::string, JsonValue> object;

    // Member lookup for objects; nullptr when absent or when this is not an object.
    const JsonValue* find(const std::string& key) const;
};

// Parses `text`; on failure returns false and sets *error to "offset N: what".
bool parse_json(const std::string& text, JsonValue* out, std::string* error);

// `text` for an error message: printable ASCII kept, other bytes as \xNN, at most `limit`
// characters of the input (then "..."), in single quotes.
std::string json_quoted(const std::string& text, size_t limit = 64);

}  // namespace wideattn
