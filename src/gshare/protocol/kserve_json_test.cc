#include "gshare/protocol/kserve_json.h"

#include <array>
#include <cstdint>
#include <limits>
#include <string>

#include <gtest/gtest.h>

#include "gshare/protocol/allocation_counter_for_test.h"
#include "gshare/tensor/half.h"

namespace gshare {
namespace {

using Json = nlohmann::json;

// The error message of parsing `body` as a request ("OK" when it parses).
std::string RequestError(const std::string& body, const ParseLimits& limits = {}) {
  const auto parsed = ParseInferRequest(body, limits);
  if (parsed.ok()) return "OK";
  EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
  return parsed.status().message();
}

// A request body with one input.
std::string OneInput(const std::string& datatype, const std::string& shape,
                     const std::string& data) {
  return R"({"inputs":[{"name":"x","datatype":")" + datatype + R"(","shape":)" + shape +
         R"(,"data":)" + data + "}]}";
}

Tensor ParseOne(const std::string& datatype, const std::string& shape, const std::string& data) {
  auto request = ParseInferRequest(OneInput(datatype, shape, data));
  EXPECT_TRUE(request.ok()) << request.status().ToString();
  if (!request.ok() || request->inputs.size() != 1) return {};
  return request->inputs[0];
}

template <typename T>
std::vector<T> ValuesOf(const Tensor& tensor) {
  const auto view = tensor.Values<T>();
  EXPECT_TRUE(view.ok()) << view.status().ToString();
  if (!view.ok()) return {};
  return std::vector<T>(view->begin(), view->end());
}

TEST(KserveJsonTest, ParsesAFullRequest) {
  const auto request = ParseInferRequest(R"({
    "id": "42", "parameters": {"priority": 3, "tag": "a"},
    "inputs": [{"name": "in0", "shape": [2, 2], "datatype": "FP32", "data": [1, 2.5, -3, 4e3],
                "parameters": {"content_type": "x"}},
               {"name": "in1", "shape": [1], "datatype": "BYTES", "data": ["h\u00e9"]}],
    "outputs": [{"name": "out", "parameters": {"binary_data": false}}],
    "unknown": true})");
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  EXPECT_EQ(request->id, "42");
  EXPECT_EQ(*request->parameters, Json({{"priority", 3}, {"tag", "a"}}));
  ASSERT_EQ(request->inputs.size(), 2u);
  EXPECT_EQ(request->inputs[0].shape(), (std::vector<std::int64_t>{2, 2}));
  EXPECT_EQ(ValuesOf<float>(request->inputs[0]), (std::vector<float>{1, 2.5, -3, 4000}));
  EXPECT_EQ(request->inputs[1].strings(), (std::vector<std::string>{"h\xc3\xa9"}));
  EXPECT_EQ(request->requested_outputs, (std::vector<std::string>{"out"}));
}

TEST(KserveJsonTest, EveryDatatypeRoundTrips) {
  InferRequest request;
  request.id = "r";
  auto add = [&](Result<Tensor> t) {
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    request.inputs.push_back(std::move(*t));
  };
  add(Tensor::FromValues<bool>("bool", {2}, std::array<bool, 2>{true, false}));
  add(Tensor::FromValues<std::uint8_t>("u8", {2}, std::vector<std::uint8_t>{0, 255}));
  add(Tensor::FromValues<std::uint16_t>("u16", {1}, std::vector<std::uint16_t>{65535}));
  add(Tensor::FromValues<std::uint32_t>("u32", {1}, std::vector<std::uint32_t>{4294967295u}));
  add(Tensor::FromValues<std::uint64_t>(
      "u64", {2}, std::vector<std::uint64_t>{0, std::numeric_limits<std::uint64_t>::max()}));
  add(Tensor::FromValues<std::int8_t>("i8", {2}, std::vector<std::int8_t>{-128, 127}));
  add(Tensor::FromValues<std::int16_t>("i16", {1}, std::vector<std::int16_t>{-32768}));
  add(Tensor::FromValues<std::int32_t>("i32", {1}, std::vector<std::int32_t>{-2147483647 - 1}));
  add(Tensor::FromValues<std::int64_t>(
      "i64", {2},
      std::vector<std::int64_t>{std::numeric_limits<std::int64_t>::min(),
                                std::numeric_limits<std::int64_t>::max()}));
  add(Tensor::FromValues<Half>(
      "f16", {4}, std::vector<Half>{Half{0x3555}, Half{0x0001}, Half{0x8000}, Half{0x7bff}}));
  add(Tensor::FromValues<float>("f32", {2, 2},
                                std::vector<float>{0.1f, -0.0f, std::numeric_limits<float>::max(),
                                                   std::numeric_limits<float>::denorm_min()}));
  add(Tensor::FromValues<double>("f64", {3},
                                 std::vector<double>{0.1, std::numeric_limits<double>::max(),
                                                     std::numeric_limits<double>::denorm_min()}));
  add(Tensor::FromStrings("bytes", {2, 1}, {"", "tab\t\"quote\" \xe2\x82\xac"}));
  add(Tensor::FromValues<float>("empty", {0, 3}, std::vector<float>{}));
  add(Tensor::FromValues<double>("scalar", {}, std::vector<double>{2.0}));
  request.requested_outputs = {"a", "b"};
  request.parameters = Json{{"n", 1}};
  const auto text = SerializeInferRequest(request);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  const auto back = ParseInferRequest(*text);
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << *text;
  EXPECT_EQ(*back, request);

  InferResponse response;
  response.model_name = "m";
  response.model_version = "1";
  response.id = "r";
  response.outputs = request.inputs;
  const auto response_text = SerializeInferResponse(response);
  ASSERT_TRUE(response_text.ok());
  const auto response_back = ParseInferResponse(*response_text);
  ASSERT_TRUE(response_back.ok()) << response_back.status().ToString();
  EXPECT_EQ(*response_back, response);
}

TEST(KserveJsonTest, NestedAndFlatDataAgree) {
  const Tensor flat = ParseOne("INT32", "[2,3]", "[1,2,3,4,5,6]");
  EXPECT_EQ(ParseOne("INT32", "[2,3]", "[[1,2,3],[4,5,6]]"), flat);
  EXPECT_EQ(ParseOne("BYTES", "[2,1]", R"([["a"],["b"]])"),
            ParseOne("BYTES", "[2,1]", R"(["a","b"])"));
  EXPECT_EQ(ParseOne("FP64", "[2,0]", "[[],[]]"), ParseOne("FP64", "[2,0]", "[]"));
  EXPECT_EQ(ParseOne("FP64", "[]", "[7]").element_count(), 1);
  EXPECT_EQ(RequestError(OneInput("INT32", "[2,3]", "[[1,2],[3,4],[5,6]]")),
            "input 'x': nested data does not match shape [2,3]");
  EXPECT_EQ(RequestError(OneInput("INT32", "[2,2]", "[[1,2,3,4]]")),
            "input 'x': nested data does not match shape [2,2]");
  EXPECT_EQ(RequestError(OneInput("INT32", "[2,2]", "[[1,2],3,4]")),
            "input 'x': nested data does not match shape [2,2]");
  EXPECT_EQ(RequestError(OneInput("INT32", "[2]", "[[1],[2]]")),
            "input 'x': nested data does not match shape [2]");
  EXPECT_EQ(RequestError(OneInput("INT32", "[1,2]", "[[1,[2]]]")),
            "input 'x': nested data does not match shape [1,2]");
  EXPECT_EQ(RequestError(OneInput("INT32", "[2,2]", "[1,2,3]")),
            "input 'x': shape [2,2] has 4 elements but data has 3");
}

TEST(KserveJsonTest, ElementsAreCheckedForTheirDatatype) {
  EXPECT_EQ(RequestError(OneInput("UINT8", "[1]", "[256]")),
            "input 'x': data element 0 is not valid for UINT8 (expected an integer in [0, 255])");
  EXPECT_EQ(RequestError(OneInput("UINT8", "[2]", "[1, -1]")),
            "input 'x': data element 1 is not valid for UINT8 (expected an integer in [0, 255])");
  EXPECT_EQ(RequestError(OneInput("INT8", "[1]", "[-129]")),
            "input 'x': data element 0 is not valid for INT8 (expected an integer in [-128, 127])");
  EXPECT_EQ(RequestError(OneInput("INT64", "[1]", "[9223372036854775808]")).substr(0, 40),
            "input 'x': data element 0 is not valid f");
  EXPECT_EQ(RequestError(OneInput("UINT64", "[1]", "[-1]")).substr(0, 40),
            "input 'x': data element 0 is not valid f");
  EXPECT_EQ(RequestError(OneInput("INT32", "[1]", "[1.0]")).substr(0, 40),
            "input 'x': data element 0 is not valid f");
  EXPECT_EQ(RequestError(OneInput("INT32", "[1]", "[true]")).substr(0, 40),
            "input 'x': data element 0 is not valid f");
  EXPECT_EQ(RequestError(OneInput("BOOL", "[1]", "[1]")),
            "input 'x': data element 0 is not valid for BOOL (expected true or false)");
  EXPECT_EQ(RequestError(OneInput("BYTES", "[1]", "[1]")),
            "input 'x': data element 0 is not valid for BYTES (expected a string)");
  EXPECT_EQ(RequestError(OneInput("FP32", "[1]", R"(["1"])")),
            "input 'x': data element 0 is not valid for FP32 (expected a number)");
  EXPECT_EQ(RequestError(OneInput("FP32", "[1]", "[1e39]")),
            "input 'x': data element 0 is not valid for FP32 (expected a number within FP32's "
            "range)");
  EXPECT_EQ(RequestError(OneInput("FP16", "[1]", "[65520]")),
            "input 'x': data element 0 is not valid for FP16 (expected a number within FP16's "
            "range (|x| < 65520))");
  EXPECT_EQ(RequestError(OneInput("FP16", "[1]", "[65519.99]")), "OK");
  EXPECT_EQ(RequestError(OneInput("FP64", "[1]", "[1e309]")), "request body is not valid JSON");
  EXPECT_EQ(RequestError(OneInput("FP64", "[1]", "[NaN]")), "request body is not valid JSON");
  // Integers are accepted for floating-point types; FP16 rounds to nearest even.
  EXPECT_EQ(ValuesOf<double>(ParseOne("FP64", "[2]", "[3, -9007199254740993]")),
            (std::vector<double>{3.0, -9007199254740992.0}));
  EXPECT_EQ(ValuesOf<Half>(ParseOne("FP16", "[2]", "[1.00048828125, 0.1]")),
            (std::vector<Half>{Half{0x3c00}, Half{0x2e66}}));
}

TEST(KserveJsonTest, StructureErrors) {
  EXPECT_EQ(RequestError("{"), "request body is not valid JSON");
  EXPECT_EQ(RequestError("[]"), "request body is not a JSON object");
  EXPECT_EQ(RequestError("{}"), "'inputs' is missing or not an array");
  EXPECT_EQ(RequestError(R"({"inputs":{}})"), "'inputs' is missing or not an array");
  EXPECT_EQ(RequestError(R"({"inputs":[], "id": 5})"), "'id' is not a string");
  EXPECT_EQ(RequestError(R"({"inputs":[], "parameters": []})"), "'parameters' is not an object");
  EXPECT_EQ(RequestError(R"({"inputs":[]})"), "OK");
  EXPECT_EQ(RequestError(R"({"inputs":[1]})"), "input 0 is not an object");
  EXPECT_EQ(RequestError(R"({"inputs":[{"datatype":"FP32","shape":[1],"data":[1]}]})"),
            "input 0: 'name' is missing, not a string, or empty");
  EXPECT_EQ(RequestError(R"({"inputs":[{"name":"","datatype":"FP32","shape":[1],"data":[1]}]})"),
            "input 0: 'name' is missing, not a string, or empty");
  EXPECT_EQ(RequestError(R"({"inputs":[{"name":"x","shape":[1],"data":[1]}]})"),
            "input 'x': 'datatype' is missing or not a string");
  EXPECT_EQ(RequestError(OneInput("FLOAT", "[1]", "[1]")).substr(0, 38),
            "input 'x': unknown datatype 'FLOAT' (e");
  EXPECT_EQ(RequestError(R"({"inputs":[{"name":"x","datatype":"FP32","data":[1]}]})"),
            "input 'x': 'shape' is missing or not an array");
  EXPECT_EQ(RequestError(OneInput("FP32", "[-1]", "[]")),
            "input 'x': shape dimensions must be non-negative integers");
  EXPECT_EQ(RequestError(OneInput("FP32", "[1.5]", "[]")),
            "input 'x': shape dimensions must be non-negative integers");
  EXPECT_EQ(RequestError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1]}]})"),
            "input 'x': 'data' is missing");
  EXPECT_EQ(RequestError(OneInput("FP32", "[1]", "1")), "input 'x': 'data' is not an array");
  EXPECT_EQ(RequestError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],)"
                         R"("parameters":{"binary_data_size":4}}]})"),
            "input 'x': 'binary_data_size' is given, but the body has no binary data (its JSON's "
            "length goes in Inference-Header-Content-Length)");
  EXPECT_EQ(RequestError(R"({"inputs":[{"name":"x","datatype":"FP32","shape":[1],"data":[1]},)"
                         R"({"name":"x","datatype":"FP32","shape":[1],"data":[1]}]})"),
            "two inputs are named 'x'");
  EXPECT_EQ(RequestError(R"({"inputs":[],"outputs":[{"name":"a"},{"name":"a"}]})"),
            "output 'a' is requested twice");
  EXPECT_EQ(RequestError(R"({"inputs":[],"outputs":[{}]})"),
            "requested output 0: 'name' is missing, not a string, or empty");
  EXPECT_EQ(RequestError(R"({"inputs":[],"outputs":{}})"), "'outputs' is not an array");
}

