#!/usr/bin/env python3
"""The in-process side of `gshare bench runtime`: a TorchScript model called directly, as the
pytorch runtime calls it (torch.jit.load, eval, inference_mode, the same threads, the same allocator
settings), timed per call.

  python3 inprocess_bench.py --model-file FILE --input-shape 1,3,224,224 --threads 1 --requests 50

Prints one JSON object: {"times_ms": [...]}, the wall time of each call after three untimed ones.
"""

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from gshare_runtime import kserve_unix  # noqa: E402


def main(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--model-file", required=True)
    parser.add_argument("--input-shape", required=True)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--requests", type=int, default=50)
    args = parser.parse_args(argv)
    kserve_unix.keep_freed_memory()  # as the runtime does, before torch starts its threads
    import torch  # noqa: PLC0415

    torch.set_num_threads(args.threads)
    module = torch.jit.load(args.model_file, map_location="cpu")
    module.eval()
    shape = [int(d) for d in args.input_shape.split(",")]
    x = torch.rand(shape, generator=torch.Generator().manual_seed(0))
    times = []
    for i in range(3 + args.requests):
        start = time.perf_counter()
        with torch.inference_mode():
            module(x)
        if i >= 3:
            times.append((time.perf_counter() - start) * 1e3)
    print(json.dumps({"times_ms": times}))


if __name__ == "__main__":
    main(sys.argv[1:])
