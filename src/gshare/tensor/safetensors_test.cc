#include "gshare/tensor/safetensors.h"

#include <unistd.h>

#include <array>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gshare/tensor/half.h"

namespace gshare {
namespace {

std::vector<std::byte> Bytes(std::string_view text) {
  std::vector<std::byte> out;
  for (char c : text) out.push_back(static_cast<std::byte>(c));
  return out;
}

// A file from its header text (padded with `pad` spaces) and data buffer.
std::vector<std::byte> File(std::string_view header, std::string_view data, std::size_t pad = 0) {
  std::uint64_t length = header.size() + pad;
  std::string out;
  for (int i = 0; i < 8; ++i) {
    out.push_back(static_cast<char>(length & 0xff));
    length >>= 8;
  }
  out.append(header);
  out.append(pad, ' ');
  out.append(data);
  return Bytes(out);
}

std::string ErrorOf(std::string_view header, std::string_view data) {
  const auto parsed = ParseSafetensors(File(header, data));
  if (parsed.ok()) return "OK";
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  return parsed.status().message();
}

bool Contains(const std::string& text, std::string_view part) {
  return text.find(part) != std::string::npos;
}

// Written by hand from the format description: two tensors and metadata, the header padded from
// 140 to 144 bytes.
const std::string kGoldenHeader =
    R"({"__metadata__":{"format":"pt"},"a":{"data_offsets":[0,8],"dtype":"F32","shape":[2]},)"
    R"("b":{"data_offsets":[8,11],"dtype":"U8","shape":[1,3]}}    )";
const std::string kGolden = std::string("\x90\0\0\0\0\0\0\0", 8) + kGoldenHeader +
                            std::string("\x00\x00\x80\x3f\x00\x00\x00\xc0\x01\x02\x03", 11);

std::vector<Tensor> GoldenTensors() {
  return {*Tensor::FromValues<float>("a", {2}, std::vector<float>{1.0f, -2.0f}),
          *Tensor::FromValues<std::uint8_t>("b", {1, 3}, std::vector<std::uint8_t>{1, 2, 3})};
}

TEST(SafetensorsTest, WriterProducesTheGoldenBytes) {
  ASSERT_EQ(kGoldenHeader.size(), 144u);
  const auto tensors = GoldenTensors();
  // Given out of order: the writer sorts by name.
  const std::vector<Tensor> reversed = {tensors[1], tensors[0]};
  auto bytes = SerializeSafetensors(reversed, {{"format", "pt"}});
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_EQ(*bytes, Bytes(kGolden));
}

TEST(SafetensorsTest, ReaderReadsTheGoldenBytes) {
  auto file = ParseSafetensors(Bytes(kGolden));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  EXPECT_EQ(file->tensors, GoldenTensors());
  EXPECT_EQ(file->metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  ASSERT_NE(file->Find("b"), nullptr);
  EXPECT_EQ(file->Find("b")->shape(), (std::vector<std::int64_t>{1, 3}));
  EXPECT_EQ(file->Find("c"), nullptr);
}

TEST(SafetensorsTest, ReaderAcceptsAnyFieldAndBufferOrder) {
  // b's data comes first in the buffer; fields in another order; no metadata; no padding.
  const auto file =
      ParseSafetensors(File(R"({"a":{"shape":[2],"dtype":"I16","data_offsets":[1,5]},)"
                            R"("b":{"dtype":"BOOL","data_offsets":[0,1],"shape":[]}})",
                            std::string("\x01\x07\x00\xff\xff", 5)));
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  ASSERT_EQ(file->tensors.size(), 2u);
  EXPECT_EQ(file->tensors[0].name(), "a");
  const auto a = *file->tensors[0].Values<std::int16_t>();
  EXPECT_EQ(a[0], 7);
  EXPECT_EQ(a[1], -1);
  EXPECT_EQ((*file->tensors[1].Values<bool>())[0], true);
  EXPECT_TRUE(file->metadata.empty());
}

TEST(SafetensorsTest, EveryDtypeRoundTrips) {
  std::vector<Tensor> tensors;
  tensors.push_back(*Tensor::FromValues<bool>("bool", {2}, std::array<bool, 2>{true, false}));
  tensors.push_back(*Tensor::FromValues<std::uint8_t>("u8", {1}, std::vector<std::uint8_t>{255}));
  tensors.push_back(*Tensor::FromValues<std::int8_t>("i8", {1}, std::vector<std::int8_t>{-128}));
  tensors.push_back(
      *Tensor::FromValues<std::uint16_t>("u16", {1}, std::vector<std::uint16_t>{65535}));
  tensors.push_back(
      *Tensor::FromValues<std::int16_t>("i16", {1}, std::vector<std::int16_t>{-32768}));
  tensors.push_back(
      *Tensor::FromValues<std::uint32_t>("u32", {1}, std::vector<std::uint32_t>{4000000000u}));
  tensors.push_back(*Tensor::FromValues<std::int32_t>("i32", {1}, std::vector<std::int32_t>{-7}));
  tensors.push_back(
      *Tensor::FromValues<std::uint64_t>("u64", {1}, std::vector<std::uint64_t>{~0ull}));
  tensors.push_back(
      *Tensor::FromValues<std::int64_t>("i64", {1, 1}, std::vector<std::int64_t>{-(1LL << 62)}));
  tensors.push_back(
      *Tensor::FromValues<Half>("f16", {2}, std::vector<Half>{*DoubleToHalf(0.5), Half{0x7c00}}));
  tensors.push_back(*Tensor::FromValues<float>("f32", {0, 4}, std::vector<float>{}));
  tensors.push_back(*Tensor::FromValues<double>("f64", {}, std::vector<double>{3.25}));
  const std::map<std::string, std::string> metadata = {{"k", "v"}, {"empty", ""}};
  const std::string path =
      (std::filesystem::temp_directory_path() / ("gshare_st_" + std::to_string(::getpid())))
          .string();
  ASSERT_TRUE(WriteSafetensorsFile(path, tensors, metadata).ok());
  auto file = ReadSafetensorsFile(path);
  std::filesystem::remove(path);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  std::sort(tensors.begin(), tensors.end(),
            [](const Tensor& x, const Tensor& y) { return x.name() < y.name(); });
  EXPECT_EQ(file->tensors, tensors);
  EXPECT_EQ(file->metadata, metadata);
  const auto bytes = *SerializeSafetensors(tensors, metadata);
  std::uint64_t header = 0;
  for (int i = 7; i >= 0; --i) header = header << 8 | std::to_integer<std::uint64_t>(bytes[i]);
  EXPECT_EQ((8 + header) % 8, 0u);  // the data buffer starts 8-byte aligned
}

TEST(SafetensorsTest, WriterRefusesWhatTheFormatCannotHold) {
  const auto strings = *Tensor::FromStrings("s", {1}, {"x"});
  EXPECT_FALSE(SerializeSafetensors(std::vector<Tensor>{strings}).ok());
  const auto a = GoldenTensors()[0];
  EXPECT_FALSE(SerializeSafetensors(std::vector<Tensor>{a, a}).ok());
  EXPECT_FALSE(SerializeSafetensors(std::vector<Tensor>{Tensor(a).Renamed("")}).ok());
  EXPECT_FALSE(SerializeSafetensors(std::vector<Tensor>{Tensor(a).Renamed("__metadata__")}).ok());
  EXPECT_FALSE(SerializeSafetensors(std::vector<Tensor>{Tensor(a).Renamed("\xff")}).ok());
  EXPECT_TRUE(SerializeSafetensors(std::vector<Tensor>{}).ok());
}

TEST(SafetensorsTest, MissingFileIsNotFound) {
  const auto file = ReadSafetensorsFile("/nonexistent/gshare/model.safetensors");
  ASSERT_FALSE(file.ok());
  EXPECT_EQ(file.status().code(), StatusCode::kNotFound);
}

TEST(SafetensorsTest, MalformedFramesAreRefused) {
  EXPECT_TRUE(Contains(ParseSafetensors(Bytes("\x02\0\0")).status().message(), "shorter"));
  EXPECT_TRUE(Contains(
      ParseSafetensors(Bytes(std::string("\xff\xff\xff\xff\0\0\0\0{}", 10))).status().message(),
      "exceeds the limit"));
  EXPECT_TRUE(
      Contains(ParseSafetensors(Bytes(std::string("\x10\0\0\0\0\0\0\0{}", 10))).status().message(),
               "past the end"));
  EXPECT_TRUE(Contains(ErrorOf("{", ""), "not valid JSON"));
  EXPECT_TRUE(Contains(ErrorOf("[]", ""), "not a JSON object"));
  EXPECT_TRUE(Contains(ErrorOf(R"({"a":{"dtype":"U8","shape":[[[1]]],"data_offsets":[0,1]}})", "x"),
                       "nests deeper"));
  EXPECT_EQ(ErrorOf("{}", ""), "OK");
  EXPECT_EQ(ErrorOf("{}", "x"), "safetensors data buffer has 1 bytes but the tensors cover 0");
}

TEST(SafetensorsTest, MalformedEntriesNameTheTensor) {
  EXPECT_EQ(ErrorOf(R"({"w":{"dtype":"BF16","shape":[1],"data_offsets":[0,2]}})", "xx"),
            "tensor 'w': dtype 'BF16' is not supported (supported: BOOL, U8, I8, U16, I16, U32, "
            "I32, U64, I64, F16, F32, F64)");
  EXPECT_EQ(ErrorOf(R"({"w":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", "xxxx"),
            "tensor 'w': F32 of shape [2] needs 8 bytes, data_offsets [0, 4) hold 4");
  EXPECT_EQ(ErrorOf(R"({"w":{"dtype":"U8","shape":[2],"data_offsets":[0,2]}})", "x"),
            "tensor 'w': data_offsets [0, 2) run past the data buffer of 1 bytes");
  EXPECT_EQ(ErrorOf(R"({"w":{"dtype":"U8","shape":[-2],"data_offsets":[0,2]}})", "xx"),
            "tensor 'w': a shape dimension is not a non-negative integer");
  EXPECT_EQ(ErrorOf(R"({"w":{"dtype":"U8","shape":[1.5],"data_offsets":[0,2]}})", "xx"),
            "tensor 'w': a shape dimension is not a non-negative integer");
  EXPECT_EQ(ErrorOf(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[1,0]}})", "x"),
            "tensor 'w': data_offsets [1, 0) end before they begin");
  EXPECT_EQ(ErrorOf(R"({"w":{"dtype":"U8","shape":[1]}})", "x"),
            "tensor 'w': 'data_offsets' is missing or not [begin, end]");
  EXPECT_EQ(ErrorOf(R"({"w":{"shape":[1],"data_offsets":[0,1]}})", "x"),
            "tensor 'w': 'dtype' is missing or not a string");
  EXPECT_EQ(ErrorOf(R"({"w":{"dtype":"U8","shape":[1],"data_offsets":[0,1],"x":1}})", "x"),
            "tensor 'w': unknown field 'x'");
  EXPECT_EQ(ErrorOf(R"({"w":[]})", ""), "tensor 'w': entry is not an object");
  EXPECT_EQ(ErrorOf(R"({"w":{"dtype":"U8","shape":[4294967296,4294967296],)"
                    R"("data_offsets":[0,1]}})",
                    "x"),
            "tensor 'w': shape [4294967296,4294967296] has too many elements");
  EXPECT_EQ(ErrorOf(R"({"w":{"dtype":"BOOL","shape":[1],"data_offsets":[0,1]}})", "\x05"),
            "tensor 'w': a BOOL element is neither 0 nor 1");
}

TEST(SafetensorsTest, RangesMustTileTheBuffer) {
  EXPECT_EQ(ErrorOf(R"({"a":{"dtype":"U8","shape":[2],"data_offsets":[0,2]},)"
                    R"("b":{"dtype":"U8","shape":[2],"data_offsets":[1,3]}})",
                    "xxx"),
            "tensor 'b': data_offsets [1, 3) overlap another tensor");
  EXPECT_EQ(ErrorOf(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})", "xx"),
            "tensor 'a': data_offsets [1, 2) leave a gap before them");
  EXPECT_EQ(ErrorOf(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "xx"),
            "safetensors data buffer has 2 bytes but the tensors cover 1");
  // Empty tensors may sit anywhere the tiling allows.
  EXPECT_EQ(ErrorOf(R"({"a":{"dtype":"U8","shape":[0],"data_offsets":[0,0]},)"
                    R"("b":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                    R"("c":{"dtype":"F64","shape":[0,3],"data_offsets":[1,1]}})",
                    "x"),
            "OK");
}

TEST(SafetensorsTest, DuplicatesAndMetadata) {
  EXPECT_EQ(ErrorOf(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                    R"("a":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                    "xx"),
            "safetensors header has a duplicate name 'a'");
  EXPECT_EQ(ErrorOf(R"({"a":{"dtype":"U8","dtype":"I8","shape":[1],"data_offsets":[0,1]}})", "x"),
            "safetensors header has a duplicate field 'dtype'");
  // The same field name in two entries is no duplicate.
  EXPECT_EQ(ErrorOf(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},)"
                    R"("b":{"dtype":"U8","shape":[1],"data_offsets":[1,2]}})",
                    "xx"),
            "OK");
  EXPECT_EQ(ErrorOf(R"({"__metadata__":{"k":1}})", ""), "__metadata__ value 'k' is not a string");
  EXPECT_EQ(ErrorOf(R"({"__metadata__":[]})", ""), "__metadata__ is not an object");
  EXPECT_EQ(ErrorOf(R"({"":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x"),
            "safetensors header has a tensor with an empty name");
}

}  // namespace
}  // namespace gshare
