// ParseInferRequest and ParseInferResponse (kserve_json.h): one pass of the JSON text through
// nlohmann's event (SAX) parser, which builds each tensor's typed storage as its elements arrive.
// No JSON tree of the message is built: the limits apply while the text is read, and a parsed
// message holds its tensors' bytes plus, for data that arrives before its tensor's 'datatype'
// and 'shape', nine bytes per element until the tensor's object ends.
#include <algorithm>
#include <bit>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "gshare/protocol/element_sink.h"
#include "gshare/protocol/guarded.h"
#include "gshare/protocol/kserve_json.h"
#include "gshare/tensor/json_depth.h"

namespace gshare {
namespace {

using Json = nlohmann::json;
using kserve::Budget;
using kserve::ElementSink;
using kserve::ScalarValue;
using Kind = ScalarValue::Kind;

enum class Role { kRequest, kResponse };

// How the arrays of one tensor's 'data' nest, summarised per depth (0: 'data' itself), and how
// many elements (leaves) it has. Enough to decide afterwards whether the data is flat or nested
// exactly as a shape, without keeping its structure.
class DataLayout {
 public:
  void OpenArray() {
    if (!open_.empty()) {
      ++open_.back();
      Level(open_.size() - 1).has_arrays = true;
    }
    open_.push_back(0);
  }
  // True when the 'data' array itself closed.
  bool CloseArray() {
    LevelSummary& level = Level(open_.size() - 1);
    if (level.size >= 0 && level.size != open_.back()) level.mixed_sizes = true;
    level.size = open_.back();
    open_.pop_back();
    return open_.empty();
  }
  void Leaf() {
    ++open_.back();
    Level(open_.size() - 1).has_leaves = true;
    ++leaves_;
  }
  std::uint64_t leaves() const { return leaves_; }

  // OK when the data is flat with `elements` leaves, or nested exactly as `shape`.
  Status Check(std::span<const std::int64_t> shape, std::uint64_t elements,
               const std::string& where) const {
    const bool nested = !levels_.empty() && levels_[0].has_arrays;
    if (!nested) {
      if (leaves_ == elements) return Status::Ok();
      return InvalidArgument(fmt::format("{}: shape {} has {} elements but data has {}", where,
                                         ShapeToString(shape), elements, leaves_));
    }
    const std::size_t rank = shape.size();
    bool match = leaves_ == elements;
    for (std::size_t d = 0; d < levels_.size() && match; ++d) {
      const LevelSummary& level = levels_[d];
      if (level.size < 0) continue;  // no array at this depth
      if (d >= rank || level.mixed_sizes || level.size != shape[d]) match = false;
      if (d + 1 < rank && level.has_leaves) match = false;
      if (d + 1 == rank && level.has_arrays) match = false;
    }
    if (match) return Status::Ok();
    return InvalidArgument(where + ": nested data does not match shape " + ShapeToString(shape));
  }

 private:
  struct LevelSummary {
    std::int64_t size = -1;  // the size of the arrays at this depth; -1: none yet
    bool mixed_sizes = false;
    bool has_arrays = false;  // some array at this depth holds an array
    bool has_leaves = false;  // some array at this depth holds an element
  };
  LevelSummary& Level(std::size_t depth) {
    if (depth >= levels_.size()) levels_.resize(depth + 1);
    return levels_[depth];
  }

  std::vector<LevelSummary> levels_;  // as deep as the nesting check allowed
  std::vector<std::int64_t> open_;    // children so far of each open array
  std::uint64_t leaves_ = 0;
};

// What one held element takes (a kind byte and eight bytes), counted against the byte budget.
constexpr std::uint64_t kHeldElementBytes = 9;

// Elements held until their tensor's datatype and shape are known: a kind byte and eight bytes
// each (strings apart).
class HeldElements {
 public:
  void Add(const ScalarValue& v) {
    kinds_.push_back(v.kind);
    std::uint64_t bits = 0;
    switch (v.kind) {
      case Kind::kBool:
        bits = v.boolean ? 1 : 0;
        break;
      case Kind::kInteger:
        bits = static_cast<std::uint64_t>(v.integer);
        break;
      case Kind::kUnsigned:
        bits = v.unsigned_integer;
        break;
      case Kind::kFloat:
        bits = std::bit_cast<std::uint64_t>(v.floating);
        break;
      case Kind::kString:
        bits = strings_.size();
        strings_.push_back(*v.text);
        break;
      case Kind::kOther:
        break;
    }
    bits_.push_back(bits);
  }
  std::size_t size() const { return kinds_.size(); }
  std::uint64_t string_bytes() const {
    std::uint64_t total = 0;
    for (const std::string& s : strings_) total += s.size();
    return total;
  }
  ScalarValue At(std::size_t i) const {
    ScalarValue v;
    v.kind = kinds_[i];
    const std::uint64_t bits = bits_[i];
    v.boolean = bits != 0;
    v.integer = static_cast<std::int64_t>(bits);
    v.unsigned_integer = bits;
    v.floating = std::bit_cast<double>(bits);
    if (v.kind == Kind::kString) v.text = &strings_[bits];
    return v;
  }

