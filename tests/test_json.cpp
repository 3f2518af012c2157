// test_json.cpp - the manifest's JSON reader: values, escapes, located errors, and everything
// the strict reader refuses (duplicate keys, numbers outside the RFC 8259 grammar or a double's
// range, bad escapes and UTF-8, nesting beyond the limit).
#include <doctest/doctest.h>

#include <string>

#include "dispatch/json.h"

using wideattn::JsonValue;
using wideattn::parse_json;

namespace {

// The error parse_json gives `text` ("" when it parses).
std::string json_error(const std::string& text) {
    JsonValue v;
    std::string err;
    return parse_json(text, &v, &err) ? std::string() : err;
}

// The single number of `text`, which must parse.
JsonValue parsed_number(const std::string& text) {
    JsonValue v;
    std::string err;
    REQUIRE_MESSAGE(parse_json(text, &v, &err), err);
    REQUIRE(v.type == JsonValue::Type::kNumber);
    return v;
}

}  // namespace

TEST_CASE("json: parses nested values") {
    JsonValue v;
    std::string err;
    REQUIRE(parse_json(R"({"a": [1, 2.5, -3e2], "b": {"c": "x\"y\\n\u00e9"}, "t": true, "n": null})", &v, &err));
    REQUIRE(v.type == JsonValue::Type::kObject);
    const JsonValue* a = v.find("a");
    REQUIRE(a);
    REQUIRE(a->array.size() == 3);
    CHECK(a->array[1].number == 2.5);
    CHECK(a->array[2].number == -300.0);
    CHECK(v.find("b")->find("c")->string == "x\"y\\n\xc3\xa9");
    CHECK(v.find("t")->boolean);
    CHECK(v.find("n")->type == JsonValue::Type::kNull);
    CHECK(v.find("missing") == nullptr);
}

TEST_CASE("json: rejects malformed input with an offset") {
    const char* bad[] = {"", "{", "[1,]", "{\"a\" 1}", "{\"a\": 1} x", "\"unterminated", "[1 2]", "{\"a\": tru}",
                         "[\"\x01\"]", "-", "\v1", "[1,,2]", "{,}", "\"\\q\""};
    for (const char* text : bad) {
        CAPTURE(text);
        CHECK(json_error(text).find("offset") == 0);
    }
    CHECK(json_error(" \t\r\n[ 1 ,\n2 ] \n").empty());
}

TEST_CASE("json: a duplicate key is refused with the key and its offset") {
    CHECK(json_error(R"({"a": 1, "a": 2})") == "offset 9: duplicate key 'a' in object");
    // Also inside a nested object, and when the values are strings or arrays (which a merging
    // reader would concatenate).
    CHECK(json_error(R"({"k": [{"name": "x", "name": "x"}]})") == "offset 21: duplicate key 'name' in object");
    CHECK(json_error(R"({"k": [1], "k": [2]})").find("duplicate key 'k'") != std::string::npos);
    // Keys that differ only by an escape are the same key once decoded.
    CHECK(json_error(R"({"ab": 1, "a\u0062": 2})").find("duplicate key 'ab'") != std::string::npos);
    // The same key in two different objects is fine.
    CHECK(json_error(R"([{"a": 1}, {"a": 2}])").empty());
}

TEST_CASE("json: numbers follow the RFC 8259 grammar") {
    struct Bad {
        const char* text;
        const char* expected;
    };
    const Bad bad[] = {
        {"01", "leading zero"},          {"-01", "leading zero"},
        {"00", "leading zero"},          {"+1", "expected a value"},
        {"NaN", "expected a value"},     {"Infinity", "expected a value"},
        {"-Infinity", "a digit must follow '-'"}, {"-NaN", "a digit must follow '-'"},
        {"0x10", "trailing characters"}, {"1.", "a digit must follow '.'"},
        {".5", "expected a value"},      {"1e", "the exponent has no digits"},
        {"1e+", "the exponent has no digits"}, {"1.5x", "trailing characters"},
        {"--1", "a digit must follow '-'"},    {"1..2", "a digit must follow '.'"},
        {"- 1", "a digit must follow '-'"},    {"[1e400]", "number '1e400' is outside the range of a double"},
        {"-1e400", "outside the range of a double"}, {"[1, 2x]", "expected ',' or ']' in array"},
    };
    for (const Bad& b : bad) {
        CAPTURE(b.text);
        const std::string err = json_error(b.text);
        CHECK_MESSAGE(err.find(b.expected) != std::string::npos, err);
        CHECK(err.find("offset") == 0);
    }
    CHECK(json_error("[0, -0, 1.5e+3, 2E-2, 123, 0.0]").empty());
}

