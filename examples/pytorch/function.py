#!/usr/bin/env python3
"""A gShare function serving a torchvision image classifier on the GPU, with PyTorch.

  python3 function.py --model resnet50|vit_l_16 [--name NAME] [--seed 0] [--max-batch 8]

Started by a gShare node (GSHARE_SOCKET names its socket), it answers the function protocol
(kserve_unix.py): the model, under NAME (default: the model), takes "input", FP32
[N, 3, 224, 224], and returns "logits", FP32 [N, 1000]. Weights are random from a fixed seed
(torch.manual_seed; nothing is downloaded): resnet50 holds 25.6 M parameters (102 MB in FP32),
vit_l_16 (ViT-Large/16) 304 M (1.2 GB). The model runs on cuda:0 in eval mode, in FP32 (TF32
off), with deterministic algorithms, so one input gives bit-identical logits call after call, as a
restored function must. Running out of device memory during an infer answers 507 and the process
goes on.

Nothing here knows of gShare's checkpoints: the node's allocator shim or the driver's checkpoint
moves this process's GPU state, and the process never notices.
"""

import argparse
import os
import sys

# The protocol layer: beside this file in the GPU bundle, in the source tree the runtimes' package.
_here = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [_here, os.path.join(_here, "..", "..", "src", "python", "gshare_runtime")]
import kserve_unix  # noqa: E402

MODELS = ("resnet50", "vit_l_16")
IMAGE_SHAPE = [3, 224, 224]
CLASSES = 1000
MAX_BATCH_LIMIT = 1024  # the largest --max-batch: 1024 images of FP32 [3, 224, 224] are 617 MB


def full_fp32(torch):
    """FP32 matrix multiplications and convolutions without TF32. PyTorch 2.9 and later set this
    through fp32_precision ("ieee": no lower internal precision), and refuse a mix with the
    allow_tf32 flags they replace: the new settings where this PyTorch has them, else the flags,
    never both."""
    backends = torch.backends
    matmul = backends.cuda.matmul
    conv = getattr(backends.cudnn, "conv", None)
    if hasattr(matmul, "fp32_precision") and hasattr(conv, "fp32_precision"):
        if hasattr(backends, "fp32_precision"):
            backends.fp32_precision = "ieee"
        matmul.fp32_precision = "ieee"
        conv.fp32_precision = "ieee"
    else:
        matmul.allow_tf32 = False
        backends.cudnn.allow_tf32 = False


class TorchvisionClassifier:
    platform = "pytorch_torchvision"
    version = "1"

    def __init__(self, architecture, name, seed, max_batch):
        # cuBLAS is deterministic only with a fixed workspace; it reads this when it starts.
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        import torch
        import torchvision

        self.torch = torch
        self.name = name
        self.max_batch = max_batch
        self.inputs = [kserve_unix.TensorSpec("input", "FP32", [-1] + IMAGE_SHAPE)]
        self.outputs = [kserve_unix.TensorSpec("logits", "FP32", [-1, CLASSES])]
        if not torch.cuda.is_available():
            raise RuntimeError("no CUDA device visible to PyTorch")
        self.device = torch.device("cuda:0")
        torch.backends.cudnn.benchmark = False
        torch.backends.cudnn.deterministic = True
        full_fp32(torch)
        # warn_only: an operation without a deterministic kernel warns instead of failing.
        torch.use_deterministic_algorithms(True, warn_only=True)
        torch.manual_seed(seed)
        builder = getattr(torchvision.models, architecture)
        with self.device:  # the parameters are made, and initialized, on the GPU
            self.model = builder(weights=None)
        self.model.eval().requires_grad_(False)
        # One warm-up inference, before the function says it is ready: the kernels load and cuDNN
        # and cuBLAS initialize now. It runs on this (the loading) thread, though, and PyTorch keeps
        # cuBLAS and cuDNN handles, with cuBLAS's workspace, per thread: the thread that serves
        # requests creates its own during the first request, which pays for that. (gshare bench
        # function sends that request, its reference, before the first checkpoint.)
        with torch.inference_mode():
            self.model(torch.zeros([1] + IMAGE_SHAPE, device=self.device))
        torch.cuda.synchronize(self.device)

    def infer(self, inputs):
        torch = self.torch
        tensor = inputs["input"]
        batch = tensor.shape[0]
        if not 1 <= batch <= self.max_batch:
            raise kserve_unix.BadInput(f"batch {batch} is outside [1, {self.max_batch}]")
        try:
            x = torch.tensor(tensor.data, dtype=torch.float32).reshape(tensor.shape)
            with torch.inference_mode():
                logits = self.model(x.to(self.device)).float().cpu()
        except torch.cuda.OutOfMemoryError as error:
            raise kserve_unix.OutOfMemory(str(error).splitlines()[0]) from None
        except RuntimeError as error:
            # Libraries below PyTorch (cuBLAS, cuDNN) report a failed allocation of their own.
            if "out of memory" in str(error).lower():
                raise kserve_unix.OutOfMemory(str(error).splitlines()[0]) from None
            raise
        return [kserve_unix.Tensor("logits", "FP32", [batch, CLASSES], logits.flatten().tolist())]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", required=True, choices=MODELS)
    parser.add_argument("--name", help="the model name in the protocol's paths (default: --model)")
    parser.add_argument("--seed", type=int, default=0, help="torch.manual_seed for the weights")
    parser.add_argument("--max-batch", type=int, default=8,
                        help=f"the largest batch an infer may send, 1 to {MAX_BATCH_LIMIT}")
    parser.add_argument("--socket", help="the socket to serve on (default: $GSHARE_SOCKET)")
    args = parser.parse_args()
    if not 1 <= args.max_batch <= MAX_BATCH_LIMIT:
        parser.error(f"--max-batch {args.max_batch}: it must be from 1 to {MAX_BATCH_LIMIT}")
    name = args.name or args.model
    kserve_unix.serve(
        lambda: TorchvisionClassifier(args.model, name, args.seed, args.max_batch),
        name,
        args.socket,
    )


if __name__ == "__main__":
    main()