 private:
  std::vector<Kind> kinds_;
  std::vector<std::uint64_t> bits_;
  std::vector<std::string> strings_;
};

// One tensor object as it is read.
struct TensorDraft {
  std::size_t index = 0;
  std::set<std::string> keys;  // known keys seen, to refuse one given twice
  std::optional<std::string> name;
  std::optional<std::string> datatype;
  bool shape_present = false;
  bool shape_is_array = false;
  bool dims_valid = true;
  std::size_t rank = 0;  // dimensions given, also those beyond kMaxRank that are not kept
  std::vector<std::int64_t> shape;
  bool parameters_valid = true;
  Json parameters = Json::object();
  bool data_present = false;
  bool data_is_array = false;
  DataLayout layout;
  // Set when the datatype and shape were known as 'data' began: elements go straight in.
  std::optional<ElementSink> sink;
  std::uint64_t sink_elements = 0;
  HeldElements held;  // otherwise, held here
};

class MessageReader {
 public:
  MessageReader(Role role, const ParseLimits& limits)
      : role_(role),
        limits_(limits),
        budget_{limits.max_tensor_bytes, limits.max_elements},
        tensor_role_(role == Role::kRequest ? "input" : "output") {}

  // The SAX interface of nlohmann::json.
  bool null() { return Scalar(ScalarValue{}); }
  bool boolean(bool b) {
    ScalarValue v;
    v.kind = Kind::kBool;
    v.boolean = b;
    return Scalar(v);
  }
  bool number_integer(std::int64_t i) {
    ScalarValue v;
    v.kind = Kind::kInteger;
    v.integer = i;
    return Scalar(v);
  }
  bool number_unsigned(std::uint64_t u) {
    ScalarValue v;
    v.kind = Kind::kUnsigned;
    v.unsigned_integer = u;
    return Scalar(v);
  }
  bool number_float(double d, const std::string& /*text*/) {
    ScalarValue v;
    v.kind = Kind::kFloat;
    v.floating = d;
    return Scalar(v);
  }
  bool string(std::string& s) {
    ScalarValue v;
    v.kind = Kind::kString;
    v.text = &s;
    return Scalar(v);
  }
  bool binary(Json::binary_t& /*unused*/) { return Fail(NotJson()); }  // never in JSON text
  bool start_object(std::size_t /*unknown size*/) { return Open(/*object=*/true); }
  bool start_array(std::size_t /*unknown size*/) { return Open(/*object=*/false); }
  bool end_object() { return Close(); }
  bool end_array() { return Close(); }
  bool key(std::string& k) {
    frames_.back().key = k;
    return true;
  }
  bool parse_error(std::size_t /*position*/, const std::string& /*token*/,
                   const nlohmann::detail::exception& /*error*/) {
    if (error_.ok()) error_ = NotJson();
    return false;
  }

  Status error() const { return error_; }

  // The binary data extension: the bytes after the JSON, taken in order by the tensors whose
  // parameters give binary_data_size.
  void SetBinary(std::string_view binary) { binary_ = binary; }

  Result<InferRequest> TakeRequest() {
    GSHARE_RETURN_IF_ERROR(FinishMessage());
    if (binary_ && binary_used_ != binary_->size()) {
      return InvalidArgument(fmt::format(
          "the body has {} bytes of binary data after those the inputs' binary_data_size name",
          binary_->size() - binary_used_));
    }
    InferRequest request;
    request.id = std::move(id_);
    request.parameters = std::move(parameters_);
    request.inputs = std::move(tensors_);
    request.requested_outputs = std::move(requested_outputs_);
    request.output_binary_data = std::move(output_binary_data_);
    return request;
  }

