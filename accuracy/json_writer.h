// json_writer.h - a minimal JSON writer for the reports (no external JSON library): objects,
// arrays, strings with proper escaping, numbers with round-trip precision. Non-finite numbers,
// which JSON cannot hold, are written as the strings "inf", "-inf" and "nan". Strings are
// written as UTF-8: well-formed sequences as they are, every byte that is not part of one (file
// names and attributes may hold any bytes) as \ufffd, so the document is always valid JSON.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace wideattn::accuracy {

class JsonWriter {
public:
    void begin_object();
    void end_object();
    void begin_array();
    void end_array();
    // Inside an object, call key() before each value.
    void key(const std::string& name);
    void value(const std::string& text);
    void value(const char* text);
    void value(double number);
    void value(int64_t number);
    void value(bool flag);

    // The document so far (complete once every begin has its end).
    const std::string& text() const { return out_; }

    static std::string escape(const std::string& text);  // quoted JSON string

private:
    void before_value();

    std::string out_;
    std::vector<bool> first_in_level_;  // whether the current object/array is still empty
    bool after_key_ = false;
};

}  // namespace wideattn::accuracy
