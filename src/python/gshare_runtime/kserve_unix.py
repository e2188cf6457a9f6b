"""The gShare function protocol, server side, for Python functions: standard library only.

HTTP/1.1 over the Unix socket a node names in GSHARE_SOCKET, one request per connection, in the
KServe v2 (Open Inference Protocol) JSON of docs/protocol.md, or its binary tensor data extension
(the JSON's length in Inference-Header-Content-Length, then the tensors' little-endian bytes; the
answer in the same form when the request's parameters say binary_data_output), which the node
uses because GET /v2 lists it:

  GET  /v2                       the server's metadata: its extensions (binary_tensor_data)
  GET  /v2/health/live           200 while the process runs
  GET  /v2/health/ready          200 once the model is loaded, 503 before
  GET  /v2/models/{name}         the model's metadata: inputs and outputs (name, datatype, shape)
  GET  /v2/models/{name}/ready   as /v2/health/ready
  POST /v2/models/{name}/infer   an inference request

Errors are {"error": "..."}: 400 for a bad request (malformed JSON, an input that does not match
the model's metadata), 404 for another path or model name, 405 for another method, 503 before
the model is loaded, 507 when the model runs out of device memory (that request fails, the
process goes on), 500 for anything else.

A model is any object with `name`, `version`, `platform`, `inputs` and `outputs` (lists of
TensorSpec; -1 in a shape is any size) and `infer(inputs)`, which takes {name: Tensor} and
returns a list of Tensor, raising BadInput or OutOfMemory. A model whose `raw_tensors` is true
takes and gives the tensors' bytes (little-endian, row-major) in `Tensor.raw` instead of lists
in `Tensor.data`: no per-element work in Python (fixed-size datatypes only; an input's floats
are the model's to check). This module knows nothing of the model
framework, nor of gShare's checkpoints: a function that uses it is an ordinary process.
"""

import ctypes
import http.server
import json
import os
import signal
import socketserver
import stat
import struct
import sys
import threading
from dataclasses import dataclass

MAX_BODY_BYTES = 256 * 2**20
# The exit status of a process whose model did not load because of what the tenant gave: the node
# answers the deploy 400 (fn::kExitModelRejected, sysexits' EX_CONFIG).
EXIT_MODEL_REJECTED = 78
_FLOAT_LIMITS = {"FP16": 65504.0, "FP32": 3.4028234663852886e38, "FP64": sys.float_info.max}
_INT_RANGES = {
    "INT8": (-(2**7), 2**7 - 1),
    "INT16": (-(2**15), 2**15 - 1),
    "INT32": (-(2**31), 2**31 - 1),
    "INT64": (-(2**63), 2**63 - 1),
    "UINT8": (0, 2**8 - 1),
    "UINT16": (0, 2**16 - 1),
    "UINT32": (0, 2**32 - 1),
    "UINT64": (0, 2**64 - 1),
}
DATATYPES = frozenset(_FLOAT_LIMITS) | frozenset(_INT_RANGES) | {"BOOL"}
# The struct format of one element of each fixed-size datatype, little-endian.
_FORMATS = {"BOOL": "?", "UINT8": "B", "UINT16": "H", "UINT32": "I", "UINT64": "Q", "INT8": "b",
            "INT16": "h", "INT32": "i", "INT64": "q", "FP16": "e", "FP32": "f", "FP64": "d"}


class BadInput(ValueError):
    """The request does not fit the model: answered 400."""


class OutOfMemory(Exception):
    """The model ran out of device memory for this request: answered 507."""


@dataclass(frozen=True)
class TensorSpec:
    name: str
    datatype: str
    shape: list  # -1: any size


@dataclass
class Tensor:
    name: str
    datatype: str
    shape: list
    data: list  # flat, row-major; None where `raw` holds the tensor
    raw: object = None  # the bytes, for a model with raw_tensors (bytes, bytearray, memoryview)


def _reject_constant(text):
    raise BadInput(f"'{text}' is not valid JSON (NaN and infinities cannot be sent)")


def _element_count(shape):
    count = 1
    for dim in shape:
        count *= dim
    return count


