#!/usr/bin/env python3
"""The `python` runtime: a tenant's handler as a gShare function.

  python3 python_function.py --handler FILE --name NAME --input SPEC... --output SPEC...
                             [--max-batch N] [--threads N] [--device emulated|cuda]

The node starts it for a spec with `runtime: python` (node/launch_plan.cc): the spec's first model
file is the handler, a Python file that defines

    class Model:
        def load(self): ...                 # once, before the function is ready
        def predict(self, inputs): ...      # per batch: {name: numpy array} -> {name: array}

with the tensors the spec declares (SPEC: "DATATYPE:dim,dim,...:name", the first dimension the
batch). The other model files lie beside it; the process starts in the handler's folder, so load()
reads them by their names, and its folder is searched (last) for the modules it imports. numpy and torch are there to import; their libraries compute on
`threads` threads (OMP_NUM_THREADS and its kind).

It is the tenant's code: the node lets a tenant deploy it only where the tenant's functions run as
a uid of their own. The handler's memory is host memory: a checkpoint and a restore move the
function's (empty) device memory, not the handler's state, which stays in the process.

Each predict runs as one kernel launch under the node's compute grant (with --device cuda, on a
node of CUDA GPUs, the function library is not loaded and predict runs as it is: what it puts on
the GPU is the process's own, which the node's switch moves). Its outputs must be those
the spec declares (arrays of its datatypes and shapes, the batch first). A handler that does not
import, lacks Model, or raises in load() fails the load: the reason on one line of stderr (the
function's log), exit 1, and the deploy fails with it. A predict that raises, or outputs that do not
match the spec, are 500 for that batch, logged, and the process goes on; an input that is not finite
is 400 before predict sees it.
"""

import faulthandler
import importlib.util
import os
import sys
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gshare_runtime import kserve_unix, runtime_args  # noqa: E402
from gshare_runtime.runtime_args import ModelError, one_line  # noqa: E402


def parse_args(argv):
    parser = runtime_args.parser(__doc__.split("\n")[0], "--handler", "the handler's file")
    args = parser.parse_args(argv)
    runtime_args.check_common(parser, args)
    return args


