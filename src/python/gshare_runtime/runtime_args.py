"""What the Python runtimes share: their tensor arguments ("DATATYPE:dims:name", node/
launch_plan.cc), their command line, and the error a model's own failure raises."""

import argparse

DATATYPES = ("BOOL", "UINT8", "INT8", "INT16", "INT32", "INT64", "FP16", "FP32", "FP64")
MAX_THREADS = 64


class ModelError(RuntimeError):
    """The model misbehaved on a request (raised, or gave outputs the spec does not declare):
    answered 500 and logged; the process goes on."""


def one_line(text):
    """A message on one line (a TorchScript or Python error spans several)."""
    return " ".join(str(text).split())


def parse_tensor(text):
    """A TensorSpec from "DATATYPE:dim,dim,...:name"."""
    from gshare_runtime import kserve_unix  # noqa: PLC0415

    parts = text.split(":", 2)
    if len(parts) != 3 or not parts[2]:
        raise argparse.ArgumentTypeError(f"'{text}' is not DATATYPE:dims:name")
    datatype, dims, name = parts
    if datatype not in DATATYPES:
        raise argparse.ArgumentTypeError(
            f"tensor '{name}': this runtime takes {', '.join(DATATYPES)}, not {datatype}")
    try:
        shape = [int(d) for d in dims.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"tensor '{name}': a dimension is not a number") from None
    if not shape or any(d < -1 for d in shape):
        raise argparse.ArgumentTypeError(f"tensor '{name}': a shape of sizes or -1 is needed")
    return kserve_unix.TensorSpec(name, datatype, shape)


def parser(description, model_flag, model_help):
    """The runtimes' common flags, with the model's own (--model-file, --handler)."""
    p = argparse.ArgumentParser(description=description)
    p.add_argument(model_flag, required=True, help=model_help)
    p.add_argument("--name", required=True, help="the name the node's requests use")
    p.add_argument("--input", action="append", type=parse_tensor, required=True,
                   dest="inputs", help="DATATYPE:dims:name (repeated)")
    p.add_argument("--output", action="append", type=parse_tensor, required=True,
                   dest="outputs", help="DATATYPE:dims:name (repeated)")
    p.add_argument("--max-batch", type=int, default=1)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--device", choices=("emulated", "cuda"), default="emulated",
                   help="emulated: the function library's device memory and compute grants; "
                        "cuda: the process's own CUDA device (cuda:0), switched by the node")
    return p


def check_common(p, args):
    if not 1 <= args.threads <= MAX_THREADS:
        p.error(f"--threads must be from 1 to {MAX_THREADS}")
    if args.max_batch < 1:
        p.error("--max-batch must be at least 1")
