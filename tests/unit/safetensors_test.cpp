// The safetensors header parser on hostile input (checkpoint/safetensors.h): every rule of
// the format is refused with a CheckpointError that names the file and the problem.
#include "zerotrain/checkpoint/safetensors.h"

#include <gtest/gtest.h>

#include <string>

#include "zerotrain/core/error.h"

namespace zerotrain::checkpoint {
namespace {

constexpr const char* kFile = "dir/rank_00000.safetensors";

// The message parse_safetensors_header throws for `json` in a file whose data section is
// `data_bytes` long, or "accepted".
std::string problem(const std::string& json, int64_t data_bytes) {
  try {
    parse_safetensors_header(json, 8 + static_cast<int64_t>(json.size()) + data_bytes, kFile);
  } catch (const CheckpointError& e) {
    return e.what();
  }
  return "accepted";
}

std::string entry(const std::string& name, const std::string& dtype, const std::string& shape, int64_t begin,
                  int64_t end) {
  return "\"" + name + "\": {\"dtype\": \"" + dtype + "\", \"shape\": " + shape + ", \"data_offsets\": [" +
         std::to_string(begin) + ", " + std::to_string(end) + "]}";
}

#define EXPECT_PROBLEM(json, data_bytes, needle)                                  \
  do {                                                                            \
    const std::string message = problem(json, data_bytes);                        \
    EXPECT_NE(message.find(needle), std::string::npos) << message;                \
    EXPECT_NE(message.find(kFile), std::string::npos) << "no file name: " << message; \
  } while (0)

TEST(Safetensors, EncodedHeaderParsesBack) {
  std::vector<TensorEntry> tensors{{"a", Dtype::kI64, {2}}, {"b", Dtype::kF32, {3, 2}}, {"c", Dtype::kBF16, {}}};
  const std::string encoded = encode_safetensors_header(tensors, {{"format", "pt"}});
  ASSERT_EQ(encoded.size() % 8, 0u);   // the data section starts 8-aligned
  const int64_t data = 16 + 24 + 2;
  const SafetensorsHeader h = parse_safetensors_header(std::string_view(encoded).substr(8),
                                                       static_cast<int64_t>(encoded.size()) + data, kFile);
  ASSERT_EQ(h.tensors.size(), 3u);
  EXPECT_EQ(h.data_offset, static_cast<int64_t>(encoded.size()));
  EXPECT_EQ(h.metadata.at("format"), "pt");
  const TensorEntry* b = h.find("b");
  ASSERT_NE(b, nullptr);
  EXPECT_EQ(b->shape, (std::vector<int64_t>{3, 2}));
  EXPECT_EQ(b->begin, 16);
  EXPECT_EQ(b->end, 40);
  EXPECT_EQ(h.find("c")->numel(), 1);   // a scalar
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | static_cast<unsigned char>(encoded[static_cast<size_t>(i)]);
  EXPECT_EQ(n + 8, encoded.size());
}

TEST(Safetensors, UnknownDtype) {
  EXPECT_PROBLEM("{" + entry("a", "F8", "[1]", 0, 1) + "}", 1, "tensor \"a\": unknown dtype \"F8\"");
}

TEST(Safetensors, ShapeAndOffsetsDisagree) {
  EXPECT_PROBLEM("{" + entry("a", "F32", "[2]", 0, 4) + "}", 4, "shape and dtype make 8 bytes but data_offsets span 4");
}

TEST(Safetensors, ShapeWhoseByteSizeOverflows) {
  EXPECT_PROBLEM("{" + entry("a", "F64", "[4294967296, 4294967296]", 0, 8) + "}", 8, "byte size overflows");
}

TEST(Safetensors, OverlappingTensors) {
  EXPECT_PROBLEM("{" + entry("a", "F32", "[2]", 0, 8) + ", " + entry("b", "F32", "[2]", 4, 12) + "}", 12,
                 "tensor \"b\" overlaps the one before it");
}

TEST(Safetensors, HoleBetweenTensors) {
  EXPECT_PROBLEM("{" + entry("a", "F32", "[1]", 0, 4) + ", " + entry("b", "F32", "[1]", 8, 12) + "}", 12,
                 "bytes 4..8 of its data belong to no tensor");
}

TEST(Safetensors, BytesAfterTheLastTensor) {
  EXPECT_PROBLEM("{" + entry("a", "F32", "[1]", 0, 4) + "}", 10, "its data section is 10 bytes but its tensors cover 4");
}

TEST(Safetensors, TensorRunsPastTheEndOfTheFile) {
  EXPECT_PROBLEM("{" + entry("a", "F32", "[4]", 0, 16) + "}", 8, "tensor \"a\" runs past the end of the file");
}

TEST(Safetensors, OffsetsThatEndBeforeTheyBegin) {
  EXPECT_PROBLEM("{" + entry("a", "F32", "[0]", 8, 4) + "}", 8, "data_offsets end before they begin");
}

TEST(Safetensors, NegativeOrHugeNumbers) {
  EXPECT_PROBLEM(R"({"a": {"dtype": "F32", "shape": [-1], "data_offsets": [0, 4]}})", 4, "must be a non-negative integer");
  EXPECT_PROBLEM(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 18446744073709551615]}})", 4,
                 "out of range");
}