class HandlerModel:
    platform = "python"
    version = "1"
    raw_tensors = True  # kserve_unix hands the tensors' bytes, not lists

    def __init__(self, args, numpy, device):
        self.name = args.name
        self.inputs = args.inputs
        self.outputs = args.outputs
        self._np = numpy
        self._device = device
        self._dtypes = {
            "BOOL": numpy.bool_, "UINT8": numpy.uint8, "INT8": numpy.int8,
            "INT16": numpy.int16, "INT32": numpy.int32, "INT64": numpy.int64,
            "FP16": numpy.float16, "FP32": numpy.float32, "FP64": numpy.float64,
        }
        handler = os.path.abspath(args.handler)
        self._handler = handler
        # The handler's folder: where load() reads its files, and where its own modules are
        # imported from (after everything else, so that none of them shadows a library).
        os.chdir(os.path.dirname(handler))
        sys.path.append(os.path.dirname(handler))
        module_spec = importlib.util.spec_from_file_location("handler", handler)
        if module_spec is None or module_spec.loader is None:
            raise ValueError(f"{os.path.basename(handler)} is not a Python file")
        module = importlib.util.module_from_spec(module_spec)
        sys.modules["handler"] = module  # as an import would (dataclasses, pickle need it)
        try:
            module_spec.loader.exec_module(module)
        except BaseException as error:  # noqa: BLE001 (a syntax error, an import: the tenant's)
            raise ValueError(f"{os.path.basename(handler)} does not import: "
                             f"{type(error).__name__}: {one_line(error)}") from None
        model_class = getattr(module, "Model", None)
        if model_class is None or not callable(getattr(model_class, "predict", None)):
            raise ValueError(f"{os.path.basename(handler)} defines no class Model with predict()")
        try:
            self._model = model_class()
            if callable(getattr(self._model, "load", None)):
                self._model.load()
        except BaseException as error:  # noqa: BLE001
            raise ValueError(f"Model.load raised {type(error).__name__}: "
                             f"{one_line(error)}") from None

    def infer(self, inputs):
        np = self._np
        arrays, batch = {}, None
        for spec in self.inputs:
            given = inputs[spec.name]
            dtype = self._dtypes[spec.datatype]
            # A copy the handler may change in place (the request's bytes are read-only).
            array = np.frombuffer(given.raw, dtype=dtype).reshape(given.shape).copy()
            if np.issubdtype(array.dtype, np.floating) and not np.isfinite(array).all():
                raise kserve_unix.BadInput(f"input '{spec.name}' has a NaN or an infinity")
            if spec.datatype == "BOOL" and len(given.raw) and \
                    int(np.frombuffer(given.raw, dtype=np.uint8).max()) > 1:
                raise kserve_unix.BadInput(f"input '{spec.name}': a BOOL byte is neither 0 nor 1")
            if batch is None:
                batch = given.shape[0]
            elif given.shape[0] != batch:
                raise kserve_unix.BadInput("the inputs' first dimensions (the batch) differ")
            arrays[spec.name] = array
        result = []

        def kernel():
            try:
                outputs = self._model.predict(arrays)
            except (SystemExit, KeyboardInterrupt) as error:
                # The handler ends its process: so be it, with a line in the log (the node's
                # crash-loop rule takes over).
                print(f"function: predict ended the process: {type(error).__name__}: "
                      f"{one_line(error)}", file=sys.stderr, flush=True)
                sys.stdout.flush()
                os._exit(error.code if isinstance(error, SystemExit) and
                         isinstance(error.code, int) and error.code != 0 else 1)
            except Exception as error:  # noqa: BLE001 (the handler's own failure)
                traceback.print_exception(error, file=sys.stderr)
                frames = traceback.extract_tb(error.__traceback__)
                own = [f for f in frames if f.filename == self._handler] or frames[-1:]
                where = f" (handler line {own[-1].lineno})" if own else ""
                raise ModelError(f"predict raised {type(error).__name__}: {one_line(error)}"
                                 f"{where}") from None
            result.extend(self._outputs_of(outputs, batch))

        if self._device is None:
            kernel()
            return result
        try:
            self._device.launch(kernel)
        finally:
            self._device.end_work()
        return result

    def _outputs_of(self, outputs, batch):
        np = self._np
        if not isinstance(outputs, dict):
            raise ModelError(f"predict returned {type(outputs).__name__}, not a dict of arrays")
        tensors = []
        for spec in self.outputs:
            if spec.name not in outputs:
                raise ModelError(f"predict gave no output '{spec.name}'")
            want = np.dtype(self._dtypes[spec.datatype])
            value = outputs[spec.name]
            if not isinstance(value, np.ndarray):
                # A list or a number: taken as the declared datatype where it fits it.
                value = np.asarray(value)
                if np.can_cast(value.dtype, want, casting="same_kind"):
                    value = value.astype(want)
            array = np.ascontiguousarray(value) if value.ndim > 0 else value
            if array.dtype != want:
                raise ModelError(f"output '{spec.name}' is {array.dtype}, the spec declares "
                                 f"{spec.datatype}")
            shape = list(array.shape)
            if (len(shape) != len(spec.shape) or shape[0] != batch or
                    any(want not in (-1, got) for want, got in zip(spec.shape[1:], shape[1:]))):
                raise ModelError(f"output '{spec.name}' has shape {shape}, the spec declares "
                                 f"{spec.shape} (batch {batch})")
            tensors.append(kserve_unix.Tensor(spec.name, spec.datatype, shape, None,
                                              array.tobytes()))
        return tensors


def main(argv):
    args = parse_args(argv)
    faulthandler.enable()
    kserve_unix.keep_freed_memory()  # before any thread: each request reuses the last one's pages
    sys.stdout.reconfigure(line_buffering=True)  # the handler's prints reach the log in order

    def load():
        # The handler's numeric libraries (numpy's BLAS, torch) compute on `threads` threads.
        for variable in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
            os.environ[variable] = str(args.threads)
        import numpy  # noqa: PLC0415 (after the socket is bound: the node sees 503 meanwhile)

        device = None
        if args.device == "emulated":
            from gshare_runtime import device as device_module  # noqa: PLC0415

            device = device_module.Device()
        return HandlerModel(args, numpy, device)

    kserve_unix.serve(load, args.name)


if __name__ == "__main__":
    main(sys.argv[1:])