TEST(KserveJsonTest, ResponseErrors) {
  EXPECT_EQ(ParseInferResponse(R"({"outputs":[]})").status().message(), "'model_name' is missing");
  EXPECT_EQ(ParseInferResponse(R"({"model_name":"m"})").status().message(),
            "'outputs' is missing or not an array");
  EXPECT_EQ(
      ParseInferResponse(R"({"model_name":"m","model_version":1,"outputs":[]})").status().message(),
      "'model_version' is not a string");
  EXPECT_EQ(
      ParseInferResponse(R"({"model_name":"m","outputs":[{"name":"y","datatype":"INT8",)"
                         R"("shape":[1],"data":[300]}]})")
          .status()
          .message(),
      "output 'y': data element 0 is not valid for INT8 (expected an integer in [-128, 127])");
}

TEST(KserveJsonTest, LimitsBoundTheInput) {
  ParseLimits limits;
  limits.max_text_bytes = 100;
  EXPECT_EQ(RequestError(std::string(101, ' '), limits),
            "request body of 101 bytes exceeds the limit of 100 bytes");
  limits = {};
  limits.max_depth = 4;
  EXPECT_EQ(RequestError(OneInput("INT32", "[1,1,1]", "[[[1]]]"), limits),
            "JSON nests deeper than 4 levels");
  EXPECT_EQ(RequestError(std::string(100000, '['), {}), "JSON nests deeper than 32 levels");
  // Brackets inside strings do not count.
  EXPECT_EQ(RequestError(OneInput("BYTES", "[1]", R"(["[[[[[[\"]]]]"])"), limits), "OK");
  limits = {};
  limits.max_elements = 5;
  EXPECT_EQ(RequestError(OneInput("INT8", "[6]", "[1,2,3,4,5,6]"), limits),
            "input 'x': shape [6] exceeds the limit on tensor elements");
  // The limit holds before any data is read: a huge shape with little data.
  EXPECT_EQ(RequestError(OneInput("INT8", "[1000000000000]", "[1]"), limits),
            "input 'x': shape [1000000000000] exceeds the limit on tensor elements");
  EXPECT_EQ(RequestError(OneInput("INT8", "[4294967296,4294967296]", "[1]"), limits),
            "input 'x': shape [4294967296,4294967296] has too many elements");
  limits = {};
  limits.max_tensor_bytes = 16;
  EXPECT_EQ(RequestError(OneInput("FP64", "[3]", "[1,2,3]"), limits),
            "input 'x': shape [3] exceeds the limit on tensor bytes");
  EXPECT_EQ(RequestError(OneInput("FP64", "[2]", "[1,2]"), limits), "OK");
  EXPECT_EQ(RequestError(OneInput("BYTES", "[2]", R"(["0123456789","0123456789"])"), limits),
            "input 'x': data exceeds the limit on tensor bytes");
  // Budgets are shared by all tensors of a message.
  EXPECT_EQ(RequestError(R"({"inputs":[{"name":"a","datatype":"FP64","shape":[1],"data":[1]},)"
                         R"({"name":"b","datatype":"FP64","shape":[2],"data":[1,2]}]})",
                         limits),
            "input 'b': shape [2] exceeds the limit on tensor bytes");
  limits = {};
  limits.max_tensors = 1;
  EXPECT_EQ(RequestError(R"({"inputs":[{"name":"a","datatype":"FP64","shape":[1],"data":[1]},)"
                         R"({"name":"b","datatype":"FP64","shape":[1],"data":[1]}]})",
                         limits),
            "2 inputs exceed the limit of 1");
  EXPECT_EQ(RequestError(R"({"inputs":[],"outputs":[{"name":"a"},{"name":"b"}]})", limits),
            "2 requested outputs exceed the limit of 1");
  std::string rank65 = "[1";
  for (int i = 1; i < 65; ++i) rank65 += ",1";
  EXPECT_EQ(RequestError(OneInput("INT8", rank65 + "]", "[1]")),
            "input 'x': shape has 65 dimensions (at most 64)");
}

TEST(KserveJsonTest, DataBeforeItsDatatypeAndShapeParsesTheSame) {
  const std::string usual =
      R"({"inputs":[{"name":"x","datatype":"INT16","shape":[2,2],"data":[[1,-2],[3,4]]}]})";
  const std::string data_first =
      R"({"inputs":[{"data":[[1,-2],[3,4]],"shape":[2,2],"name":"x","datatype":"INT16"}]})";
  const auto a = ParseInferRequest(usual);
  const auto b = ParseInferRequest(data_first);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(*a, *b);
  EXPECT_EQ(ValuesOf<std::int16_t>(b->inputs[0]), (std::vector<std::int16_t>{1, -2, 3, 4}));
  // Held elements are checked as the others, once the datatype is known.
  EXPECT_EQ(RequestError(R"({"inputs":[{"data":[1,70000],"name":"x","datatype":"INT16",)"
                         R"("shape":[2]}]})"),
            "input 'x': data element 1 is not valid for INT16 (expected an integer in [-32768, "
            "32767])");
  EXPECT_EQ(RequestError(R"({"inputs":[{"data":["ab","cd"],"name":"x","datatype":"BYTES",)"
                         R"("shape":[2]}]})"),
            "OK");
  // Held elements count against the limits while they are read.
  ParseLimits limits;
  limits.max_elements = 3;
  EXPECT_EQ(RequestError(R"({"inputs":[{"name":"x","data":[1,2,3,4,5,6,7,8]}]})", limits),
            "input 'x': data exceeds the limit on tensor elements");
  // And nine bytes each of the byte budget, until the tensor ends.
  limits = {};
  limits.max_tensor_bytes = 40;
  EXPECT_EQ(RequestError(R"({"inputs":[{"name":"x","data":[1,2,3,4],"datatype":"INT8",)"
                         R"("shape":[4]}]})",
                         limits),
            "OK");
  EXPECT_EQ(RequestError(R"({"inputs":[{"name":"x","data":[1,2,3,4,5],"datatype":"INT8",)"
                         R"("shape":[5]}]})",
                         limits),
            "input 'x': data before its tensor's datatype and shape exceeds the limit on tensor "
            "bytes (send 'data' after them)");
  EXPECT_EQ(RequestError(OneInput("INT8", "[5]", "[1,2,3,4,5]"), limits), "OK");
  // And data past the shape's count, in the usual order, is counted, not kept.
  EXPECT_EQ(RequestError(OneInput("INT8", "[2]", "[1,2,3,4,5]")),
            "input 'x': shape [2] has 2 elements but data has 5");
  EXPECT_EQ(RequestError(OneInput("INT8", "[2]", R"([1,{"a":[1,2]}])")),
            "input 'x': data element 1 is not valid for INT8 (expected an integer in [-128, 127])");
}

TEST(KserveJsonTest, KnownFieldsGivenTwiceAreRefused) {
  EXPECT_EQ(RequestError(R"({"inputs":[],"inputs":[]})"), "'inputs' is given twice");
  EXPECT_EQ(RequestError(R"({"id":"a","inputs":[],"id":"b"})"), "'id' is given twice");
  EXPECT_EQ(RequestError(R"({"inputs":[{"name":"x","datatype":"INT8","shape":[1],"data":[1],)"
                         R"("shape":[2]}]})"),
            "input 'x': 'shape' is given twice");
  EXPECT_EQ(RequestError(R"({"inputs":[],"outputs":[{"name":"a","name":"b"}]})"),
            "requested output 0: 'name' is given twice");
  // Unknown fields are skipped, however often and however large.
  EXPECT_EQ(RequestError(R"({"x":[[1,2],{"y":3}],"inputs":[],"x":{"z":[]}})"), "OK");
}

TEST(KserveJsonTest, ParameterValuesAreBounded) {
  ParseLimits limits;
  limits.max_parameter_values = 3;
  EXPECT_EQ(RequestError(R"({"parameters":{"a":1,"b":[2]},"inputs":[]})", limits), "OK");
  EXPECT_EQ(RequestError(R"({"parameters":{"a":1,"b":[2,3]},"inputs":[]})", limits),
            "'parameters' hold more than 3 values in all");
  EXPECT_EQ(RequestError(R"({"parameters":{"a":1},"inputs":[{"name":"x","datatype":"INT8",)"
                         R"("shape":[1],"data":[1],"parameters":{"b":2,"c":3,"d":4}}]})",
                         limits),
            "'parameters' hold more than 3 values in all");
}

// A JSON body of 4 Mi FP32 elements: parsing it allocates at most 1.25 times its tensor's bytes
// (the tensor's storage, reserved once from its shape), and at most 3.5 times when the data comes
// before the shape and is held until it arrives. A JSON tree of the message, as parsers build by
// default, takes 16 bytes or more per element: four times the tensor's bytes at the least.
TEST(KserveJsonTest, ParsingTakesASmallMultipleOfTheTensorsBytes) {
  constexpr std::size_t kElements = 4 << 20;
  constexpr std::size_t kTensorBytes = kElements * sizeof(float);
  std::string data = "[";
  data.reserve(kElements * 4 + 2);
  for (std::size_t i = 0; i < kElements; ++i) data += i == 0 ? "0.5" : ",0.5";
  data += "]";
  const std::string shape = "[" + std::to_string(kElements) + "]";
  const std::string usual = OneInput("FP32", shape, data);
  const std::string data_first =
      R"({"inputs":[{"name":"x","data":)" + data + R"(,"datatype":"FP32","shape":)" + shape + "}]}";
  auto peak_of_parse = [](const std::string& text) -> std::size_t {
    const std::size_t before = testing::AllocatedBytes();
    testing::ResetPeakAllocatedBytes();
    const auto request = ParseInferRequest(text);
    EXPECT_TRUE(request.ok()) << request.status().ToString();
    EXPECT_TRUE(request.ok() && request->inputs.size() == 1 &&
                request->inputs[0].element_count() == static_cast<std::int64_t>(kElements));
    return testing::PeakAllocatedBytes() - before;
  };
  const double usual_ratio = static_cast<double>(peak_of_parse(usual)) / kTensorBytes;
  // Writing it back builds no tree either (that took 16 bytes an element, four times this text):
  // the text, grown as a string grows, and nothing else.
  const auto request = ParseInferRequest(usual);
  ASSERT_TRUE(request.ok());
  const std::size_t before_write = testing::AllocatedBytes();
  testing::ResetPeakAllocatedBytes();
  const auto written = SerializeInferRequest(*request);
  ASSERT_TRUE(written.ok());
  const double write_ratio = static_cast<double>(testing::PeakAllocatedBytes() - before_write) /
                             static_cast<double>(written->size());
  EXPECT_LE(write_ratio, 3.0);
  const double data_first_ratio = static_cast<double>(peak_of_parse(data_first)) / kTensorBytes;
  EXPECT_LE(usual_ratio, 1.25);
  EXPECT_LE(data_first_ratio, 3.5);
  std::printf(
      "parse of %zu FP32 elements (%zu bytes of text): at most %.2fx the tensor's bytes "
      "allocated (usual order), %.2fx (data first); writing it back: %.2fx its text\n",
      kElements, usual.size(), usual_ratio, data_first_ratio, write_ratio);
}

TEST(KserveJsonTest, SerializeRefusesWhatJsonCannotCarry) {
  InferResponse response;
  response.model_name = "m";
  response.outputs.push_back(*Tensor::FromValues<float>(
      "y", {1}, std::vector<float>{std::numeric_limits<float>::quiet_NaN()}));
  EXPECT_EQ(SerializeInferResponse(response).status().message(),
            "tensor 'y' holds a non-finite value");
  response.outputs = {*Tensor::FromValues<Half>("h", {1}, std::vector<Half>{Half{0x7c00}})};
  EXPECT_EQ(SerializeInferResponse(response).status().message(),
            "tensor 'h' holds a non-finite value");
  response.outputs = {*Tensor::FromStrings("s", {1}, {"\xff"})};
  EXPECT_EQ(SerializeInferResponse(response).status().code(), StatusCode::kInvalidArgument);
  response.outputs = {*Tensor::FromValues<std::int32_t>("i", {2}, std::vector<std::int32_t>{1, 2})};
  EXPECT_EQ(*SerializeInferResponse(response),
            R"({"model_name":"m","outputs":[{"name":"i","datatype":"INT32","shape":[2],)"
            R"("data":[1,2]}]})");
  // Floating-point values are written in their shortest exact form, always as floating point.
  response.outputs = {*Tensor::FromValues<double>("d", {3}, std::vector<double>{1, -0.0, 1e300})};
  EXPECT_EQ(*SerializeInferResponse(response),
            R"({"model_name":"m","outputs":[{"name":"d","datatype":"FP64","shape":[3],)"
            R"("data":[1.0,-0.0,1e+300]}]})");
}

TEST(KserveJsonTest, ErrorJson) {
  EXPECT_EQ(ErrorJson("bad \"x\""), R"({"error":"bad \"x\""})");
  EXPECT_EQ(ErrorJson("\xff"), "{\"error\":\"\xef\xbf\xbd\"}");
}

}  // namespace
}  // namespace gshare
