// test_json_writer.cpp - JSON output: structure, escaping, non-finite numbers.
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
