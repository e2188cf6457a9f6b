#!/usr/bin/env python3
"""gshare serve's gRPC service called from Python with Debian's grpcio, as a KServe or Triton
gRPC client calls it: the messages compiled from the project's inference.proto, every datatype
echoed in raw contents, the error statuses, a stream, and the key in the metadata.

    grpc_python_test.py GSHARE PROTO_DIR

Starts `GSHARE serve` on free loopback ports in a temporary folder and stops it (by its pid) at
the end. Exit status 0 when every check holds; 77 (skipped) without grpcio or protoc.
"""
import json
import os
import queue
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import urllib.request

try:
    import grpc
except ImportError:
    print("grpcio is not installed (Debian: python3-grpcio): skipped")
    sys.exit(77)

ADMIN_KEY = "python-grpc-test-admin-key-0123"
ECHO_ANY = """name: any
model_size: 1Mi
gpu_memory: 8Mi
exec_latency: 1ms
slo: 5s
max_batch: 8
runtime: echo
timeout: 10s
"""
ECHO_TYPED = ECHO_ANY.replace("name: any", "name: typed") + (
    "inputs: [{name: x, datatype: FP32, shape: [-1, 4]}]\n"
    "outputs: [{name: output, datatype: FP32, shape: [-1, 4]}]\n")

# Each datatype: its struct format (BYTES: strings, framed by hand).
FORMATS = {"BOOL": "?", "UINT8": "B", "UINT16": "H", "UINT32": "I", "UINT64": "Q", "INT8": "b",
           "INT16": "h", "INT32": "i", "INT64": "q", "FP16": "e", "FP32": "f", "FP64": "d"}
SERVICE = "/inference.GRPCInferenceService/"


def fail(message):
    print("FAIL: " + message)
    sys.exit(1)


def check(condition, message):
    if not condition:
        fail(message)