TEST(Safetensors, HeaderLongerThanTheFormatAllows) {
  std::string json(static_cast<size_t>(kMaxHeaderBytes) + 1, ' ');
  json.front() = '{';
  json.back() = '}';
  EXPECT_PROBLEM(json, 0, "more than the format's limit");
}

TEST(Safetensors, HeaderRunsPastTheEndOfTheFile) {
  const std::string json = "{" + entry("a", "F32", "[1]", 0, 4) + "}";
  try {
    parse_safetensors_header(json, 8 + static_cast<int64_t>(json.size()) - 1, kFile);
    ADD_FAILURE() << "accepted";
  } catch (const CheckpointError& e) {
    EXPECT_NE(std::string(e.what()).find("its header runs past the end of the file"), std::string::npos) << e.what();
  }
}

TEST(Safetensors, DuplicateTensorName) {
  EXPECT_PROBLEM("{" + entry("a", "F32", "[1]", 0, 4) + ", " + entry("a", "F32", "[1]", 4, 8) + "}", 8,
                 "duplicate keys (JSON keeps only one of each; remove the extra): a");
}

TEST(Safetensors, NestingTooDeep) {
  std::string json = "{\"__metadata__\": ";
  for (int i = 0; i < 20; ++i) json += "{\"k\": ";
  json += "1";
  for (int i = 0; i < 21; ++i) json += "}";
  EXPECT_PROBLEM(json, 0, "nested deeper than 8 levels");
  // Far deeper than the stack would survive if the parser recursed without a bound.
  EXPECT_PROBLEM("{\"a\": " + std::string(200000, '[') + std::string(200000, ']') + "}", 0, "nested deeper than 8 levels");
}

TEST(Safetensors, HeaderNotStartingWithABrace) {
  EXPECT_PROBLEM(" {" + entry("a", "F32", "[1]", 0, 4) + "}", 4, "does not start with '{'");
  EXPECT_PROBLEM("[1, 2]", 0, "does not start with '{'");
  EXPECT_PROBLEM("", 0, "does not start with '{'");
}

TEST(Safetensors, NotJson) {
  EXPECT_PROBLEM("{\"a\": ", 0, "its header is not JSON");
  EXPECT_PROBLEM(std::string("{\"a\xff\": 1}"), 0, "its header is not JSON");
}

TEST(Safetensors, MalformedEntries) {
  EXPECT_PROBLEM(R"({"a": [1]})", 0, "tensor \"a\" is not an object");
  EXPECT_PROBLEM(R"({"a": {"dtype": "F32", "shape": [1]}})", 0, "tensor \"a\" has no data_offsets");
  EXPECT_PROBLEM(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0, 4], "x": 1}})", 4, "unknown field \"x\"");
  EXPECT_PROBLEM(R"({"a": {"dtype": 4, "shape": [1], "data_offsets": [0, 4]}})", 4, "dtype is not a string");
  EXPECT_PROBLEM(R"({"a": {"dtype": "F32", "shape": [1], "data_offsets": [0]}})", 4, "data_offsets is not [begin, end]");
  EXPECT_PROBLEM(R"({"__metadata__": {"format": 1}})", 0, "__metadata__ value of \"format\" is not a string");
  EXPECT_PROBLEM(R"({"__metadata__": [1]})", 0, "__metadata__ is not an object");
}

}  // namespace
}  // namespace zerotrain::checkpoint
