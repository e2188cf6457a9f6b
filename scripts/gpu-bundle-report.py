#!/usr/bin/env python3
"""report.py: the GPU check's checks and table, from the files run.sh writes (standard library).

  report.py check node-info|function|restore FILE
      one smoke check: exit 0 when FILE (a command's JSON) shows a CUDA GPU, a passing
      `gshare bench function`, or a restore benchmark that measured; 1 with a message otherwise
  report.py table RESULTS
      prints one markdown table of every figure and check of the run in RESULTS, writes it to
      RESULTS/summary.md too; exit 0 when every supported check passed and the shim path passed,
      1 otherwise

Each check row reads pass, fail, unsupported (why) or not run (why); rows without a target are
figures ("-"). A step that was not run (the time budget spent, or the smoke phase failed) fails
the verdict: nothing was shown. The targets:
  smoke phase            node info lists a CUDA GPU; resnet50 through the shim, one round, passes;
                         the 64 MiB restore benchmark measures
  restore engine, 2 GiB  restore GB/s / best raw GB/s >= 0.90 (medians of the same run)
  bench function         its own status is pass (exit 0); unsupported (exit 4, the reason it
                         gave) does not fail the verdict, except for the shim
  shim, vit_l_16: restore within bound
                         restore ms <= 1.2 x allocated bytes / best raw host-to-device bandwidth
                         + 1 ms, the best raw method measured at 2 GiB; for resnet50 (under 1 GiB)
                         the same comparison is reported, not checked; none for the checkpoint API
  shim: memory freed     freed bytes (free device memory after the checkpoint minus while
                         resident, from the driver) >= the slice: the function's allocations live
                         in its slice and go with it; what stays (the CUDA context) is a figure
  checkpoint: left on the GPU
                         free memory before the function started minus after the checkpoint
                         <= 64 MiB; the bytes the checkpoint freed are a figure
  outputs identical      the logits after each restore equal those before it, bit for bit
  GPU tests              every test case of every executable labelled gpu passed or skipped,
                         at least one passed, and every executable exited 0; a skip whose message
                         says no GPU or driver was found fails where node info listed a GPU, any
                         other skip (a second GPU, remapping, MIG, memory export, the checkpoint
                         API missing) reads unsupported with its message; a skip whose message
                         is in neither the gtest JSON (newer gtest) nor the test's output fails
"""

import json
import os
import re
import sys

# The function steps in the order run.sh runs them: (mechanism, model).
FUNCTION_STEPS = (("shim", "vit_l_16"), ("shim", "resnet50"), ("checkpoint", "resnet50"),
                  ("checkpoint", "vit_l_16"))
BOUND_CHECKED_MODELS = ("vit_l_16",)  # the model of at least 1 GiB: its shim restore is bounded
RESTORE_RATIO_TARGET = 0.90
BOUND_FACTOR = 1.2
BOUND_SLACK_MS = 1.0
GIB = 2**30
MIB = 2**20
CHECKPOINT_LEFT_TARGET = 64 * MIB
# The models' FP32 weights (torchvision's published parameter counts x 4 bytes): what a checkpoint
# must at least have moved off the GPU, or the weights escaped the mechanism (for the shim, memory
# it does not hook) and the "freed" and "identical" checks would pass without proving anything.
MODEL_WEIGHT_BYTES = {"resnet50": 25_557_032 * 4, "vit_l_16": 304_326_632 * 4}
# Skip messages that say the test found no GPU or no driver (lower case). Matched as phrases: a
# message such as "the driver lacks the process checkpoint API: it needs driver R570" is a missing
# feature, not a missing driver.
NO_GPU_SKIPS = ("no cuda gpu", "no gpu", "no usable gpu", "no cuda driver", "no nvidia driver",
                "no cuda-capable device", "driver could not initialize", "cuinit failed",
                "cudaerrornodevice", "cuda_error_no_device")


def load_json(path):
    try:
        with open(path, encoding="utf-8") as file:
            return json.load(file)
    except (OSError, ValueError):
        return None