def _flatten(data, shape, where):
    """Flat row-major data from `data`, flat or nested exactly as `shape` (as the C++ codec)."""
    if not isinstance(data, list):
        raise BadInput(f"{where}: data must be an array")
    if not any(isinstance(item, list) for item in data):
        if len(data) != _element_count(shape):
            raise BadInput(
                f"{where}: data holds {len(data)} elements, shape {shape} needs "
                f"{_element_count(shape)}"
            )
        return data
    flat = []

    def walk(node, depth):
        if depth == len(shape):
            if isinstance(node, list):
                raise BadInput(f"{where}: data is nested deeper than shape {shape}")
            flat.append(node)
            return
        if not isinstance(node, list) or len(node) != shape[depth]:
            raise BadInput(f"{where}: data is not nested as shape {shape}")
        for item in node:
            walk(item, depth + 1)

    walk(data, 0)
    return flat


def _check_elements(data, datatype, where):
    if datatype == "BOOL":
        if not all(type(x) is bool for x in data):
            raise BadInput(f"{where}: BOOL data takes true and false only")
        return
    if datatype in _INT_RANGES:
        low, high = _INT_RANGES[datatype]
        for i, x in enumerate(data):
            if type(x) is not int or not low <= x <= high:
                raise BadInput(
                    f"{where}: data element {i} is not valid for {datatype} (expected an "
                    f"integer in [{low}, {high}])"
                )
        return
    limit = _FLOAT_LIMITS[datatype]
    for i, x in enumerate(data):
        if type(x) not in (int, float) or not abs(x) <= limit:
            raise BadInput(f"{where}: data element {i} is not valid for {datatype}")


def _binary_elements(raw, datatype, count, where):
    """The `count` elements of `datatype` in `raw` (the binary extension's bytes), as a list."""
    if datatype == "BYTES":
        out, at = [], 0
        while at < len(raw) and len(out) < count:
            if len(raw) - at < 4:
                raise BadInput(f"{where}: a BYTES length is cut short")
            (length,) = struct.unpack_from("<I", raw, at)
            at += 4
            if length > len(raw) - at:
                raise BadInput(f"{where}: element {len(out)} is longer than its bytes")
            out.append(bytes(raw[at : at + length]))
            at += length
        if len(out) != count or at != len(raw):
            raise BadInput(f"{where}: binary_data_size does not hold {count} elements exactly")
        return out
    fmt = "B" if datatype == "BOOL" else _FORMATS[datatype]
    if len(raw) != count * struct.calcsize(fmt):
        raise BadInput(f"{where}: binary_data_size is {len(raw)} bytes; its shape takes "
                       f"{count * struct.calcsize(fmt)}")
    try:
        values = list(struct.unpack(f"<{count}{fmt}", raw))
    except struct.error as error:
        raise BadInput(f"{where}: {error}") from None
    if datatype == "BOOL":
        if any(v > 1 for v in values):
            raise BadInput(f"{where}: a BOOL byte is neither 0 nor 1")
        return [v == 1 for v in values]
    if datatype in _FLOAT_LIMITS:
        _check_elements(values, datatype, where)  # finite, as the JSON path has them
    return values


def _item_bytes(datatype):
    return 1 if datatype == "BOOL" else struct.calcsize(_FORMATS[datatype])


def _values(tensor):
    """An output's elements as a list (for a JSON answer)."""
    if tensor.raw is None:
        return tensor.data
    count = len(tensor.raw) // _item_bytes(tensor.datatype)
    values = list(struct.unpack(f"<{count}{_FORMATS[tensor.datatype]}", tensor.raw))
    return [v != 0 for v in values] if tensor.datatype == "BOOL" else values


def _binary_bytes(tensor):
    """The binary extension's bytes of an output."""
    if tensor.raw is not None:
        return bytes(tensor.raw)
    if tensor.datatype == "BYTES":
        parts = []
        for element in tensor.data:
            data = element.encode() if isinstance(element, str) else bytes(element)
            parts.append(struct.pack("<I", len(data)) + data)
        return b"".join(parts)
    return struct.pack(f"<{len(tensor.data)}{_FORMATS[tensor.datatype]}", *tensor.data)


