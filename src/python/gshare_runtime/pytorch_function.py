#!/usr/bin/env python3
"""The `pytorch` runtime: a tenant's TorchScript model as a gShare function.

  python3 pytorch_function.py --model-file FILE --name NAME --input SPEC... --output SPEC...
                              [--max-batch N] [--threads N] [--device emulated|cuda]

The node starts it for a spec with `runtime: pytorch` (node/launch_plan.cc), with the spec's one
model file, its tensors (SPEC: "DATATYPE:dim,dim,...:name", -1 for any size, the first dimension
the batch; the name last, so that it may hold any character), max_batch and threads. The model is
loaded with torch.jit.load, which reads TorchScript (code and tensors, not arbitrary pickled Python
objects; TorchScript code may still call file operators such as aten::from_file, so the process's
uid is what confines it), in eval mode; it runs without autograd (inference_mode) on `threads`
intra-op threads and one inter-op thread.

On an emulated GPU (the default) the model's parameters and buffers are moved into the function's
device memory (device.py): the node copies them away when it checkpoints the function and maps them
back, at the same addresses, when it restores it on any GPU, so the outputs after a restore are the
bytes they were before. The activations of a forward pass live in ordinary host memory, and the
outputs are copied out of the forward before its kernel ends. Tensors the module holds otherwise
(constants of a frozen module) stay in host memory; the log says how many bytes were placed.
With --device cuda (the node's GPUs are CUDA GPUs) the model runs on cuda:0, the inputs are copied
there and the outputs back, and the node's switch moves the process's device memory (the
allocator shim preloaded into it, or the driver's checkpoint API); the library is not loaded.

Loading checks the model against the spec: one warm-up forward on zeros of the declared shapes
(batch 1; skipped when another dimension is -1) must give as many outputs as the spec declares, of
its datatypes and shapes, and must not change the model's parameters or buffers (a model traced in
training mode would); then the parameters are frozen read-only. A load that fails prints why on one
line of stderr (the function's log) and exits 1, so the deploy fails with the message. At run time
an input that is not finite is 400; a forward that raises, or outputs that do not match the spec,
are 500 for that request, logged, and the process goes on.
"""

import ctypes
import faulthandler
import os
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gshare_runtime import kserve_unix, runtime_args  # noqa: E402
from gshare_runtime.runtime_args import ModelError, one_line  # noqa: E402

ALIGNMENT = 256  # the device allocator's