  Result<InferResponse> TakeResponse() {
    if (!model_name_) return InvalidArgument("'model_name' is missing");
    GSHARE_RETURN_IF_ERROR(FinishMessage());
    if (binary_ && binary_used_ != binary_->size()) {
      return InvalidArgument(fmt::format(
          "the body has {} bytes of binary data after those the outputs' binary_data_size name",
          binary_->size() - binary_used_));
    }
    InferResponse response;
    response.model_name = std::move(*model_name_);
    response.model_version = std::move(model_version_);
    response.id = std::move(id_);
    response.parameters = std::move(parameters_);
    response.outputs = std::move(tensors_);
    return response;
  }

 private:
  enum class FrameKind {
    kRoot,
    kSkip,
    kParameters,
    kTensors,
    kTensor,
    kShape,
    kData,
    kOutputs,
    kOutput
  };
  struct Frame {
    FrameKind kind;
    std::string key;      // the key of the value that comes next (objects)
    Json* dom = nullptr;  // kParameters: the object or array being built
  };

  Status NotJson() const {
    return InvalidArgument(std::string(role_ == Role::kRequest ? "request" : "response") +
                           " body is not valid JSON");
  }
  bool Fail(Status status) {
    if (error_.ok()) error_ = std::move(status);
    return false;
  }
  std::string TensorWhere(const TensorDraft& t) const {
    if (t.name && !t.name->empty()) {
      return fmt::format("{} '{}'", tensor_role_, t.name->substr(0, 128));
    }
    return fmt::format("{} {}", tensor_role_, t.index);
  }
  // The key of the value now arriving in the object at the top, refused if given twice.
  bool TakeKey(std::set<std::string>& seen, std::string_view where) {
    const std::string& key = frames_.back().key;
    if (seen.insert(key).second) return true;
    return Fail(InvalidArgument(fmt::format("{}'{}' is given twice", where, key)));
  }
  bool IsRootKey(std::string_view key) const {
    if (key == "id" || key == "parameters") return true;
    if (role_ == Role::kRequest) return key == "inputs" || key == "outputs";
    return key == "model_name" || key == "model_version" || key == "outputs";
  }
  std::string_view TensorsKey() const { return role_ == Role::kRequest ? "inputs" : "outputs"; }

  bool Push(FrameKind kind, Json* dom = nullptr) {
    frames_.push_back(Frame{kind, {}, dom});
    return true;
  }
  bool Skip() { return Push(FrameKind::kSkip); }

  bool CountParameterValue() {
    if (++parameter_values_ <= limits_.max_parameter_values) return true;
    return Fail(InvalidArgument(
        fmt::format("'parameters' hold more than {} values in all", limits_.max_parameter_values)));
  }
  static Json ToJson(const ScalarValue& v) {
    switch (v.kind) {
      case Kind::kBool:
        return Json(v.boolean);
      case Kind::kInteger:
        return Json(v.integer);
      case Kind::kUnsigned:
        return Json(v.unsigned_integer);
      case Kind::kFloat:
        return Json(v.floating);
      case Kind::kString:
        return Json(*v.text);
      case Kind::kOther:
        break;
    }
    return Json(nullptr);
  }
  // Places `value` in the parameters container at the top; returns where it went.
  Json* PutParameter(Json value) {
    Frame& top = frames_.back();
    if (top.dom->is_object()) return &((*top.dom)[top.key] = std::move(value));
    top.dom->push_back(std::move(value));
    return &top.dom->back();
  }

  bool Scalar(const ScalarValue& v) {
    if (frames_.empty()) return Fail(NotAnObject());
    Frame& top = frames_.back();
    switch (top.kind) {
      case FrameKind::kRoot:
        return RootScalar(top.key, v);
      case FrameKind::kSkip:
        return true;
      case FrameKind::kParameters:
        if (!CountParameterValue()) return false;
        PutParameter(ToJson(v));
        return true;
      case FrameKind::kTensors:
        return Fail(
            InvalidArgument(fmt::format("{} {} is not an object", tensor_role_, tensors_seen_)));
      case FrameKind::kTensor:
        return TensorScalar(top.key, v);
      case FrameKind::kShape:
        return ShapeDimension(v);
      case FrameKind::kData:
        return DataElement(v);
      case FrameKind::kOutputs:
        return Fail(
            InvalidArgument(fmt::format("requested output {} is not an object", outputs_seen_)));
      case FrameKind::kOutput:
        return OutputScalar(top.key, v);
    }
    return true;
  }

