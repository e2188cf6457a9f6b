#!/usr/bin/env python3
"""The `pytorch` runtime: a tenant's TorchScript model as a gShare function.

  python3 pytorch_function.py --model-file FILE --name NAME --input SPEC... --output SPEC...
                              [--max-batch N] [--threads N] [--device emulated|cuda]

The node starts it for a spec with `runtime: pytorch` (node/launch_plan.cc), with the spec's one
model file, its tensors (SPEC: "name,DATATYPE,dim,dim,...", -1 for any size, the first dimension
the batch), max_batch and threads. The model is loaded with torch.jit.load, which reads TorchScript
only (code and tensors, never arbitrary pickled objects), in eval mode; it runs without autograd
(inference_mode) on `threads` intra-op threads.

On an emulated GPU (the default) the model's parameters and buffers are moved into the function's
device memory (device.py): the node copies them away when it checkpoints the function and maps them
back, at the same addresses, when it restores it on any GPU, so the outputs after a restore are the
bytes they were before. They are frozen (read-only) once placed. The activations of a forward pass
live in ordinary host memory. With --device cuda the model runs on cuda:0 and the node's switch
(the allocator shim or the driver's checkpoint) moves it.

Loading checks the model against the spec: one warm-up forward on zeros of the declared shapes
(batch 1; skipped when another dimension is -1), whose outputs must be as many as the spec's and of
their datatypes. A load that fails prints why on stderr (the function's log) and exits 1, so the
deploy fails with the message. At run time an input that is not finite, or a forward that raises,
answers 400 or 500 for that request and the process goes on.
"""

import argparse
import ctypes
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gshare_runtime import kserve_unix  # noqa: E402

