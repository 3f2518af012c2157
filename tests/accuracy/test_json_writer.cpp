// test_json_writer.cpp - JSON output: structure, escaping (control characters, invalid UTF-8),
// non-finite numbers.
#include <doctest/doctest.h>

#include <cstdint>
#include <limits>

#include "accuracy/json_writer.h"

using namespace wideattn::accuracy;

TEST_CASE("JSON writer: nested objects and arrays with commas in the right places") {
    JsonWriter json;
    json.begin_object();
    json.key("a");
    json.value(int64_t{1});
    json.key("list");
    json.begin_array();
    json.value(true);
    json.value("x");
    json.begin_object();
    json.end_object();
    json.end_array();
    json.key("half");
    json.value(0.5);
    json.end_object();
    CHECK(json.text() == R"({"a":1,"list":[true,"x",{}],"half":0.5})");
}

TEST_CASE("JSON writer: string escaping and non-finite numbers") {
    CHECK(JsonWriter::escape("a\"b\\c\n\t\x01") == R"("a\"b\\c\n\t\u0001")");
    CHECK(JsonWriter::escape("Δp") == "\"Δp\"");
    JsonWriter json;
    json.begin_array();
    json.value(std::numeric_limits<double>::infinity());
    json.value(-std::numeric_limits<double>::infinity());
    json.value(std::numeric_limits<double>::quiet_NaN());
    json.value(0.1);
    json.end_array();
    CHECK(json.text() == R"(["inf","-inf","nan",0.10000000000000001])");
}

TEST_CASE("JSON writer: bytes that are not UTF-8 become \\ufffd, one per byte; valid UTF-8 is kept") {
    const std::string r = "\\ufffd";
    CHECK(JsonWriter::escape("a\xff" "b") == "\"a" + r + "b\"");                      // not a lead byte
    CHECK(JsonWriter::escape("\x80") == "\"" + r + "\"");                              // stray continuation
    CHECK(JsonWriter::escape("\xc0\xaf") == "\"" + r + r + "\"");                      // overlong '/'
    CHECK(JsonWriter::escape("\xe0\x80\xaf") == "\"" + r + r + r + "\"");              // overlong, 3 bytes
    CHECK(JsonWriter::escape("\xed\xa0\x80") == "\"" + r + r + r + "\"");              // surrogate U+D800
    CHECK(JsonWriter::escape("\xf4\x90\x80\x80") == "\"" + r + r + r + r + "\"");      // above U+10FFFF
    CHECK(JsonWriter::escape("x\xe2\x82") == "\"x" + r + r + "\"");                    // truncated at the end
    CHECK(JsonWriter::escape("\xe2\x82" "A") == "\"" + r + r + "A\"");                 // cut by ASCII
    // Valid 2-, 3- and 4-byte sequences, the largest code point and U+FFFF pass unchanged.
    const std::string valid = "\xc3\xa9 \xe2\x82\xac \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf \xef\xbf\xbf";
    CHECK(JsonWriter::escape(valid) == "\"" + valid + "\"");
}