  Status NotAnObject() const {
    return InvalidArgument(std::string(role_ == Role::kRequest ? "request" : "response") +
                           " body is not a JSON object");
  }

  bool Open(bool object) {
    if (frames_.empty()) {
      if (!object) return Fail(NotAnObject());
      return Push(FrameKind::kRoot);
    }
    Frame& top = frames_.back();
    switch (top.kind) {
      case FrameKind::kRoot:
        return RootOpen(top.key, object);
      case FrameKind::kSkip:
        return Skip();
      case FrameKind::kParameters: {
        if (!CountParameterValue()) return false;
        Json* child = PutParameter(object ? Json::object() : Json::array());
        return Push(FrameKind::kParameters, child);
      }
      case FrameKind::kTensors:
        if (!object) {
          return Fail(
              InvalidArgument(fmt::format("{} {} is not an object", tensor_role_, tensors_seen_)));
        }
        if (++tensors_seen_ > limits_.max_tensors) return Skip();
        drafts_.emplace_back();
        drafts_.back().index = tensors_seen_ - 1;
        return Push(FrameKind::kTensor);
      case FrameKind::kTensor:
        return TensorOpen(top.key, object);
      case FrameKind::kShape:
        ++drafts_.back().rank;
        drafts_.back().dims_valid = false;
        return Skip();
      case FrameKind::kData: {
        TensorDraft& t = drafts_.back();
        if (object) {
          if (!DataElement(ScalarValue{})) return false;
          return Skip();
        }
        t.layout.OpenArray();  // nested data: the one 'data' frame follows the nesting
        return true;
      }
      case FrameKind::kOutputs:
        if (!object) {
          return Fail(
              InvalidArgument(fmt::format("requested output {} is not an object", outputs_seen_)));
        }
        if (++outputs_seen_ > limits_.max_tensors) return Skip();
        output_draft_ = OutputDraft{};
        return Push(FrameKind::kOutput);
      case FrameKind::kOutput:
        return OutputOpen(top.key, object);
    }
    return true;
  }

  bool Close() {
    const FrameKind kind = frames_.back().kind;
    if (kind == FrameKind::kData && !drafts_.back().layout.CloseArray()) {
      return true;  // a nested array of the data closed, not 'data' itself
    }
    frames_.pop_back();
    switch (kind) {
      case FrameKind::kTensor:
        return FinishTensor();
      case FrameKind::kTensors:
        if (tensors_seen_ > limits_.max_tensors) {
          return Fail(InvalidArgument(fmt::format("{} {}s exceed the limit of {}", tensors_seen_,
                                                  tensor_role_, limits_.max_tensors)));
        }
        return true;
      case FrameKind::kOutput:
        return FinishOutput();
      case FrameKind::kOutputs:
        if (outputs_seen_ > limits_.max_tensors) {
          return Fail(InvalidArgument(fmt::format("{} requested outputs exceed the limit of {}",
                                                  outputs_seen_, limits_.max_tensors)));
        }
        return true;
      default:
        return true;
    }
  }

  // ---- the message object

  bool RootScalar(const std::string& key, const ScalarValue& v) {
    if (!IsRootKey(key)) return true;
    if (!TakeKey(root_keys_, "")) return false;
    if (key == "id" || key == "model_name" || key == "model_version") {
      if (v.kind != Kind::kString) {
        return Fail(InvalidArgument(fmt::format("'{}' is not a string", key)));
      }
      std::optional<std::string>& field =
          key == "id" ? id_ : (key == "model_name" ? model_name_ : model_version_);
      field = *v.text;
      return true;
    }
    return RootWrongType(key);
  }

  bool RootOpen(const std::string& key, bool object) {
    if (!IsRootKey(key)) return Skip();
    if (!TakeKey(root_keys_, "")) return false;
    if (key == "parameters" && object) {
      parameters_ = Json::object();
      return Push(FrameKind::kParameters, &*parameters_);
    }
    if (key == TensorsKey() && !object) {
      tensors_present_ = true;
      return Push(FrameKind::kTensors);
    }
    if (role_ == Role::kRequest && key == "outputs" && !object) return Push(FrameKind::kOutputs);
    return RootWrongType(key);
  }

  bool RootWrongType(const std::string& key) {
    if (key == "parameters") return Fail(InvalidArgument("'parameters' is not an object"));
    if (key == TensorsKey()) {
      return Fail(InvalidArgument(fmt::format("'{}' is missing or not an array", key)));
    }
    if (key == "outputs") return Fail(InvalidArgument("'outputs' is not an array"));
    return Fail(InvalidArgument(fmt::format("'{}' is not a string", key)));
  }

