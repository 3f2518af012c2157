// test_json.cpp - the manifest's JSON reader: values, escapes, and located errors.
#include <doctest/doctest.h>

#include "dispatch/json.h"

using wideattn::JsonValue;
using wideattn::parse_json;

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
                         "[\"\x01\"]", "-"};
    for (const char* text : bad) {
        JsonValue v;
        std::string err;
        CAPTURE(text);
        CHECK_FALSE(parse_json(text, &v, &err));
        CHECK(err.find("offset") == 0);
    }
}

TEST_CASE("json: nesting limit stops runaway recursion") {
    JsonValue v;
    std::string err;
    CHECK_FALSE(parse_json(std::string(10000, '['), &v, &err));
    CHECK(err.find("nesting too deep") != std::string::npos);
}