def read_text(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as file:
            return file.read()
    except OSError:
        return None


def cuda_gpus(info):
    return [g for g in (info or {}).get("gpus", []) if g.get("kind") == "cuda"]


def check(kind, path):
    data = load_json(path)
    if data is None:
        print(f"report: {path} holds no JSON", file=sys.stderr)
        return 1
    if kind == "node-info":
        gpus = cuda_gpus(data)
        if not gpus:
            print(f"report: no CUDA GPU listed (backend {data.get('backend')}, note "
                  f"{data.get('note')!r})", file=sys.stderr)
            return 1
        print(f"report: {len(gpus)} CUDA GPU(s); GPU 0: {gpus[0].get('name')}")
        return 0
    if kind == "function":
        if data.get("status") != "pass":
            print(f"report: status {data.get('status')!r}: {data.get('why', '')}", file=sys.stderr)
            return 1
        print(f"report: {data.get('function')} under {data.get('mechanism')}: pass, restore "
              f"{data.get('restore_ms', 0):.1f} ms, outputs identical: "
              f"{data.get('outputs_identical')}")
        return 0
    if kind == "restore":
        rows = data.get("results") or []
        if not rows or not all(r.get("restore_gbps", 0) > 0 for r in rows):
            print("report: the restore benchmark measured nothing", file=sys.stderr)
            return 1
        print(f"report: restore {rows[0]['restore_gbps']:.2f} GB/s, raw {rows[0]['raw_gbps']:.2f} "
              f"GB/s ({rows[0]['raw_method']})")
        return 0
    print(f"report: unknown check {kind!r}", file=sys.stderr)
    return 2


class Step:
    """One command of run.sh: its JSON output, exit status and log."""

    def __init__(self, results, name):
        self.name = name
        self.data = load_json(os.path.join(results, f"{name}.json"))
        rc = (read_text(os.path.join(results, f"{name}.rc")) or "").strip()
        self.skipped = rc == "skipped"
        self.ran = rc != "" and not self.skipped
        self.rc = int(rc) if rc.lstrip("-").isdigit() else None

    def why_not(self, output="JSON"):
        """Why there is no result: None when the step produced its output."""
        if self.skipped:
            return "not run (time budget spent)"
        if not self.ran:
            return "not run (the smoke phase stopped the run)"
        if self.rc in (124, 137):
            return f"fail (timed out; see {self.name}.log)"
        if output == "JSON" and self.data is None:
            return f"fail (exit {self.rc}, no JSON; see {self.name}.log)"
        return None


def gbps(value):
    return f"{value:.2f} GB/s"


def size_name(size_bytes):
    return f"{size_bytes // GIB} GiB" if size_bytes % GIB == 0 else f"{size_bytes // MIB} MiB"


def bytes_text(value):
    if abs(value) >= GIB:
        return f"{value} ({value / GIB:.2f} GiB)"
    return f"{value} ({value / MIB:.1f} MiB)"


def cell(text):
    """Table cell text: one line, no column separator."""
    return " ".join(str(text).split()).replace("|", "\\|")


def skip_message_text(message):
    """A gtest skip message without its leading "file:line" (and "Skipped") line."""
    lines = [line.strip() for line in str(message).splitlines()]
    if lines and re.match(r"^\S+:\d+:?( Skipped)?$", lines[0]):
        lines = lines[1:]
    return " ".join(line for line in lines if line) or "(no message)"


def skip_messages_from_output(text):
    """{Suite.Case: message} from a gtest executable's standard output: each case's
    "[ RUN      ] Suite.Case" line, then "file:line: Skipped" and the message, up to its
    "[  SKIPPED ]" line (every gtest version prints these; only newer ones put the message in the
    JSON report)."""
    messages = {}
    current = None
    collecting = None
    for line in (text or "").splitlines():
        run = re.match(r"^\[ RUN +\] (\S+)", line)
        if run:
            current, collecting = run.group(1), None
            continue
        if line.startswith("[  SKIPPED ]") or line.startswith("[       OK ]") or \
                line.startswith("[  FAILED  ]"):
            if current is not None and collecting is not None:
                messages[current] = " ".join(collecting).strip() or "(no message)"
            current, collecting = None, None
            continue
        if current is None:
            continue
        if re.match(r"^\S+:\d+: Skipped$", line.strip()):
            collecting = []
        elif collecting is not None and line.strip():
            collecting.append(line.strip())
    return messages


def classify_skip(message, gpu_seen):
    """The result of a skipped test case: fail where it found no GPU or driver that node info
    found; unsupported (why) otherwise."""
    lowered = message.lower()
    if any(phrase in lowered for phrase in NO_GPU_SKIPS):
        if gpu_seen:
            return f"fail (no GPU or driver found, yet node info lists a CUDA GPU: {message})"
        return f"not run (no GPU: {message})"
    return f"unsupported ({message})"


def gpu_test_rows(results, tests, gpu_seen, row, notes):
    """Rows of the GPU test executables: a summary, then each skipped case with its message."""
    passed = failed = skipped = 0
    not_run = []
    skip_rows = []
    for test in tests:
        step = Step(results, f"test-{test}")
        why_not = step.why_not(output="text")
        if why_not:
            if why_not.startswith("not run"):
                not_run.append(f"{test}: {why_not}")
            else:
                failed += 1
                notes.append(f"{test}: {why_not}")
            continue
        report = load_json(os.path.join(results, f"test-{test}.gtest.json"))
        if report is None:
            failed += 1
            notes.append(f"{test}: exit {step.rc}, no gtest JSON report (see test-{test}.txt)")
            continue
        printed = skip_messages_from_output(read_text(os.path.join(results, f"test-{test}.txt")))
        failed_here = 0
        for suite in report.get("testsuites", []):
            for case in suite.get("testsuite", []):
                name = f"{suite.get('name')}.{case.get('name')}"
                if case.get("failures"):
                    failed_here += 1
                    notes.append(f"{test}: {name} failed")
                elif case.get("result") == "SKIPPED":
                    skipped += 1
                    given = case.get("skipped")
                    if isinstance(given, list) and given:
                        given = given[0]
                    if isinstance(given, dict) and given.get("message"):
                        message = skip_message_text(given["message"])
                    else:
                        message = printed.get(name)
                    if message is None:
                        result = (f"fail (no skip message found in test-{test}.txt)"
                                  if gpu_seen else "not run (skipped)")
                    else:
                        result = classify_skip(message, gpu_seen)
                    skip_rows.append((f"GPU test: {test} {name}", "skipped", result))
                elif case.get("status", "RUN") == "RUN":
                    passed += 1
        failed += failed_here
        if step.rc != 0 and failed_here == 0:
            failed += 1
            notes.append(f"{test}: exit {step.rc} with no failed case (see test-{test}.txt)")
    total = passed + failed + skipped
    measured = f"{passed}/{total} passed, {skipped} skipped, {failed} failed"
    bad_skips = sum(1 for _, _, result in skip_rows if result.startswith("fail"))
    if bad_skips:
        measured += f", {bad_skips} skipped finding no GPU or driver"
    if not_run:
        measured += f", {len(not_run)} executable(s) not run"
    if failed or bad_skips or (passed == 0 and not not_run):
        result = "fail"
    elif not_run:
        result = not_run[0].split(": ", 1)[1]
    else:
        result = "pass"
    row(f"GPU tests ({len(tests)} executables)", measured, "all pass", result)
    notes.extend(not_run)
    for name, message, result in skip_rows:
        row(name, message, "-", result)


def function_rows(prefix, mechanism, model, f, step, best_raw, row):
    status = f.get("status")
    why = f.get("why") or ""
    if status == "unsupported":
        row(f"{prefix}: bench function", "-", "pass", f"unsupported ({why})")
        return
    row(f"{prefix}: bench function", f"status {status}" + (f": {why}" if why else ""),
        "pass", "pass" if status == "pass" and step.rc == 0 else "fail")
    allocated = int(f.get("allocated_bytes", 0))
    slice_bytes = int(f.get("slice_bytes", 0))
    freed = int(f.get("freed_bytes", 0))
    context = int(f.get("context_bytes", 0))
    restore_ms = float(f.get("restore_ms", 0))
    rounds = f.get("rounds")
    row(f"{prefix}: checkpoint / restore (medians"
        + (f" of {rounds} rounds)" if rounds is not None else ")"),
        f"{f.get('checkpoint_ms', 0):.1f} ms / {restore_ms:.1f} ms "
        f"({f.get('restore_gbps', 0):.2f} GB/s)")
    if "fast_swap_ms" in f and mechanism != "checkpoint":
        # A checkpoint right after a restore: the image is unchanged. The shim's fast swap
        # compares chunk digests on the GPU. (The checkpoint API copies everything whatever
        # changed: bench function does not time it.)
        fast_ms = float(f["fast_swap_ms"])
        full_ms = float(f.get("checkpoint_ms", 0))
        speedup = full_ms / fast_ms if fast_ms > 0 else 0.0
        measured = (f"{fast_ms:.2f} ms, {bytes_text(int(f.get('fast_swap_copied_bytes', 0)))} "
                    f"copied: {speedup:.1f}x faster than the full checkpoint")
        if mechanism == "shim" and model in BOUND_CHECKED_MODELS:
            row(f"{prefix}: fast swap of an unchanged image (median)", measured,
                ">= 10x faster than a full checkpoint", "pass" if speedup >= 10 else "fail")
        else:
            row(f"{prefix}: fast swap of an unchanged image (median, reported)", measured)
    if "restore_copy_ms" in f:
        # The restore as the function sees it is what the bound judges; this is its copy share.
        row(f"{prefix}: of the restore, moving bytes (median)",
            f"{float(f['restore_copy_ms']):.1f} ms")
    if "slice_alloc_ms" in f:
        # Left out of the restore and its bound; a live node pays it before a restore too.
        row(f"{prefix}: handing out the slice before a restore (median)",
            f"{float(f['slice_alloc_ms']):.1f} ms")
    weights = MODEL_WEIGHT_BYTES.get(model)
    if mechanism == "shim":
        moved_name = f"{prefix}: allocated (the image the shim moved)"
    else:
        moved_name = f"{prefix}: allocated (what the checkpoint took off the GPU)"
    if weights is None:
        row(moved_name, bytes_text(allocated))
    else:
        row(moved_name, bytes_text(allocated), f">= the weights, {bytes_text(weights)}",
            "pass" if allocated >= weights else "fail")
    if mechanism == "shim":
        row(f"{prefix}: slice (the function's device memory)", bytes_text(slice_bytes))
        if model in BOUND_CHECKED_MODELS:
            target = "<= 1.2 x allocated / best raw (2 GiB) + 1 ms"
            if best_raw is None:
                row(f"{prefix}: restore within bound", f"{restore_ms:.1f} ms", target,
                    "fail (no 2 GiB raw bandwidth measured)")
            else:
                bound_ms = BOUND_FACTOR * allocated / (best_raw * 1e9) * 1e3 + BOUND_SLACK_MS
                row(f"{prefix}: restore within bound",
                    f"{restore_ms:.1f} ms vs bound {bound_ms:.1f} ms", target,
                    "pass" if allocated > 0 and restore_ms <= bound_ms else "fail")
        elif best_raw is None:
            row(f"{prefix}: restore against the bound (reported)",
                f"{restore_ms:.1f} ms (no 2 GiB raw bandwidth measured)")
        else:
            bound_ms = BOUND_FACTOR * allocated / (best_raw * 1e9) * 1e3 + BOUND_SLACK_MS
            row(f"{prefix}: restore against the bound (reported)",
                f"{restore_ms:.1f} ms vs bound {bound_ms:.1f} ms")
        row(f"{prefix}: GPU memory freed after checkpoint (driver)",
            f"{bytes_text(freed)} of the {bytes_text(slice_bytes)} slice", ">= the slice",
            "pass" if slice_bytes > 0 and freed >= slice_bytes else "fail")
        row(f"{prefix}: left on the GPU (context)", bytes_text(context))
    else:
        row(f"{prefix}: GPU memory freed after checkpoint (driver)", bytes_text(freed))
        row(f"{prefix}: left on the GPU (context)",
            f"{bytes_text(context)} beyond before the function started",
            f"<= {CHECKPOINT_LEFT_TARGET // MIB} MiB",
            "pass" if context <= CHECKPOINT_LEFT_TARGET else "fail")
    identical = f.get("outputs_identical")
    row(f"{prefix}: outputs identical after restore", str(identical).lower(), "true",
        "pass" if identical is True else "fail")


def table(results):
    rows = []  # (check, measured, target, result)
    notes = []

    def row(name, measured, target="-", result="-"):
        rows.append((name, measured, target, result))

    # The smoke phase.
    step = Step(results, "smoke-node-info")
    gpus = cuda_gpus(step.data)
    if step.why_not():
        row("smoke: node info", "-", "a CUDA GPU", step.why_not())
    elif not gpus:
        row("smoke: node info", f"no CUDA GPU (backend {step.data.get('backend')})", "a CUDA GPU",
            "fail")
    else:
        g = gpus[0]
        row("smoke: node info", f"{len(gpus)} CUDA GPU(s); GPU 0: {g.get('name')}, "
            f"{g.get('memory_bytes', 0) / GIB:.1f} GiB, link measured "
            f"{g.get('measured_link_bytes_per_second', 0) / 1e9:.2f} GB/s", "a CUDA GPU", "pass")
    step = Step(results, "smoke-function-shim-resnet50")
    name = "smoke: resnet50 through the shim, 1 round"
    if step.why_not():
        row(name, "-", "pass", step.why_not())
    else:
        f = step.data
        why = f.get("why") or ""
        figures = ""
        if "restore_ms" in f:
            figures = (f"; restore {f['restore_ms']:.1f} ms, outputs identical "
                       f"{str(f.get('outputs_identical')).lower()}")
        row(name, f"status {f.get('status')}" + (f": {why}" if why else "") + figures, "pass",
            "pass" if f.get("status") == "pass" and step.rc == 0 else "fail")
    step = Step(results, "smoke-restore-64Mi")
    name = "smoke: restore 64 MiB"
    if step.why_not():
        row(name, "-", "measures", step.why_not())
    else:
        r = (step.data.get("results") or [{}])[0]
        measured = r.get("restore_gbps", 0) > 0
        row(name, f"restore {gbps(r.get('restore_gbps', 0))}, raw {gbps(r.get('raw_gbps', 0))} "
            f"({r.get('raw_method', '-')})", "measures", "pass" if measured else "fail")

    # Copies: the restore engine against the best raw method.
    restore = Step(results, "restore")
    best_raw = None  # best raw host-to-device GB/s at 2 GiB
    if restore.why_not():
        row("restore benchmark (512 MiB, 2 GiB)", "-", "-", restore.why_not())
    else:
        by_size = sorted(restore.data.get("results", []), key=lambda r: r["size_bytes"])
        for r in by_size:
            size = size_name(r["size_bytes"])
            methods = r.get("raw_methods", {})
            streams = {m: v for m, v in methods.items() if m.startswith("stream_x")}
            row(f"raw pinned cudaMemcpy, {size}",
                gbps(methods["memcpy"]) if "memcpy" in methods else "-")
            if streams:
                method = max(streams, key=streams.get)
                row(f"best N-stream raw, {size}", f"{gbps(streams[method])} ({method})")
            else:
                row(f"best N-stream raw, {size}", "not measured")
            row(f"best raw method, {size}", f"{r['raw_method']}, {gbps(r['raw_gbps'])}")
            ratio = r["ratio"]
            if r["size_bytes"] == 2 * GIB:
                row(f"restore engine, {size}", f"{gbps(r['restore_gbps'])}, ratio {ratio:.3f}",
                    f"ratio >= {RESTORE_RATIO_TARGET:.2f}",
                    "pass" if ratio >= RESTORE_RATIO_TARGET else "fail")
                best_raw = r["raw_gbps"] if r["raw_gbps"] > 0 else None
            else:
                row(f"restore engine, {size}", f"{gbps(r['restore_gbps'])}, ratio {ratio:.3f}")
            d = r["d2h"]
            row(f"device to host, {size}", f"raw {gbps(d['raw_gbps'])} ({d['raw_method']}), "
                f"checkpoint {gbps(d['checkpoint_gbps'])}, ratio {d['ratio']:.3f}")
        if not any(r["size_bytes"] == 2 * GIB for r in by_size):
            row("restore engine, 2 GiB", "-", f"ratio >= {RESTORE_RATIO_TARGET:.2f}",
                "fail (no 2 GiB result)")

    # The PyTorch functions under each mechanism, in the order run.sh runs them.
    shim_passed = True
    for mechanism, model in FUNCTION_STEPS:
        prefix = f"{model}, {mechanism}"
        step = Step(results, f"function-{mechanism}-{model}")
        if mechanism == "shim":
            shim_passed = (shim_passed and step.rc == 0 and bool(step.data)
                           and step.data.get("status") == "pass")
        if step.why_not():
            row(f"{prefix}: bench function", "-", "pass", step.why_not())
            continue
        function_rows(prefix, mechanism, model, step.data, step, best_raw, row)

    # The GPU test executables.
    tests_file = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests",
                              "gpu-tests.txt")
    tests = [t for t in (read_text(tests_file) or "").split() if t]
    gpu_test_rows(results, tests, bool(gpus), row, notes)

    failed_rows = [r for r in rows if r[3].startswith("fail") or r[3].startswith("not run")]
    lines = ["| check | measured | target | result |", "|---|---|---|---|"]
    lines += [f"| {cell(a)} | {cell(b)} | {cell(c)} | {cell(d)} |" for a, b, c, d in rows]
    if notes:
        lines += ["", "Failures and steps not run:"] + [f"- {n}" for n in notes]
    verdict = "pass" if not failed_rows and shim_passed else "fail"
    lines += ["", f"GPU check: {verdict} ({len(failed_rows)} check(s) failed or not run; shim path "
              f"{'passed' if shim_passed else 'did not pass'})"]
    text = "\n".join(lines) + "\n"
    print(text, end="")
    with open(os.path.join(results, "summary.md"), "w", encoding="utf-8") as file:
        file.write(text)
    return 0 if verdict == "pass" else 1


def main(argv):
    if len(argv) == 4 and argv[1] == "check":
        return check(argv[2], argv[3])
    if len(argv) == 3 and argv[1] == "table":
        return table(argv[2])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv))
