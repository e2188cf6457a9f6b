"""The main job's real models: torchvision classifiers and a Python handler, made here, run here.

  python3 scripts/real-models.py --out DIR --models-root ROOT [--size 112] [--device cuda]
                                 [--with-vit]

For each classifier: random weights from a seed of its own (no download), eval mode, traced to
TorchScript at 1x3xSIZExSIZE and saved as DIR/files/<tenant>/<name>.pt. For the handler: its
handler.py and weights.npy. Then, in this process (not the server's), each model is run alone on
one input drawn from its seed: the TorchScript file read back with torch.jit.load, the handler
imported from its file. What each function is sent and must answer goes to
DIR/references/<function>.request.json and .response.json (KServe v2 bodies, for gshare replay
--references), and DIR/catalog.yaml lists the functions with their measured batch-1 latency on
this machine (one thread, the median of 5 runs), their files under ROOT/<tenant>/ (where the
server keeps each tenant's uploads) and their tensors. DIR/uploads.txt has a line per file:
"tenant local-path name-in-the-tenant's-folder".

--device cuda (the GPU check, scripts/gpu-serve-check.sh): each model alone runs on cuda:0, as the
pytorch runtime runs it on a node of CUDA GPUs (the same kernels, so the answers agree within the
tolerance), its latency is the GPU's, and its slice leaves room for activations and the allocator
(1.5 x the parameters + 1 GiB). --with-vit adds vit_l_16 (tenant vision-b), traced at 224x224, the
size its position embeddings are made for.
"""

import argparse
import json
import os
import statistics
import sys
import time

import numpy as np
import torch
import torchvision

# (function, tenant, torchvision constructor)
CLASSIFIERS = [
    ("resnet50", "vision-a", "resnet50"),
    ("resnet18", "vision-a", "resnet18"),
    ("efficientnet-b0", "vision-b", "efficientnet_b0"),
    ("mobilenet-v3-small", "vision-b", "mobilenet_v3_small"),
    ("squeezenet1-1", "vision-c", "squeezenet1_1"),
    ("shufflenet-v2", "vision-c", "shufflenet_v2_x1_0"),
]
HANDLER_TENANT = "vision-c"
HANDLER_FEATURES = 64
HANDLER_CLASSES = 10

HANDLER_SOURCE = '''"""A tenant's handler: a linear layer and a softmax, its weights in a file beside it."""
import numpy as np


class Model:
    def load(self):
        weights = np.load("weights.npy", allow_pickle=False)
        self.w = weights[:-1].astype(np.float32)
        self.b = weights[-1].astype(np.float32)

    def predict(self, inputs):
        logits = inputs["features"] @ self.w + self.b
        logits -= logits.max(axis=1, keepdims=True)
        e = np.exp(logits)
        return {"probabilities": (e / e.sum(axis=1, keepdims=True)).astype(np.float32)}
'''


def median_ms(run, repeats=5):
    run()  # warm
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        run()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def tensor_json(name, array):
    return {"name": name, "datatype": "FP32", "shape": list(array.shape),
            "data": [float(v) for v in array.reshape(-1)]}


def write_reference(folder, function, input_name, x, output_name, y):
    with open(os.path.join(folder, f"{function}.request.json"), "w") as f:
        json.dump({"inputs": [tensor_json(input_name, x)]}, f)
    with open(os.path.join(folder, f"{function}.response.json"), "w") as f:
        json.dump({"model_name": function, "outputs": [tensor_json(output_name, y)]}, f)


