// ModelFunction: an example function's inference on its (emulated) GPU.
//
// Holds the model's weights in the function's device memory (FunctionRuntime, fn/runtime.h),
// loaded once and frozen, so that a checkpoint of an idle instance copies nothing twice. Each
// batch allocates its inputs, workspace and logits in device memory for the length of the call
// (an allocation past the slice's quota fails that call only) and runs the forward pass as one
// kernel. The echo function keeps a small state in device memory and answers its inputs.
//
// Thread safety: Infer may be called from several threads; kernels of one instance run one at a
// time (the runtime's Launch).
#pragma once

#include <memory>
#include <string>

#include "examples/models/model_layout.h"
#include "gshare/fn/runtime.h"
#include "gshare/protocol/model_metadata.h"
#include "gshare/tensor/tensor.h"

namespace gshare::examples {

class ModelFunction {
 public:
  // "mlp", "cnn" or "echo". Loads the model's weights from `weights_path` (unused for echo; empty:
  // the bundled weights, from the default seed) into device memory, and freezes them (fast swap
  // without digests); `freeze` false leaves them writable, so that every checkpoint is told the
  // image was written, as an unmodified CUDA program behind the shim tells it. Errors: an unknown
  // model, an unreadable or wrong weights file, the quota.
  static Result<std::unique_ptr<ModelFunction>> Create(fn::FunctionRuntime& runtime,
                                                       const std::string& model,
                                                       const std::string& weights_path,
                                                       bool freeze = true);

  const std::string& model() const { return model_; }
  // The tensors its metadata reports: for mlp and cnn, "input" FP32 [-1, <the model's input
  // shape>] and "logits" FP32 [-1, 10]; none for echo, which takes any one input.
  ModelTensors tensors() const;
  // The output of a batch: for mlp and cnn, "logits" FP32 [batch, 10] from input FP32
  // [batch, <the model's input shape>]; for echo, the input renamed "output". InvalidArgument
  // for a wrong input; ResourceExhausted when the batch does not fit the slice's quota.
  Result<Tensor> Infer(const Tensor& input);

 private:
  ModelFunction(fn::FunctionRuntime& runtime, std::string model)
      : runtime_(runtime), model_(std::move(model)) {}

  fn::FunctionRuntime& runtime_;
  const std::string model_;
  const ModelLayout* layout_ = nullptr;  // null for echo
  fn::DeviceAllocation weights_;         // or echo's state
};

}  // namespace gshare::examples