def parse_args(argv):
    parser = runtime_args.parser(__doc__.split("\n")[0], "--model-file", "the TorchScript file")
    args = parser.parse_args(argv)
    runtime_args.check_common(parser, args)
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
        try:
            torch.set_num_interop_threads(1)
        except RuntimeError:
            pass  # already set: inter-op work ran before
        target = "cuda:0" if device is None else "cpu"
        try:
            module = torch.jit.load(args.model_file, map_location=target)
        except Exception as error:  # noqa: BLE001 (the loader's message is the tenant's answer)
            raise ValueError(f"{os.path.basename(args.model_file)} is not a TorchScript model "
                             f"torch.jit.load reads: {one_line(error)}") from None
        module.eval()
        self._module = module
        tensors = self._state()
        if device is not None:
            self._place_in_device_memory(tensors)
        versions = [t._version for t in tensors]
        self._warm_up()
        if any(t._version != v for t, v in zip(tensors, versions)):
            raise ValueError("the model writes its own parameters or buffers in a forward pass "
                             "(traced or scripted in training mode?): save it in eval mode")
        if device is not None:
            device.freeze()

    def _state(self):
        """The module's parameters and buffers, each tensor once."""
        tensors, seen = [], set()
        for _, tensor in list(self._module.named_parameters()) + \
                list(self._module.named_buffers()):
            if tensor is None or id(tensor) in seen:
                continue
            seen.add(id(tensor))
            tensors.append(tensor)
        return tensors

    def _place_in_device_memory(self, tensors):
        """Moves every parameter and buffer into one allocation of device memory: from here on
        the node's checkpoints and restores carry them. Tensors that share storage (tied weights)
        share their place."""
        torch = self._torch
        storages = {}  # data_ptr of the storage -> (offset in the allocation, bytes)
        total = 0
        for tensor in tensors:
            if tensor.numel() == 0:
                continue
            storage = tensor.untyped_storage() if hasattr(tensor, "untyped_storage") \
                else tensor.storage().untyped()
            key = storage.data_ptr()
            if key not in storages:
                storages[key] = (total, storage.nbytes())
                total += (storage.nbytes() + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT
        if total == 0:
            print("function: warning: the model has no parameters or buffers to place in device "
                  "memory (a frozen module keeps its weights as constants, in host memory)",
                  file=sys.stderr, flush=True)
            return
        base = self._device.allocate(total, "the model's parameters and buffers")

        def place():
            views = {}
            for key, (offset, nbytes) in storages.items():
                buffer = (ctypes.c_char * nbytes).from_address(base + offset)
                views[key] = torch.frombuffer(buffer, dtype=torch.uint8, count=nbytes)
            for key, (offset, nbytes) in storages.items():
                original = (ctypes.c_char * nbytes).from_address(key)
                views[key].copy_(torch.frombuffer(original, dtype=torch.uint8, count=nbytes))
            for tensor in tensors:
                if tensor.numel() == 0:
                    continue
                storage = tensor.untyped_storage() if hasattr(tensor, "untyped_storage") \
                    else tensor.storage().untyped()
                raw = views[storage.data_ptr()]
                typed = raw.view(tensor.dtype)
                tensor.data = typed.as_strided(tensor.shape, tensor.stride(),
                                               tensor.storage_offset())

        self._device.launch(place)
        self._device.end_work()
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
            self._run(args, batch=1)
        except ModelError as error:
            raise ValueError(f"the model does not match the spec: {error}") from None

    def _run(self, args, batch):
        """The forward and its outputs copied out, inside one kernel: nothing of device memory
        is read once the kernel has ended (an output may be a view of a parameter)."""
        torch = self._torch
        result = []

        def kernel():
            try:
                with torch.inference_mode():
                    outputs = self._module(*args)
            except Exception as error:  # noqa: BLE001 (the model's own failure)
                raise ModelError(f"the model raised {type(error).__name__}: "
                                 f"{one_line(error)}") from None
            result.extend(self._outputs_of(outputs, batch))
            if self._device is None:
                torch.cuda.synchronize()

        if self._device is None:
            kernel()
        else:
            try:
                self._device.launch(kernel)
            finally:
                self._device.end_work()
        return result

    def _outputs_of(self, result, batch):
        """The forward's result as the spec's outputs (a tensor, a tuple or list of them in the
        spec's order, or a dict by name), each copied to fresh host memory."""
        torch = self._torch
        if isinstance(result, torch.Tensor):
            result = [result]
        if isinstance(result, dict):
            missing = [s.name for s in self.outputs if s.name not in result]
            if missing:
                raise ModelError(f"the model gave no output '{missing[0]}'")
            result = [result[s.name] for s in self.outputs]
        if not isinstance(result, (list, tuple)) or len(result) != len(self.outputs):
            count = len(result) if isinstance(result, (list, tuple)) else 1
            raise ModelError(
                f"the model gave {count} output(s), the spec declares {len(self.outputs)}")
        tensors = []
        for spec, tensor in zip(self.outputs, result):
            if not isinstance(tensor, torch.Tensor):
                raise ModelError(f"output '{spec.name}' is not a tensor")
            if tensor.dtype != self._dtypes[spec.datatype]:
                raise ModelError(
                    f"output '{spec.name}' is {tensor.dtype}, the spec declares {spec.datatype}")
            shape = list(tensor.shape)
            if (len(shape) != len(spec.shape) or shape[0] != batch or
                    any(want not in (-1, got) for want, got in zip(spec.shape[1:], shape[1:]))):
                raise ModelError(
                    f"output '{spec.name}' has shape {shape}, the spec declares {spec.shape} "
                    f"(batch {batch})")
            tensors.append((spec, tensor.detach().to("cpu").contiguous().clone()))
        return tensors

    def infer(self, inputs):
        torch = self._torch
        args, batch = [], None
        for spec in self.inputs:
            given = inputs[spec.name]
            dtype = self._dtypes[spec.datatype]
            tensor = torch.frombuffer(given.raw, dtype=dtype) if len(given.raw) \
                else torch.empty(0, dtype=dtype)
            tensor = tensor.reshape(given.shape)
            if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
                raise kserve_unix.BadInput(f"input '{spec.name}' has a NaN or an infinity")
            if dtype == torch.bool and len(given.raw) and \
                    int(torch.frombuffer(given.raw, dtype=torch.uint8).max()) > 1:
                raise kserve_unix.BadInput(f"input '{spec.name}': a BOOL byte is neither 0 nor 1")
            if batch is None:
                batch = given.shape[0]
            elif given.shape[0] != batch:
                raise kserve_unix.BadInput("the inputs' first dimensions (the batch) differ")
            args.append(tensor if self._device is not None else tensor.to("cuda:0"))
        outputs = self._run(args, batch)  # a ModelError is a 500, which kserve_unix logs
        return [kserve_unix.Tensor(spec.name, spec.datatype, list(tensor.shape), None,
                                   tensor.numpy().tobytes())
                for spec, tensor in outputs]


def main(argv):
    args = parse_args(argv)

    faulthandler.enable()  # a crash (a write to frozen memory, say) leaves its trace in the log
    kserve_unix.keep_freed_memory()  # before any thread: each request reuses the last one's pages
    sys.stdout.reconfigure(line_buffering=True)

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