def parse_infer_request(body, model, json_length=None):
    """The inputs ({name: Tensor}), the requested output names (None: all), the request id and
    whether the answer goes in the binary form. `json_length`: Inference-Header-Content-Length,
    where the request gave one (the rest of the body is the inputs' binary data)."""
    binary = None
    if json_length is not None:
        if not 0 <= json_length <= len(body):
            raise BadInput("Inference-Header-Content-Length is not a length within the body")
        body, binary = body[:json_length], memoryview(body)[json_length:]
    used = 0
    try:
        message = json.loads(body, parse_constant=_reject_constant)
    except (ValueError, RecursionError) as error:
        if isinstance(error, BadInput):
            raise
        raise BadInput(f"the request is not valid JSON: {error}") from None
    if not isinstance(message, dict) or not isinstance(message.get("inputs"), list):
        raise BadInput("the request must be a JSON object with an 'inputs' array")
    specs = {spec.name: spec for spec in model.inputs}
    raw_tensors = getattr(model, "raw_tensors", False)
    inputs = {}
    for entry in message["inputs"]:
        if not isinstance(entry, dict):
            raise BadInput("every input must be an object")
        name = entry.get("name")
        if not isinstance(name, str) or not name:
            raise BadInput("every input needs a non-empty 'name'")
        where = f"input '{name}'"
        if name in inputs:
            raise BadInput(f"{where} appears twice")
        if name not in specs:
            raise BadInput(f"{where}: model '{model.name}' has no such input")
        parameters = entry.get("parameters") or {}
        if not isinstance(parameters, dict):
            raise BadInput(f"{where}: 'parameters' is not an object")
        spec = specs[name]
        datatype, shape = entry.get("datatype"), entry.get("shape")
        if datatype != spec.datatype:
            raise BadInput(f"{where}: datatype {datatype!r}, the model takes {spec.datatype}")
        if (
            not isinstance(shape, list)
            or not all(type(d) is int and d >= 0 for d in shape)
            or len(shape) != len(spec.shape)
            or any(want not in (-1, got) for want, got in zip(spec.shape, shape))
        ):
            raise BadInput(f"{where}: shape {shape}, the model takes {spec.shape}")
        if "binary_data_size" in parameters:
            size = parameters["binary_data_size"]
            if binary is None:
                raise BadInput(f"{where}: binary_data_size without binary data "
                               "(Inference-Header-Content-Length)")
            if type(size) is not int or not 0 <= size <= len(binary) - used:
                raise BadInput(f"{where}: binary_data_size is not within the binary data left")
            count = 1
            for d in shape:
                count *= d
            if raw_tensors:
                if size != count * _item_bytes(datatype):
                    raise BadInput(f"{where}: binary_data_size is {size} bytes; its shape takes "
                                   f"{count * _item_bytes(datatype)}")
                inputs[name] = Tensor(name, datatype, shape, None, binary[used : used + size])
                used += size
                continue
            data = _binary_elements(binary[used : used + size], datatype, count, where)
            used += size
        else:
            data = _flatten(entry.get("data"), shape, where)
            _check_elements(data, datatype, where)
            if raw_tensors:
                raw = struct.pack(f"<{len(data)}{_FORMATS[datatype]}", *data)
                inputs[name] = Tensor(name, datatype, shape, None, raw)
                continue
        inputs[name] = Tensor(name, datatype, shape, data)
    missing = sorted(set(specs) - set(inputs))
    if missing:
        raise BadInput(f"missing input(s): {', '.join(missing)}")
    requested = None
    if "outputs" in message:
        if not isinstance(message["outputs"], list) or not all(
            isinstance(o, dict) and isinstance(o.get("name"), str) for o in message["outputs"]
        ):
            raise BadInput("'outputs' must be an array of objects with a 'name'")
        requested = [o["name"] for o in message["outputs"]]
        known = {spec.name for spec in model.outputs}
        unknown = [name for name in requested if name not in known]
        if unknown:
            raise BadInput(f"model '{model.name}' has no output '{unknown[0]}'")
    request_id = message.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise BadInput("'id' must be a string")
    if binary is not None and used != len(binary):
        raise BadInput(f"{len(binary) - used} bytes of binary data belong to no input")
    request_parameters = message.get("parameters") or {}
    binary_output = isinstance(request_parameters, dict) and \
        request_parameters.get("binary_data_output") is True
    return inputs, requested, request_id, binary_output