  Status FinishMessage() {
    if (!tensors_present_) {
      return InvalidArgument(fmt::format("'{}' is missing or not an array", TensorsKey()));
    }
    return Status::Ok();
  }

  // ---- tensors

  bool TensorScalar(const std::string& key, const ScalarValue& v) {
    TensorDraft& t = drafts_.back();
    if (key != "name" && key != "datatype" && key != "shape" && key != "data" &&
        key != "parameters") {
      return true;
    }
    if (!TakeKey(t.keys, TensorWhere(t) + ": ")) return false;
    if (key == "name" && v.kind == Kind::kString) t.name = *v.text;
    if (key == "datatype" && v.kind == Kind::kString) t.datatype = *v.text;
    if (key == "shape") t.shape_present = true;
    if (key == "data") t.data_present = true;
    if (key == "parameters") t.parameters_valid = false;
    return true;
  }

  bool TensorOpen(const std::string& key, bool object) {
    TensorDraft& t = drafts_.back();
    if (key != "name" && key != "datatype" && key != "shape" && key != "data" &&
        key != "parameters") {
      return Skip();
    }
    if (!TakeKey(t.keys, TensorWhere(t) + ": ")) return false;
    if (key == "shape") {
      t.shape_present = true;
      if (object) return Skip();
      t.shape_is_array = true;
      return Push(FrameKind::kShape);
    }
    if (key == "data") {
      t.data_present = true;
      if (object) return Skip();
      t.data_is_array = true;
      if (!StartData(t)) return false;
      t.layout.OpenArray();
      return Push(FrameKind::kData);
    }
    if (key == "parameters") {
      if (!object) {
        t.parameters_valid = false;
        return Skip();
      }
      return Push(FrameKind::kParameters, &t.parameters);
    }
    return Skip();  // a name or datatype that is not a string
  }

  bool ShapeDimension(const ScalarValue& v) {
    TensorDraft& t = drafts_.back();
    ++t.rank;
    std::optional<std::int64_t> d;
    if (v.kind == Kind::kInteger && v.integer >= 0) d = v.integer;
    if (v.kind == Kind::kUnsigned &&
        v.unsigned_integer <=
            static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
      d = static_cast<std::int64_t>(v.unsigned_integer);
    }
    if (!d) t.dims_valid = false;
    if (d && t.shape.size() < Tensor::kMaxRank) t.shape.push_back(*d);
    return true;
  }

  // Checks the tensor's name, datatype and shape and takes its share of the budget: what every
  // tensor needs before its data is taken.
  Result<DataType> CheckHead(TensorDraft& t, std::uint64_t& elements) {
    if (!t.name || t.name->empty()) {
      return InvalidArgument(
          fmt::format("{} {}: 'name' is missing, not a string, or empty", tensor_role_, t.index));
    }
    const std::string where = TensorWhere(t);
    if (!t.datatype) return InvalidArgument(where + ": 'datatype' is missing or not a string");
    auto type = ParseDataType(*t.datatype);
    if (!type.ok()) return type.status().WithContext(where);
    GSHARE_ASSIGN_OR_RETURN(elements, CheckShape(t, *type));
    return *type;
  }

  Result<std::uint64_t> CheckShape(const TensorDraft& t, DataType type) {
    const std::string where = TensorWhere(t);
    if (!t.shape_present || !t.shape_is_array) {
      return InvalidArgument(where + ": 'shape' is missing or not an array");
    }
    if (t.rank > Tensor::kMaxRank) {
      return InvalidArgument(
          fmt::format("{}: shape has {} dimensions (at most {})", where, t.rank, Tensor::kMaxRank));
    }
    if (!t.dims_valid) {
      return InvalidArgument(where + ": shape dimensions must be non-negative integers");
    }
    auto count = ElementCount(t.shape);
    if (!count.ok()) return count.status().WithContext(where);
    const auto elements = static_cast<std::uint64_t>(*count);
    if (elements > budget_.elements_left) {
      return InvalidArgument(fmt::format("{}: shape {} exceeds the limit on tensor elements", where,
                                         ShapeToString(t.shape)));
    }
    if (IsFixedSize(type)) {
      // elements <= max_elements, so the product cannot overflow 64 bits
      const std::uint64_t bytes = elements * ElementSizeBytes(type);
      if (bytes > budget_.bytes_left) {
        return InvalidArgument(fmt::format("{}: shape {} exceeds the limit on tensor bytes", where,
                                           ShapeToString(t.shape)));
      }
      budget_.bytes_left -= bytes;
    }
    budget_.elements_left -= elements;
    return elements;
  }