class Server:
    def __init__(self, gshare, folder):
        self.process = subprocess.Popen(
            [gshare, "serve", "--data-dir", os.path.join(folder, "data"), "--listen",
             "127.0.0.1:0", "--grpc-listen", "127.0.0.1:0", "--admin-key", ADMIN_KEY,
             "--device", "emulated", "--gpus", "1", "--gpu-memory", "1Gi",
             "--uid-ledger", os.path.join(folder, "uid-ranges")],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        self.lines = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.http = self.grpc = None
        output = []
        while self.http is None or self.grpc is None:
            try:
                line = self.lines.get(timeout=120)
            except queue.Empty:
                fail("the server printed no address within 120 s:\n" + "".join(output))
            if line is None:
                fail("the server ended before listening:\n" + "".join(output))
            output.append(line)
            if line.startswith("listening on "):
                self.http = line.split()[-1]
            elif line.startswith("gRPC listening on "):
                self.grpc = line.split()[-1]

    def _read(self):
        for line in self.process.stdout:
            self.lines.put(line)
        self.lines.put(None)

    def stop(self):
        self.process.send_signal(signal.SIGTERM)
        try:
            self.process.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()


def http(server, method, path, key, body=None):
    request = urllib.request.Request(server.http + path, method=method,
                                     data=body.encode() if body is not None else None,
                                     headers={"Authorization": "Bearer " + key})
    try:
        with urllib.request.urlopen(request, timeout=120) as answer:
            return answer.status, answer.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def raw_of(datatype, values):
    if datatype == "BYTES":
        return b"".join(struct.pack("<I", len(v)) + v for v in values)
    return struct.pack("<%d%s" % (len(values), FORMATS[datatype]), *values)


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        return 2
    gshare, proto_dir = sys.argv[1], sys.argv[2]
    protoc = shutil.which("protoc")
    if protoc is None:
        print("protoc is not installed (Debian: protobuf-compiler): skipped")
        return 77
    folder = tempfile.mkdtemp(prefix="gshare-grpc-python-")
    os.chmod(folder, 0o711)
    server = None
    try:
        subprocess.run([protoc, "-I", proto_dir, "--python_out=" + folder,
                        os.path.join(proto_dir, "inference.proto")], check=True)
        sys.path.insert(0, folder)
        import inference_pb2 as pb

        server = Server(gshare, folder)
        status, body = http(server, "POST", "/api/v1/tenants", ADMIN_KEY, json.dumps({"name": "acme"}))
        check(status == 201, "adding a tenant: %d %s" % (status, body))
        key = json.loads(body)["key"]
        status, body = http(server, "POST", "/api/v1/tenants", ADMIN_KEY, json.dumps({"name": "beta"}))
        beta = json.loads(body)["key"]
        for spec in (ECHO_ANY, ECHO_TYPED):
            status, body = http(server, "POST", "/api/v1/functions", key, spec)
            check(status == 201, "deploying: %d %s" % (status, body))

        channel = grpc.insecure_channel(server.grpc)
        grpc.channel_ready_future(channel).result(timeout=60)

        def unary(method, request, response_type, key=key):
            call = channel.unary_unary(SERVICE + method,
                                       request_serializer=type(request).SerializeToString,
                                       response_deserializer=response_type.FromString)
            metadata = [("authorization", "Bearer " + key)] if key else []
            return call(request, metadata=metadata, timeout=60)

        def code_of(method, request, response_type, key=key):
            try:
                unary(method, request, response_type, key)
            except grpc.RpcError as error:
                return error.code(), error.details()
            return grpc.StatusCode.OK, ""

        check(unary("ServerLive", pb.ServerLiveRequest(), pb.ServerLiveResponse, None).live,
              "ServerLive")
        check(unary("ServerReady", pb.ServerReadyRequest(), pb.ServerReadyResponse, None).ready,
              "ServerReady")
        metadata = unary("ModelMetadata", pb.ModelMetadataRequest(name="typed"),
                         pb.ModelMetadataResponse)
        check([(t.name, t.datatype, list(t.shape)) for t in metadata.inputs] ==
              [("x", "FP32", [-1, 4])], "ModelMetadata: %s" % metadata)

        # Every datatype, in raw contents, answered with the same bytes.
        samples = {"BOOL": [True, False, True], "UINT8": [0, 7, 255], "UINT16": [1, 65535, 2],
                   "UINT32": [3, 2**32 - 1, 4], "UINT64": [5, 2**64 - 1, 6],
                   "INT8": [-128, 0, 127], "INT16": [-32768, 1, 32767],
                   "INT32": [-2**31, 2, 2**31 - 1], "INT64": [-2**63, 3, 2**63 - 1],
                   "FP16": [0.5, -2.0, 65504.0], "FP32": [1.5, -2.25, 3e38],
                   "FP64": [1e-300, -0.0, 1e300],
                   # Not UTF-8: the node sends gshare-function tensors in the binary form.
                   "BYTES": [b"a", b"\xff\xfe", "\u00e9t\u00e9".encode()]}
        for datatype, values in samples.items():
            raw = raw_of(datatype, values)
            request = pb.ModelInferRequest(model_name="any", id="id-" + datatype)
            request.inputs.add(name="in", datatype=datatype, shape=[1, 3])
            request.raw_input_contents.append(raw)
            answer = unary("ModelInfer", request, pb.ModelInferResponse)
            check(answer.id == "id-" + datatype, "%s: id %r" % (datatype, answer.id))
            check(answer.outputs[0].datatype == datatype and list(answer.outputs[0].shape) == [1, 3],
                  "%s: output %s" % (datatype, answer.outputs[0]))
            check(answer.raw_output_contents[0] == raw,
                  "%s: %r came back as %r" % (datatype, raw, answer.raw_output_contents[0]))

        # Errors, as their gRPC statuses.
        good = pb.ModelInferRequest(model_name="typed")
        good.inputs.add(name="x", datatype="FP32", shape=[1, 4])
        good.raw_input_contents.append(raw_of("FP32", [1, 2, 3, 4]))
        check(code_of("ModelInfer", good, pb.ModelInferResponse)[0] == grpc.StatusCode.OK,
              "the typed echo")
        check(code_of("ModelInfer", good, pb.ModelInferResponse, None)[0] ==
              grpc.StatusCode.UNAUTHENTICATED, "no key")
        check(code_of("ModelInfer", good, pb.ModelInferResponse, beta) ==
              (grpc.StatusCode.NOT_FOUND, "model 'typed' not found"), "another tenant's model")
        bad = pb.ModelInferRequest(model_name="typed")
        bad.inputs.add(name="x", datatype="FP32", shape=[1, 3])
        bad.raw_input_contents.append(raw_of("FP32", [1, 2, 3]))
        code, details = code_of("ModelInfer", bad, pb.ModelInferResponse)
        check(code == grpc.StatusCode.INVALID_ARGUMENT and "input 'x' has shape [1,3]" in details,
              "a wrong shape: %s %s" % (code, details))

        # A stream: every request answered, a failed one with its error_message.
        stream = channel.stream_stream(SERVICE + "ModelStreamInfer",
                                       request_serializer=pb.ModelInferRequest.SerializeToString,
                                       response_deserializer=pb.ModelStreamInferResponse.FromString)

        def requests():
            for i in range(10):
                request = pb.ModelInferRequest(model_name="typed", id="s%d" % i)
                request.inputs.add(name="x", datatype="FP32", shape=[1, 4 if i != 3 else 2])
                request.raw_input_contents.append(raw_of("FP32", [i] * (4 if i != 3 else 2)))
                yield request

        answers = list(stream(requests(), metadata=[("authorization", "Bearer " + key)],
                              timeout=120))
        errors = [a.error_message for a in answers if a.error_message]
        ids = sorted(a.infer_response.id for a in answers if not a.error_message)
        check(len(answers) == 10 and len(errors) == 1 and "input 'x'" in errors[0],
              "the stream's answers: %d, errors %s" % (len(answers), errors))
        check(ids == sorted("s%d" % i for i in range(10) if i != 3), "the stream's ids: %s" % ids)
        print("grpc python test: every check passed")
        return 0
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(folder, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