def metadata(model):
    def specs(items):
        return [{"name": s.name, "datatype": s.datatype, "shape": list(s.shape)} for s in items]

    return {
        "name": model.name,
        "versions": [model.version],
        "platform": model.platform,
        "inputs": specs(model.inputs),
        "outputs": specs(model.outputs),
    }


def infer_response(model, outputs, requested, request_id, binary_output=False):
    """The answer's JSON object and, for the binary form, the outputs' bytes after it (else None)."""
    chosen = [o for o in outputs if requested is None or o.name in requested]
    response = {"model_name": model.name, "model_version": model.version}
    if request_id is not None:
        response["id"] = request_id
    if not binary_output:
        response["outputs"] = [
            {"name": o.name, "datatype": o.datatype, "shape": list(o.shape), "data": _values(o)}
            for o in chosen
        ]
        return response, None
    parts = [_binary_bytes(o) for o in chosen]
    response["outputs"] = [
        {"name": o.name, "datatype": o.datatype, "shape": list(o.shape),
         "parameters": {"binary_data_size": len(part)}}
        for o, part in zip(chosen, parts)
    ]
    return response, b"".join(parts)


class FunctionServer(socketserver.UnixStreamServer):
    """Serves one connection at a time; `model` is None until loaded."""

    def __init__(self, socket_path):
        self.model = None
        self.model_name = None
        super().__init__(socket_path, _Handler)


