#!/usr/bin/env python3
"""Tests kserve_unix (the Python functions' protocol layer) without torch: starts a server process
with a tiny pure-Python model on a socket in a temporary folder, checks health, metadata, infer
answers (values, shapes, flat and nested data, requested outputs, the binary tensor extension in
and out), 400 on bad inputs, 404, 405,
507 on the model's out-of-memory with the process going on, then ends that process by its pid.

  python3 kserve_unix_test.py            the test (exit 0 when every check passes)
  python3 kserve_unix_test.py --serve S  the server it starts, on socket S
"""

import http.client
import json
import os
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import kserve_unix  # noqa: E402


class FakeModel:
    """y[i] = [sum of row i, 2 * x[i][0] + 1]; a row summing above 1e6 runs 'out of memory'."""

    name = "fake"
    version = "1"
    platform = "python"
    inputs = [kserve_unix.TensorSpec("x", "FP32", [-1, 3])]
    outputs = [
        kserve_unix.TensorSpec("y", "FP32", [-1, 2]),
        kserve_unix.TensorSpec("count", "INT64", [1]),
    ]
    max_batch = 4

    def __init__(self):
        self.calls = 0

    def infer(self, inputs):
        x = inputs["x"]
        batch = x.shape[0]
        if not 1 <= batch <= self.max_batch:
            raise kserve_unix.BadInput(f"batch {batch} is outside [1, {self.max_batch}]")
        rows = [x.data[3 * i : 3 * i + 3] for i in range(batch)]
        if any(sum(row) > 1e6 for row in rows):
            raise kserve_unix.OutOfMemory("the fake model's slice is full")
        self.calls += 1
        y = []
        for row in rows:
            y += [float(sum(row)), 2.0 * row[0] + 1.0]
        return [
            kserve_unix.Tensor("y", "FP32", [batch, 2], y),
            kserve_unix.Tensor("count", "INT64", [1], [self.calls]),
        ]


class UnixConnection(http.client.HTTPConnection):
    def __init__(self, path):
        super().__init__("localhost", timeout=10)
        self.unix_path = path

    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(10)
        self.sock.connect(self.unix_path)


def binary_request(path, header, data):
    """The binary extension: (status, answer JSON, the bytes after it)."""
    connection = UnixConnection(path)
    try:
        text = json.dumps(header).encode()
        connection.request("POST", "/v2/models/fake/infer", body=text + data,
                           headers={"Content-Type": "application/octet-stream",
                                    "Inference-Header-Content-Length": str(len(text))})
        response = connection.getresponse()
        raw = response.read()
        length = response.getheader("Inference-Header-Content-Length")
        if length is None:
            return response.status, json.loads(raw or b"null"), None
        return response.status, json.loads(raw[: int(length)]), raw[int(length):]
    finally:
        connection.close()


def request(path, method, target, body=None):
    """One request on a connection of its own, as the node sends them: (status, JSON body)."""
    connection = UnixConnection(path)
    try:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        if body is not None and not isinstance(body, (bytes, str)):
            body = json.dumps(body)
        connection.request(method, target, body=body, headers=headers)
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


failures = []


def check(name, condition, detail=""):
    if condition:
        print(f"ok: {name}")
    else:
        print(f"FAIL: {name} {detail}")
        failures.append(name)


