// json.h - a small, strict JSON reader for manifest.json (no external dependency).
// Parses into a tree of JsonValue; errors carry the byte offset of the problem.
#pragma once

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace wideattn {

struct JsonValue {
    enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
    Type type = Type::kNull;
    bool boolean = false;
    double number = 0.0;
    std::string string;
    std::vector<JsonValue> array;
    std::map<std::string, JsonValue> object;

    // Member lookup for objects; nullptr when absent or when this is not an object.
    const JsonValue* find(const std::string& key) const;
};

// Parses `text`; on failure returns false and sets *error to "offset N: what".
bool parse_json(const std::string& text, JsonValue* out, std::string* error);

}  // namespace wideattn