def spec_entry(function, tenant, model_bytes, latency_ms, slo_ms, files, inputs, outputs, runtime,
               cuda=False):
    # gpu_memory: the parameters and the runtime's room (the function library's, a margin; on a
    # CUDA GPU the activations and PyTorch's caching allocator besides).
    gpu_mib = int(model_bytes * 1.5 / 2**20) + 1024 if cuda else int(model_bytes * 1.25 / 2**20) + 32
    lines = [
        f"  - name: {function}",
        f"    tenant: {tenant}",
        f"    model_size: {model_bytes}",
        f"    gpu_memory: {gpu_mib}Mi",
        f"    exec_latency: {latency_ms:.1f}ms",
        f"    slo: {slo_ms}ms",
        "    max_batch: 4",
        "    timeout: 30s",
        f"    runtime: {runtime}",
        f"    model_files: [{', '.join(files)}]",
        f"    inputs: [{inputs}]",
        f"    outputs: [{outputs}]",
    ]
    return "\n".join(lines)


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True)
    parser.add_argument("--models-root", required=True,
                        help="the server's DATA_DIR/models, where each tenant's uploads land")
    parser.add_argument("--size", type=int, default=112, help="the images' height and width")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu",
                        help="where each model runs alone (cuda: as on a node of CUDA GPUs)")
    parser.add_argument("--with-vit", action="store_true", help="add vit_l_16 at 224x224")
    args = parser.parse_args()
    if not 32 <= args.size <= 512:
        parser.error("--size must be 32 to 512")
    cuda = args.device == "cuda"
    if cuda and not torch.cuda.is_available():
        parser.error("--device cuda: this PyTorch sees no CUDA GPU")
    torch.set_num_threads(1)
    classifiers = [(f, t, c, args.size) for f, t, c in CLASSIFIERS]
    if args.with_vit:
        classifiers.append(("vit-l-16", "vision-b", "vit_l_16", 224))
    references = os.path.join(args.out, "references")
    os.makedirs(references, exist_ok=True)
    entries, uploads = [], []
    for seed, (function, tenant, constructor, size) in enumerate(classifiers, start=1):
        torch.manual_seed(seed)
        model = getattr(torchvision.models, constructor)(weights=None).eval()
        x = torch.randn(1, 3, size, size, generator=torch.Generator().manual_seed(seed))
        folder = os.path.join(args.out, "files", tenant)
        os.makedirs(folder, exist_ok=True)
        path = os.path.join(folder, f"{function}.pt")
        with torch.inference_mode():
            torch.jit.trace(model, x).save(path)
        # The model alone: read back from its file, as the server's runtime reads it (on cuda:0
        # with --device cuda, as the runtime runs it there).
        alone = torch.jit.load(path, map_location="cuda:0" if cuda else "cpu").eval()
        on_device = x.to("cuda:0") if cuda else x

        def forward():
            out = alone(on_device)
            if cuda:
                torch.cuda.synchronize()
            return out

        with torch.inference_mode():
            y = forward().to("cpu")
            latency = median_ms(forward)
        model_bytes = sum(t.numel() * t.element_size()
                          for t in list(alone.parameters()) + list(alone.buffers()))
        write_reference(references, function, "input", x.numpy(), "logits", y.numpy())
        slo_ms = int(max(200, 8 * latency))
        entries.append(spec_entry(
            function, tenant, model_bytes, latency, slo_ms,
            [os.path.join(args.models_root, tenant, f"{function}.pt")],
            f"{{name: input, datatype: FP32, shape: [-1, 3, {size}, {size}]}}",
            "{name: logits, datatype: FP32, shape: [-1, 1000]}", "pytorch", cuda))
        uploads.append(f"{tenant} {path} {function}.pt")
        print(f"  {function:20} ({tenant}): {model_bytes / 2**20:6.1f} MiB of parameters, "
              f"{latency:6.1f} ms a request alone", flush=True)

    # The handler, with its weights beside it.
    folder = os.path.abspath(os.path.join(args.out, "files", HANDLER_TENANT, "scorer"))
    os.makedirs(folder, exist_ok=True)
    rng = np.random.default_rng(7)
    weights = rng.standard_normal((HANDLER_FEATURES + 1, HANDLER_CLASSES)).astype(np.float32)
    np.save(os.path.join(folder, "weights.npy"), weights, allow_pickle=False)
    with open(os.path.join(folder, "handler.py"), "w") as f:
        f.write(HANDLER_SOURCE)
    # Alone: imported from its file, in its folder, as the runtime does.
    sys.path.insert(0, folder)
    here = os.getcwd()
    os.chdir(folder)
    import handler  # noqa: E402 (the file written just now)
    scorer = handler.Model()
    scorer.load()
    os.chdir(here)
    x = rng.standard_normal((1, HANDLER_FEATURES)).astype(np.float32)
    y = scorer.predict({"features": x})["probabilities"]
    latency = median_ms(lambda: scorer.predict({"features": x}))
    write_reference(references, "scorer", "features", x, "probabilities", y)
    root = os.path.join(args.models_root, HANDLER_TENANT, "scorer")
    entries.append(spec_entry(
        "scorer", HANDLER_TENANT, weights.nbytes, max(latency, 1.0), 200,
        [os.path.join(root, "handler.py"), os.path.join(root, "weights.npy")],
        f"{{name: features, datatype: FP32, shape: [-1, {HANDLER_FEATURES}]}}",
        f"{{name: probabilities, datatype: FP32, shape: [-1, {HANDLER_CLASSES}]}}", "python",
        cuda))
    for name in ("handler.py", "weights.npy"):
        uploads.append(f"{HANDLER_TENANT} {os.path.join(folder, name)} scorer/{name}")
    print(f"  {'scorer':20} ({HANDLER_TENANT}): a Python handler, {latency:6.2f} ms a request alone",
          flush=True)

    with open(os.path.join(args.out, "catalog.yaml"), "w") as f:
        f.write("# Written by scripts/real-models.py: real models, profiled on this machine.\n")
        f.write("functions:\n" + "\n".join(entries) + "\n")
    with open(os.path.join(args.out, "uploads.txt"), "w") as f:
        f.write("\n".join(uploads) + "\n")


if __name__ == "__main__":
    main()