def run_checks(path):
    status, body = request(path, "GET", "/v2/health/live")
    check("live", status == 200, f"{status} {body}")
    status, body = request(path, "GET", "/v2/models/fake")
    check(
        "metadata",
        status == 200
        and body["name"] == "fake"
        and body["inputs"] == [{"name": "x", "datatype": "FP32", "shape": [-1, 3]}]
        and body["outputs"][0] == {"name": "y", "datatype": "FP32", "shape": [-1, 2]},
        f"{status} {body}",
    )
    status, body = request(path, "GET", "/v2/models/fake/ready")
    check("model ready", status == 200, f"{status} {body}")

    nested = {"id": "7", "inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3],
                                     "data": [[1, 2, 3], [4.5, 5, 6]]}]}
    status, body = request(path, "POST", "/v2/models/fake/infer", nested)
    check(
        "infer nested",
        status == 200
        and body["model_name"] == "fake"
        and body["id"] == "7"
        and body["outputs"][0] == {"name": "y", "datatype": "FP32", "shape": [2, 2],
                                   "data": [6.0, 3.0, 15.5, 10.0]},
        f"{status} {body}",
    )
    flat = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [0.25, 0, -1]}],
            "outputs": [{"name": "y"}]}
    status, body = request(path, "POST", "/v2/models/fake/infer", flat)
    check(
        "infer flat, one requested output",
        status == 200
        and "id" not in body
        and body["outputs"] == [{"name": "y", "datatype": "FP32", "shape": [1, 2],
                                 "data": [-0.75, 1.5]}],
        f"{status} {body}",
    )

    bad = {
        "datatype": {"inputs": [{"name": "x", "datatype": "INT32", "shape": [1, 3],
                                 "data": [1, 2, 3]}]},
        "shape": {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4],
                              "data": [1, 2, 3, 4]}]},
        "count": {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3],
                              "data": [1, 2, 3]}]},
        "nesting": {"inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3],
                                "data": [[1, 2, 3, 4, 5, 6]]}]},
        "element": {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3],
                                "data": [1, "2", 3]}]},
        "missing input": {"inputs": []},
        "unknown input": {"inputs": [{"name": "z", "datatype": "FP32", "shape": [1],
                                      "data": [1]}]},
        "unknown output": {"inputs": flat["inputs"], "outputs": [{"name": "w"}]},
        "batch too large": {"inputs": [{"name": "x", "datatype": "FP32", "shape": [5, 3],
                                        "data": [0] * 15}]},
        "malformed JSON": '{"inputs": [',
        "NaN": '{"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], '
               '"data": [NaN, 1, 2]}]}',
    }
    for what, body_in in bad.items():
        status, body = request(path, "POST", "/v2/models/fake/infer", body_in)
        check(f"400 on {what}", status == 400 and isinstance(body.get("error"), str)
              and body["error"], f"{status} {body}")

    # The binary tensor extension, which GET /v2 lists: in, and out when asked.
    status, body = request(path, "GET", "/v2")
    check("server metadata lists the binary extension",
          status == 200 and body["extensions"] == ["binary_tensor_data"], f"{status} {body}")
    header = {"id": "b", "parameters": {"binary_data_output": True},
              "inputs": [{"name": "x", "datatype": "FP32", "shape": [2, 3],
                          "parameters": {"binary_data_size": 24}}]}
    status, body, data = binary_request(path, header, struct.pack("<6f", 1, 2, 3, 4.5, 5, 6))
    check("binary in, binary out",
          status == 200 and body["id"] == "b"
          and body["outputs"][0]["parameters"] == {"binary_data_size": 16}
          and body["outputs"][1]["parameters"] == {"binary_data_size": 8}
          and data[:16] == struct.pack("<4f", 6.0, 3.0, 15.5, 10.0) and len(data) == 24,
          f"{status} {body} {data!r}")
    header["parameters"] = {}
    status, body, data = binary_request(path, header, struct.pack("<6f", 1, 2, 3, 4.5, 5, 6))
    check("binary in, JSON out", status == 200 and data is None
          and body["outputs"][0]["data"] == [6.0, 3.0, 15.5, 10.0], f"{status} {body}")
    for what, payload in {"short": struct.pack("<5f", 1, 2, 3, 4, 5),
                          "extra bytes": struct.pack("<7f", 1, 2, 3, 4, 5, 6, 7),
                          "NaN": struct.pack("<6f", 1, 2, float("nan"), 4, 5, 6)}.items():
        status, body, _ = binary_request(path, header, payload)
        check(f"400 on binary {what}", status == 400 and body["error"], f"{status} {body}")

    status, body = request(path, "GET", "/v2/models/other")
    check("404 on another model", status == 404 and "error" in body, f"{status} {body}")
    status, body = request(path, "GET", "/v2/models/fake/infer")
    check("405 on GET infer", status == 405 and "error" in body, f"{status} {body}")

    full = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [1e7, 0, 0]}]}
    status, body = request(path, "POST", "/v2/models/fake/infer", full)
    check("507 on out of memory", status == 507 and "out of device memory" in body["error"],
          f"{status} {body}")
    status, body = request(path, "GET", "/v2/health/ready")
    check("ready after the 507", status == 200, f"{status} {body}")
    status, body = request(path, "POST", "/v2/models/fake/infer", nested)
    check("infer after the 507", status == 200 and body["outputs"][0]["data"][:2] == [6.0, 3.0]
          and body["outputs"][1]["data"] == [5], f"{status} {body}")


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--serve":
        release = sys.argv[3]

        def load():
            # The model loads once the test has seen the server answer 503 (it then makes the
            # release file): readiness must wait for the load, whatever the machine's speed.
            deadline = time.monotonic() + 60
            while not os.path.exists(release) and time.monotonic() < deadline:
                time.sleep(0.01)
            return FakeModel()

        kserve_unix.serve(load, "fake", sys.argv[2])
    check("glibc's allocator told to keep freed memory", kserve_unix.keep_freed_memory())
    with tempfile.TemporaryDirectory(prefix="gshare-kserve-test-") as folder:
        path = os.path.join(folder, "function.sock")
        release = os.path.join(folder, "release")
        server = subprocess.Popen(
            [sys.executable, os.path.abspath(__file__), "--serve", path, release])
        try:
            deadline = time.monotonic() + 30
            saw_loading = False
            while True:
                try:
                    status, _ = request(path, "GET", "/v2/health/ready")
                except OSError:
                    status = None
                if status == 503 and not saw_loading:
                    saw_loading = True
                    open(release, "w").close()
                if status == 200 or time.monotonic() > deadline or server.poll() is not None:
                    break
                time.sleep(0.02)
            check("ready within 30 s", status == 200, f"last status {status}")
            check("503 while loading", saw_loading)
            if status == 200:
                run_checks(path)
        finally:
            # Only the process this test started, by its pid.
            if server.poll() is None:
                os.kill(server.pid, signal.SIGTERM)
                try:
                    server.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    os.kill(server.pid, signal.SIGKILL)
                    server.wait()
        check("stopped by SIGTERM, exit 0", server.returncode == 0, f"rc {server.returncode}")
        check("socket removed", not os.path.exists(path))
    if failures:
        print(f"kserve_unix_test: {len(failures)} check(s) failed: {', '.join(failures)}")
        return 1
    print("kserve_unix_test: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