  // At the start of 'data': when the datatype and shape are already known (the usual order),
  // the elements go straight into typed storage.
  bool StartData(TensorDraft& t) {
    if (!t.datatype || !t.shape_is_array) return true;
    auto type = ParseDataType(*t.datatype);
    if (!type.ok()) return true;  // reported when the tensor ends
    auto elements = CheckShape(t, *type);
    if (!elements.ok()) return Fail(elements.status());
    t.sink.emplace(TensorWhere(t), *type, static_cast<std::size_t>(*elements));
    t.sink_elements = *elements;
    return true;
  }

  bool DataElement(const ScalarValue& v) {
    TensorDraft& t = drafts_.back();
    t.layout.Leaf();
    if (t.sink) {
      // Elements past the shape's count are counted (for the message) but not kept.
      if (t.layout.leaves() > t.sink_elements) return true;
      const Status appended = t.sink->Append(v, budget_);
      return appended.ok() || Fail(appended);
    }
    if (budget_.elements_left == 0) {
      return Fail(InvalidArgument(TensorWhere(t) + ": data exceeds the limit on tensor elements"));
    }
    // A held element takes kHeldElementBytes (and a string its bytes) of the byte budget until
    // its tensor's object ends.
    const std::uint64_t bytes = kHeldElementBytes + (v.kind == Kind::kString ? v.text->size() : 0);
    if (bytes > budget_.bytes_left) {
      return Fail(InvalidArgument(
          TensorWhere(t) +
          ": data before its tensor's datatype and shape exceeds the limit on tensor bytes (send "
          "'data' after them)"));
    }
    budget_.bytes_left -= bytes;
    --budget_.elements_left;
    t.held.Add(v);
    return true;
  }

  bool FinishTensor() {
    TensorDraft t = std::move(drafts_.back());
    drafts_.pop_back();
    auto tensor = BuildTensor(t);
    if (!tensor.ok()) return Fail(tensor.status());
    if (!tensor_names_.insert(tensor->name()).second) {
      return Fail(
          InvalidArgument(fmt::format("two {}s are named '{}'", tensor_role_, tensor->name())));
    }
    tensors_.push_back(std::move(*tensor));
    return true;
  }

  Result<Tensor> BuildTensor(TensorDraft& t) {
    if (!t.sink) {
      // What the held elements took of the budget is given back: the shape's share is taken
      // now, as for every tensor.
      budget_.elements_left += t.held.size();
      budget_.bytes_left += t.held.string_bytes() + t.held.size() * kHeldElementBytes;
    }
    std::uint64_t elements = 0;
    DataType type = DataType::kFp32;
    if (t.sink) {
      elements = t.sink_elements;
      type = *ParseDataType(*t.datatype);
    } else {
      GSHARE_ASSIGN_OR_RETURN(type, CheckHead(t, elements));
    }
    if (!t.name || t.name->empty()) {
      return InvalidArgument(
          fmt::format("{} {}: 'name' is missing, not a string, or empty", tensor_role_, t.index));
    }
    const std::string where = TensorWhere(t);
    if (!t.parameters_valid) return InvalidArgument(where + ": 'parameters' is not an object");
    if (t.parameters.contains("binary_data_size")) {
      if (!binary_) {
        return InvalidArgument(where +
                               ": 'binary_data_size' is given, but the body has no binary data "
                               "(its JSON's length goes in Inference-Header-Content-Length)");
      }
      if (t.data_present) {
        return InvalidArgument(where + ": both 'data' and 'binary_data_size' are given");
      }
      return BinaryTensor(t, type, elements, where);
    }
    if (!t.data_present) return InvalidArgument(where + ": 'data' is missing");
    if (!t.data_is_array) return InvalidArgument(where + ": 'data' is not an array");
    GSHARE_RETURN_IF_ERROR(t.layout.Check(t.shape, elements, where));
    ElementSink* sink = t.sink ? &*t.sink : nullptr;
    std::optional<ElementSink> replayed;
    if (!sink) {
      replayed.emplace(where, type, static_cast<std::size_t>(elements));
      for (std::size_t i = 0; i < t.held.size(); ++i) {
        GSHARE_RETURN_IF_ERROR(replayed->Append(t.held.At(i), budget_));
      }
      sink = &*replayed;
    }
    if (type == DataType::kBytes) {
      return Tensor::FromStrings(std::move(*t.name), std::move(t.shape), sink->TakeStrings());
    }
    return Tensor::FromBytes(std::move(*t.name), type, std::move(t.shape), sink->TakeBytes());
  }