class _Handler(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "gshare-python-function"

    def log_message(self, format, *args):  # noqa: A002 (the base class's signature)
        pass  # one line per request would flood the function's log; errors are logged below

    def address_string(self):
        return "unix"

    def _answer(self, status, body, binary=None):
        payload = json.dumps(body, separators=(",", ":")).encode()
        self.send_response(status)
        if binary is None:
            self.send_header("Content-Type", "application/json")
        else:
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Inference-Header-Content-Length", str(len(payload)))
            payload += binary
        self.send_header("Content-Length", str(len(payload)))
        self.send_header("Connection", "close")
        self.end_headers()
        self.wfile.write(payload)
        self.close_connection = True

    def _error(self, status, message):
        if status >= 500 and status != 503:
            print(f"function: {status}: {message}", file=sys.stderr, flush=True)
        self._answer(status, {"error": message})

    def _read_body(self):
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            parts, total = [], 0
            while True:
                size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
                if size == 0:
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                        pass
                    return b"".join(parts)
                total += size
                if total > MAX_BODY_BYTES:
                    raise BadInput(f"the request body exceeds {MAX_BODY_BYTES} bytes")
                parts.append(self.rfile.read(size))
                self.rfile.readline()
        length = int(self.headers.get("Content-Length") or 0)
        if length < 0 or length > MAX_BODY_BYTES:
            raise BadInput(f"the request body exceeds {MAX_BODY_BYTES} bytes")
        return self.rfile.read(length)

    def _route(self):
        """(kind, allowed method) of the request's path, or None."""
        path = self.path.split("?", 1)[0]
        if path == "/v2":
            return "server", "GET"
        if path == "/v2/health/live":
            return "live", "GET"
        if path == "/v2/health/ready":
            return "ready", "GET"
        prefix = "/v2/models/"
        if path.startswith(prefix):
            parts = path[len(prefix) :].split("/")
            name = self.server.model_name
            if parts[0] == name:
                if len(parts) == 1:
                    return "metadata", "GET"
                if parts[1:] == ["ready"]:
                    return "ready", "GET"
                if parts[1:] == ["infer"]:
                    return "infer", "POST"
        return None

    def _handle(self, method):
        route = self._route()
        if route is None:
            return self._error(404, f"no such endpoint: {method} {self.path}")
        kind, allowed = route
        if method != allowed:
            return self._error(405, f"{method} is not allowed on {self.path}")
        model = self.server.model
        if kind == "live":
            return self._answer(200, {"live": True})
        if kind == "server":
            return self._answer(200, {"name": self.server_version,
                                      "extensions": ["binary_tensor_data"]})
        if kind == "ready":
            if model is None:
                return self._error(503, "the model is loading")
            return self._answer(200, {"ready": True})
        if model is None:
            return self._error(503, "the model is loading")
        if kind == "metadata":
            return self._answer(200, metadata(model))
        try:
            json_length = self.headers.get("Inference-Header-Content-Length")
            if json_length is not None:
                if not json_length.isdigit():
                    raise BadInput("Inference-Header-Content-Length is not a byte count")
                json_length = int(json_length)
            inputs, requested, request_id, binary_output = parse_infer_request(
                self._read_body(), model, json_length)
            outputs = model.infer(inputs)
            answer, binary = infer_response(model, outputs, requested, request_id, binary_output)
            return self._answer(200, answer, binary)
        except BadInput as error:
            return self._error(400, str(error))
        except OutOfMemory as error:
            return self._error(507, f"out of device memory: {error}")
        except Exception as error:  # noqa: BLE001 (the edge: any failure is a 500, the process goes on)
            return self._error(500, f"{type(error).__name__}: {error}")
        except BaseException as error:  # noqa: BLE001 (SystemExit from a model: the process ends)
            print(f"function: the model ended the process: {type(error).__name__}: {error}",
                  file=sys.stderr, flush=True)
            sys.stdout.flush()
            os._exit(70)

    def do_GET(self):  # noqa: N802 (the base class's naming)
        self._handle("GET")

    def do_POST(self):  # noqa: N802
        self._handle("POST")


def _bind(socket_path):
    # A socket left by an earlier process of this function is replaced; anything else is not.
    try:
        if stat.S_ISSOCK(os.lstat(socket_path).st_mode):
            os.unlink(socket_path)
    except FileNotFoundError:
        pass
    server = FunctionServer(socket_path)
    os.chmod(socket_path, 0o600)
    return server


def keep_freed_memory():
    """Has glibc's allocator keep what the process frees, as the node does
    (src/gshare/common/heap_reuse.h, whose thresholds these are): allocations below 32 MiB from
    the heap, and up to 16 MiB kept free at a heap's top, so that each request's body and tensors
    reuse the last request's pages rather than fault in fresh ones. The cost is memory kept, up
    to 16 MiB free at the top of each heap. Call it before any thread starts. Returns whether the
    C library took both (False where it is not glibc: nothing changed)."""
    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    m_trim_threshold, m_mmap_threshold = -1, -3  # <malloc.h>
    mapped = mallopt(m_mmap_threshold, 32 << 20) == 1
    trimmed = mallopt(m_trim_threshold, 16 << 20) == 1
    return mapped and trimmed


def serve(load_model, name, socket_path=None):
    """Binds the socket (GSHARE_SOCKET unless given), answers 503 on readiness while
    `load_model()` runs, then serves the model under `name` until SIGTERM. Does not return."""
    socket_path = socket_path or os.environ.get("GSHARE_SOCKET")
    if not socket_path:
        print(
            "function: GSHARE_SOCKET is not set: this program is a gshare function and must be "
            "started by a gshare node (or given a socket path)",
            file=sys.stderr,
        )
        sys.exit(2)
    server = _bind(socket_path)
    server.model_name = name

    def stop_serving(code):
        try:
            os.unlink(socket_path)
        except OSError:
            pass
        try:
            sys.stdout.flush()  # what the model printed reaches the log
        except (OSError, ValueError):
            pass
        os._exit(code)

    signal.signal(signal.SIGTERM, lambda signum, frame: stop_serving(0))
    thread = threading.Thread(target=server.serve_forever, name="kserve", daemon=True)
    thread.start()
    try:
        server.model = load_model()
    except Exception as error:  # noqa: BLE001 (reported, then the process ends: the node sees it)
        message = " ".join(str(error).split())  # one line: the node quotes the last one
        print(f"function: loading the model failed: {type(error).__name__}: {message}",
              file=sys.stderr, flush=True)
        # The runtimes raise ValueError for what the tenant gave (a file that is not the model, a
        # handler that fails): the node answers the deploy 400. Anything else (a missing module,
        # out of device memory) is the node's to fix: 503.
        stop_serving(EXIT_MODEL_REJECTED if isinstance(error, ValueError) else 1)
    print(f"function: model '{name}' ready on {socket_path}", file=sys.stderr, flush=True)
    while True:
        signal.pause()