TEST_CASE("json: integers are kept exactly, other numbers as doubles") {
    const JsonValue small = parsed_number("123");
    CHECK(small.is_integer);
    CHECK(small.integer == 123);
    CHECK(small.literal == "123");
    const JsonValue max = parsed_number("9223372036854775807");
    CHECK(max.is_integer);
    CHECK(max.integer == INT64_MAX);
    const JsonValue min = parsed_number("-9223372036854775808");
    CHECK(min.is_integer);
    CHECK(min.integer == INT64_MIN);
    // Beyond int64, or written with a fraction or an exponent: a number, not an integer.
    for (const char* text : {"9223372036854775808", "1.0", "1e2", "1e300", "-0.5"}) {
        CAPTURE(text);
        const JsonValue v = parsed_number(text);
        CHECK_FALSE(v.is_integer);
        CHECK(v.literal == text);
    }
    CHECK(parsed_number("1e300").number == 1e300);
    // 2^53 + 1 has no double; the integer keeps it.
    CHECK(parsed_number("9007199254740993").integer == 9007199254740993LL);
}

TEST_CASE("json: string escapes and UTF-8 are validated") {
    JsonValue v;
    std::string err;
    REQUIRE(parse_json(R"(["\ud83d\ude00", "\u00e9\u20ac", "\u0041", "é€😀"])", &v, &err));
    CHECK(v.array[0].string == "\xf0\x9f\x98\x80");
    CHECK(v.array[1].string == "\xc3\xa9\xe2\x82\xac");
    CHECK(v.array[2].string == "A");
    CHECK(v.array[3].string == "\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80");
    struct Bad {
        std::string text;
        const char* expected;
    };
    const Bad bad[] = {
        {R"("\ud83d")", "high surrogate without a low surrogate"},
        {R"("\ud83dx")", "high surrogate without a low surrogate"},
        {R"("\ud83d\u0041")", "high surrogate without a low surrogate"},
        {R"("\ude00")", "low surrogate without a high surrogate"},
        {R"("\u12")", "truncated \\u escape"},
        {R"("\u12G4")", "four hex digits"},
        {R"("\u+123")", "four hex digits"},
        {R"("\u 123")", "four hex digits"},
        {R"("\u0000")", "\\u0000 (NUL) is not allowed"},
        {"\"\xc0\xaf\"", "invalid UTF-8"},          // overlong '/'
        {"\"\xe0\x80\xaf\"", "invalid UTF-8"},      // overlong, three bytes
        {"\"\xed\xa0\x80\"", "invalid UTF-8"},      // an encoded surrogate
        {"\"\xf4\x90\x80\x80\"", "invalid UTF-8"},  // above U+10FFFF
        {"\"\xf5\x80\x80\x80\"", "invalid UTF-8"},
        {"\"\xe2\x82\"", "invalid UTF-8"},          // truncated sequence
        {"\"\x80\"", "invalid UTF-8"},              // a lone continuation byte
        {"\"\xff\"", "invalid UTF-8"},
    };
    for (const Bad& b : bad) {
        CAPTURE(b.text);
        const std::string e = json_error(b.text);
        CHECK_MESSAGE(e.find(b.expected) != std::string::npos, e);
    }
}

TEST_CASE("json: nesting limit stops runaway recursion") {
    CHECK(json_error(std::string(10000, '[')).find("nesting too deep") != std::string::npos);
    const auto nested = [](int levels) { return std::string(levels, '[') + std::string(levels, ']'); };
    CHECK(json_error(nested(wideattn::kJsonMaxDepth)).empty());
    CHECK(json_error(nested(wideattn::kJsonMaxDepth + 1)) ==
          "offset 64: nesting too deep (more than 64 levels)");
    std::string objects;
    for (int i = 0; i <= wideattn::kJsonMaxDepth; ++i) objects += "{\"a\":";
    CHECK(json_error(objects + "1").find("nesting too deep") != std::string::npos);
}

TEST_CASE("json: error text quotes keys safely") {
    CHECK(wideattn::json_quoted("name") == "'name'");
    CHECK(wideattn::json_quoted("a\nb'\x01") == "'a\\x0ab\\x27\\x01'");
    CHECK(wideattn::json_quoted(std::string(100, 'x'), 4) == "'xxxx...'");
}