  // A tensor whose data is the next binary_data_size bytes of the binary part: fixed-size types
  // as their raw little-endian bytes, BYTES as each element's 4-byte little-endian length and
  // its bytes. The shape was checked and charged (CheckHead); BYTES charge their strings here.
  Result<Tensor> BinaryTensor(TensorDraft& t, DataType type, std::uint64_t elements,
                              const std::string& where) {
    const Json& declared = t.parameters["binary_data_size"];
    if (!declared.is_number_unsigned() && !(declared.is_number_integer() && declared >= 0)) {
      return InvalidArgument(where + ": 'binary_data_size' is not a non-negative integer");
    }
    const auto size = declared.get<std::uint64_t>();
    const std::size_t left = binary_->size() - binary_used_;
    if (size > left) {
      return InvalidArgument(
          fmt::format("{}: binary_data_size is {} bytes, but {} bytes of binary data are left",
                      where, size, left));
    }
    const std::string_view bytes = binary_->substr(binary_used_, static_cast<std::size_t>(size));
    binary_used_ += bytes.size();
    if (IsFixedSize(type)) {
      const std::uint64_t expected = elements * ElementSizeBytes(type);
      if (size != expected) {
        return InvalidArgument(
            fmt::format("{}: binary_data_size is {} bytes; shape {} of {} takes {}", where, size,
                        ShapeToString(t.shape), DataTypeName(type), expected));
      }
      std::vector<std::byte> data(bytes.size());
      if (!bytes.empty()) std::memcpy(data.data(), bytes.data(), bytes.size());
      return Tensor::FromBytes(std::move(*t.name), type, std::move(t.shape), std::move(data));
    }
    std::vector<std::string> strings;
    strings.reserve(static_cast<std::size_t>(std::min<std::uint64_t>(elements, size / 4)));
    std::size_t at = 0;
    for (std::uint64_t i = 0; i < elements; ++i) {
      if (bytes.size() - at < 4) {
        return InvalidArgument(
            fmt::format("{}: its binary data ends before element {}'s length", where, i));
      }
      std::uint32_t length = 0;
      for (int b = 3; b >= 0; --b) {
        length =
            (length << 8) | static_cast<unsigned char>(bytes[at + static_cast<std::size_t>(b)]);
      }
      at += 4;
      if (length > bytes.size() - at) {
        return InvalidArgument(
            fmt::format("{}: element {} is {} bytes long, but {} bytes of its binary data are left",
                        where, i, length, bytes.size() - at));
      }
      if (length > budget_.bytes_left) {
        return InvalidArgument(where + ": its strings exceed the limit on tensor bytes");
      }
      budget_.bytes_left -= length;
      strings.emplace_back(bytes.substr(at, length));
      at += length;
    }
    if (at != bytes.size()) {
      return InvalidArgument(fmt::format(
          "{}: binary_data_size is {} bytes; its {} elements take {}", where, size, elements, at));
    }
    return Tensor::FromStrings(std::move(*t.name), std::move(t.shape), std::move(strings));
  }

  // ---- requested outputs (requests)

  struct OutputDraft {
    std::set<std::string> keys;
    std::optional<std::string> name;
    bool parameters_valid = true;
    Json parameters = Json::object();  // read and dropped
  };

  bool OutputScalar(const std::string& key, const ScalarValue& v) {
    if (key != "name" && key != "parameters") return true;
    if (!TakeKey(output_draft_.keys, OutputWhere() + ": ")) return false;
    if (key == "name" && v.kind == Kind::kString) output_draft_.name = *v.text;
    if (key == "parameters") output_draft_.parameters_valid = false;
    return true;
  }

  bool OutputOpen(const std::string& key, bool object) {
    if (key != "name" && key != "parameters") return Skip();
    if (!TakeKey(output_draft_.keys, OutputWhere() + ": ")) return false;
    if (key == "parameters" && object) {
      return Push(FrameKind::kParameters, &output_draft_.parameters);
    }
    if (key == "parameters") output_draft_.parameters_valid = false;
    return Skip();
  }