MAX_THREADS = 64
DATATYPES = ("BOOL", "UINT8", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64")
ALIGNMENT = 256  # the device allocator's


def parse_tensor(text):
    """A TensorSpec from "name,DATATYPE,dim,dim,..."."""
    parts = text.split(",")
    if len(parts) < 2 or not parts[0]:
        raise argparse.ArgumentTypeError(f"'{text}' is not name,DATATYPE,dim,...")
    name, datatype = parts[0], parts[1]
    if datatype not in DATATYPES:
        raise argparse.ArgumentTypeError(
            f"tensor '{name}': the pytorch runtime takes {', '.join(DATATYPES)}, not {datatype}")
    try:
        shape = [int(d) for d in parts[2:]]
    except ValueError:
        raise argparse.ArgumentTypeError(f"tensor '{name}': a dimension is not a number") from None
    if not shape or any(d < -1 for d in shape):
        raise argparse.ArgumentTypeError(f"tensor '{name}': a shape of sizes or -1 is needed")
    return kserve_unix.TensorSpec(name, datatype, shape)


def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-file", required=True, help="the TorchScript file")
    parser.add_argument("--name", required=True, help="the function's name")
    parser.add_argument("--input", action="append", type=parse_tensor, required=True,
                        dest="inputs", help="name,DATATYPE,dims (repeated)")
    parser.add_argument("--output", action="append", type=parse_tensor, required=True,
                        dest="outputs", help="name,DATATYPE,dims (repeated)")
    parser.add_argument("--max-batch", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--device", choices=("emulated", "cuda"), default="emulated")
    args = parser.parse_args(argv)
    if not 1 <= args.threads <= MAX_THREADS:
        parser.error(f"--threads must be from 1 to {MAX_THREADS}")
    if args.max_batch < 1:
        parser.error("--max-batch must be at least 1")
    return args


class TorchScriptModel:
    platform = "pytorch_torchscript"
    version = "1"
    raw_tensors = True  # kserve_unix hands the tensors' bytes, not lists

    def __init__(self, args, torch, device):
        self.name = args.name
        self.inputs = args.inputs
        self.outputs = args.outputs
        self.max_batch = args.max_batch
        self._torch = torch
        self._device = device  # device.Device on an emulated GPU, None on CUDA
        self._dtypes = {
            "BOOL": torch.bool, "UINT8": torch.uint8, "INT8": torch.int8,
            "INT16": torch.int16, "INT32": torch.int32, "INT64": torch.int64,
            "FP16": torch.float16, "FP32": torch.float32, "FP64": torch.float64,
        }
        torch.set_num_threads(args.threads)
        target = "cuda:0" if device is None else "cpu"
        try:
            module = torch.jit.load(args.model_file, map_location=target)
        except Exception as error:  # noqa: BLE001 (the loader's message is the tenant's answer)
            raise ValueError(f"{os.path.basename(args.model_file)} is not a TorchScript model "
                             f"torch.jit.load reads: {error}") from None
        module.eval()
        self._module = module
        if device is not None:
            self._place_in_device_memory()
        self._warm_up()

    def _place_in_device_memory(self):
        """Moves every parameter and buffer into one allocation of device memory, then freezes
        it: from here on the node's checkpoints and restores carry them."""
        torch = self._torch
        tensors, seen = [], set()
        for _, tensor in list(self._module.named_parameters()) + list(self._module.named_buffers()):
            if tensor is None or tensor.data_ptr() in seen or tensor.numel() == 0:
                continue
            seen.add(tensor.data_ptr())
            tensors.append(tensor)
        sizes = [t.numel() * t.element_size() for t in tensors]
        offsets, total = [], 0
        for size in sizes:
            offsets.append(total)
            total += (size + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        if total == 0:
            return
        base = self._device.allocate(total, "the model's parameters and buffers")

        def place():
            for tensor, size, offset in zip(tensors, sizes, offsets):
                buffer = (ctypes.c_char * size).from_address(base + offset)
                view = torch.frombuffer(buffer, dtype=tensor.dtype,
                                        count=tensor.numel()).view(tensor.shape)
                view.copy_(tensor.detach().contiguous())
                tensor.data = view

        self._device.launch(place)
        self._device.end_work()
        self._device.freeze()
        print(f"function: {len(tensors)} parameters and buffers ({total} bytes) in device memory",
              file=sys.stderr, flush=True)

    def _warm_up(self):
        torch = self._torch
        if any(d == -1 for spec in self.inputs for d in spec.shape[1:]):
            return  # no shape to try it with
        args = [torch.zeros([1] + list(spec.shape[1:]), dtype=self._dtypes[spec.datatype])
                for spec in self.inputs]
        if self._device is None:
            args = [a.to("cuda:0") for a in args]
        try:
            self._outputs_of(self._forward(args), batch=1)
        except kserve_unix.BadInput as error:
            raise ValueError(f"the model does not match the spec: {error}") from None
        except Exception as error:  # noqa: BLE001
            raise ValueError(f"the model does not run on the spec's inputs: "
                             f"{type(error).__name__}: {error}") from None

    def _forward(self, args):
        result = []

        def kernel():
            with self._torch.inference_mode():
                result.append(self._module(*args))
            if self._device is None:
                self._torch.cuda.synchronize()

        if self._device is None:
            kernel()
        else:
            try:
                self._device.launch(kernel)
            finally:
                self._device.end_work()
        return result[0]

    def _outputs_of(self, result, batch):
        """The forward's result as the spec's outputs: a tensor, a tuple or list of them in the
        spec's order, or a dict by name."""
        torch = self._torch
        if isinstance(result, torch.Tensor):
            result = [result]
        if isinstance(result, dict):
            missing = [s.name for s in self.outputs if s.name not in result]
            if missing:
                raise kserve_unix.BadInput(f"the model gave no output '{missing[0]}'")
            result = [result[s.name] for s in self.outputs]
        if not isinstance(result, (list, tuple)) or len(result) != len(self.outputs):
            count = len(result) if isinstance(result, (list, tuple)) else 1
            raise kserve_unix.BadInput(
                f"the model gave {count} output(s), the spec declares {len(self.outputs)}")
        tensors = []
        for spec, tensor in zip(self.outputs, result):
            if not isinstance(tensor, torch.Tensor):
                raise kserve_unix.BadInput(f"output '{spec.name}' is not a tensor")
            if tensor.dtype != self._dtypes[spec.datatype]:
                raise kserve_unix.BadInput(
                    f"output '{spec.name}' is {tensor.dtype}, the spec declares {spec.datatype}")
            shape = list(tensor.shape)
            if (len(shape) != len(spec.shape) or shape[0] != batch or
                    any(want not in (-1, got) for want, got in zip(spec.shape[1:], shape[1:]))):
                raise kserve_unix.BadInput(
                    f"output '{spec.name}' has shape {shape}, the spec declares {spec.shape} "
                    f"(batch {batch})")
            tensors.append((spec, tensor.detach().to("cpu").contiguous()))
        return tensors

    def infer(self, inputs):
        torch = self._torch
        args, batch = [], None
        for spec in self.inputs:
            given = inputs[spec.name]
            tensor = torch.frombuffer(given.raw, dtype=self._dtypes[spec.datatype]) \
                if len(given.raw) else torch.empty(0, dtype=self._dtypes[spec.datatype])
            tensor = tensor.reshape(given.shape)
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                raise kserve_unix.BadInput(f"input '{spec.name}' has a NaN or an infinity")
            if batch is None:
                batch = given.shape[0]
            elif given.shape[0] != batch:
                raise kserve_unix.BadInput("the inputs' first dimensions (the batch) differ")
            args.append(tensor if self._device is not None else tensor.to("cuda:0"))
        if batch > self.max_batch:
            raise kserve_unix.BadInput(f"a batch of {batch}; the function takes at most "
                                       f"{self.max_batch}")
        outputs = self._outputs_of(self._forward(args), batch)
        return [kserve_unix.Tensor(spec.name, spec.datatype, list(tensor.shape), None,
                                   tensor.numpy().tobytes())
                for spec, tensor in outputs]


def main(argv):
    args = parse_args(argv)

    def load():
        # torch.frombuffer warns on read-only buffers (a request's bytes); the tensors made from
        # them are only read.
        warnings.filterwarnings("ignore", message="The given buffer is not writable")
        import torch  # noqa: PLC0415 (after the socket is bound: the node sees 503 meanwhile)

        device = None
        if args.device == "emulated":
            from gshare_runtime import device as device_module  # noqa: PLC0415

            device = device_module.Device()
        return TorchScriptModel(args, torch, device)

    kserve_unix.serve(load, args.name)


if __name__ == "__main__":
    main(sys.argv[1:])