  std::string OutputWhere() const { return fmt::format("requested output {}", outputs_seen_ - 1); }

  bool FinishOutput() {
    const std::string where = OutputWhere();
    if (!output_draft_.name || output_draft_.name->empty()) {
      return Fail(InvalidArgument(where + ": 'name' is missing, not a string, or empty"));
    }
    if (!requested_names_.insert(*output_draft_.name).second) {
      return Fail(InvalidArgument("output '" + *output_draft_.name + "' is requested twice"));
    }
    if (!output_draft_.parameters_valid) {
      return Fail(InvalidArgument(where + ": 'parameters' is not an object"));
    }
    if (const auto binary = output_draft_.parameters.find("binary_data");
        binary != output_draft_.parameters.end()) {
      if (!binary->is_boolean()) {
        return Fail(InvalidArgument(where + ": 'binary_data' is not a boolean"));
      }
      output_binary_data_.emplace_back(*output_draft_.name, binary->get<bool>());
    }
    requested_outputs_.push_back(std::move(*output_draft_.name));
    return true;
  }

  const Role role_;
  const ParseLimits& limits_;
  std::optional<std::string_view> binary_;
  std::size_t binary_used_ = 0;
  std::vector<std::pair<std::string, bool>> output_binary_data_;
  Budget budget_;
  const char* const tensor_role_;
  Status error_;
  std::vector<Frame> frames_;
  std::set<std::string> root_keys_;
  std::size_t parameter_values_ = 0;

  std::optional<std::string> id_;
  std::optional<std::string> model_name_;
  std::optional<std::string> model_version_;
  std::optional<Json> parameters_;
  bool tensors_present_ = false;
  std::size_t tensors_seen_ = 0;
  std::vector<TensorDraft> drafts_;  // at most one: tensors do not nest
  std::vector<Tensor> tensors_;
  std::set<std::string> tensor_names_;
  std::size_t outputs_seen_ = 0;
  OutputDraft output_draft_;
  std::set<std::string> requested_names_;
  std::vector<std::string> requested_outputs_;
};

// Runs the text through the reader; the reader's first error, or the parser's.
Status Read(std::string_view text, const ParseLimits& limits, std::string_view what,
            MessageReader& reader) {
  if (text.size() > limits.max_text_bytes) {
    return InvalidArgument(fmt::format("{} of {} bytes exceeds the limit of {} bytes", what,
                                       text.size(), limits.max_text_bytes));
  }
  GSHARE_RETURN_IF_ERROR(CheckJsonNesting(text, limits.max_depth));
  const bool ok = Json::sax_parse(text.begin(), text.end(), &reader);
  if (!reader.error().ok()) return reader.error();
  if (!ok) return InvalidArgument(std::string(what) + " is not valid JSON");
  return Status::Ok();
}

}  // namespace

Result<InferRequest> ParseInferRequest(std::string_view json, const ParseLimits& limits) {
  return kserve::Guarded([&]() -> Result<InferRequest> {
    MessageReader reader(Role::kRequest, limits);
    GSHARE_RETURN_IF_ERROR(Read(json, limits, "request body", reader));
    return reader.TakeRequest();
  });
}

Result<InferRequest> ParseInferRequestWithBinary(std::string_view json, std::string_view binary,
                                                 const ParseLimits& limits) {
  return kserve::Guarded([&]() -> Result<InferRequest> {
    MessageReader reader(Role::kRequest, limits);
    reader.SetBinary(binary);
    GSHARE_RETURN_IF_ERROR(Read(json, limits, "request's JSON", reader));
    return reader.TakeRequest();
  });
}

Result<InferResponse> ParseInferResponseWithBinary(std::string_view json, std::string_view binary,
                                                   const ParseLimits& limits) {
  return kserve::Guarded([&]() -> Result<InferResponse> {
    MessageReader reader(Role::kResponse, limits);
    reader.SetBinary(binary);
    GSHARE_RETURN_IF_ERROR(Read(json, limits, "response's JSON", reader));
    return reader.TakeResponse();
  });
}

Result<InferResponse> ParseInferResponse(std::string_view json, const ParseLimits& limits) {
  return kserve::Guarded([&]() -> Result<InferResponse> {
    MessageReader reader(Role::kResponse, limits);
    GSHARE_RETURN_IF_ERROR(Read(json, limits, "response body", reader));
    return reader.TakeResponse();
  });
}

}  // namespace gshare
