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
figures ("-"). The targets:
  GPU tests              every test case of every executable labelled gpu passed or skipped,
                         at least one passed, and every executable exited 0
  restore engine, 2 GiB  restore GB/s / best raw GB/s >= 0.90 (medians of the same run)
  bench function         its own status is pass (exit 0)
  shim restore bound     restore ms <= 1.2 x allocated bytes / best raw bandwidth + 1 ms, best raw
                         being the best raw host-to-device method at the largest size measured
  memory freed           freed bytes (free device memory after the checkpoint minus while
                         resident, from the driver) >= 0.95 x allocated bytes
  outputs identical      the logits after each restore equal those before it, bit for bit
"""

import json
import os
import sys

MODELS = ("resnet50", "vit_l_16")
MECHANISMS = ("shim", "checkpoint")
RESTORE_RATIO_TARGET = 0.90
FREED_FRACTION_TARGET = 0.95
BOUND_FACTOR = 1.2
BOUND_SLACK_MS = 1.0
GIB = 2**30
MIB = 2**20


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


def check(kind, path):
    data = load_json(path)
    if data is None:
        print(f"report: {path} holds no JSON", file=sys.stderr)
        return 1
    if kind == "node-info":
        gpus = [g for g in data.get("gpus", []) if g.get("kind") == "cuda"]
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

    def why_not(self):
        """Why there is no result: None when the step produced JSON."""
        if self.skipped:
            return "not run (time budget spent)"
        if not self.ran:
            return "not run (the smoke phase stopped the run)"
        if self.rc in (124, 137):
            return f"fail (timed out; see {self.name}.log)"
        if self.data is None:
            return f"fail (exit {self.rc}, no JSON; see {self.name}.log)"
        return None


def gbps(value):
    return f"{value:.2f} GB/s"


def size_name(size_bytes):
    return f"{size_bytes // GIB} GiB" if size_bytes % GIB == 0 else f"{size_bytes // MIB} MiB"


def bytes_text(value):
    return f"{value} ({value / GIB:.2f} GiB)" if value >= GIB else f"{value} ({value / MIB:.1f} MiB)"


def count_tests(results, tests):
    """(passed, failed, skipped, problems) over every test case of every executable."""
    passed = failed = skipped = 0
    problems = []
    for test in tests:
        step = Step(results, f"test-{test}")
        if not step.ran:
            failed += 1
            problems.append(f"{test}: {step.why_not()}")
            continue
        report = load_json(os.path.join(results, f"test-{test}.gtest.json"))
        if report is None:
            failed += 1
            problems.append(f"{test}: exit {step.rc}, no gtest JSON report (see test-{test}.txt)")
            continue
        failed_here = 0
        for suite in report.get("testsuites", []):
            for case in suite.get("testsuite", []):
                name = f"{suite.get('name')}.{case.get('name')}"
                if case.get("failures"):
                    failed_here += 1
                    problems.append(f"{test}: {name} failed")
                elif case.get("result") == "SKIPPED":
                    skipped += 1
                elif case.get("status", "RUN") == "RUN":
                    passed += 1
        failed += failed_here
        if step.rc != 0 and failed_here == 0:
            failed += 1
            problems.append(f"{test}: exit {step.rc} with no failed case (see test-{test}.txt)")
    return passed, failed, skipped, problems


def table(results):
    rows = []  # (check, measured, target, result)
    notes = []

    def row(name, measured, target="-", result="-"):
        rows.append((name, measured, target, result))

    info = load_json(os.path.join(results, "smoke-node-info.json")) or {}
    gpus = [g for g in info.get("gpus", []) if g.get("kind") == "cuda"]
    if gpus:
        g = gpus[0]
        row("GPU 0", f"{g.get('name')}, {g.get('memory_bytes', 0) / GIB:.1f} GiB, link measured "
            f"{g.get('measured_link_bytes_per_second', 0) / 1e9:.2f} GB/s ({len(gpus)} GPUs)")

    # GPU tests.
    tests_file = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tests",
                              "gpu-tests.txt")
    tests = [t for t in (read_text(tests_file) or "").split() if t]
    passed, failed, skipped, problems = count_tests(results, tests)
    total = passed + failed + skipped
    ok = failed == 0 and passed > 0
    row(f"GPU tests ({len(tests)} executables)", f"{passed}/{total} passed, {skipped} skipped, "
        f"{failed} failed", "all pass", "pass" if ok else "fail")
    notes += problems

    # Copies: the restore engine against the best raw method.
    restore = Step(results, "restore")
    best_raw = None  # (GB/s, size) at the largest size measured
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
            if r["size_bytes"] >= 2 * GIB:
                row(f"restore engine, {size}", f"{gbps(r['restore_gbps'])}, ratio {ratio:.3f}",
                    f"ratio >= {RESTORE_RATIO_TARGET:.2f}",
                    "pass" if ratio >= RESTORE_RATIO_TARGET else "fail")
            else:
                row(f"restore engine, {size}", f"{gbps(r['restore_gbps'])}, ratio {ratio:.3f}")
            d = r["d2h"]
            row(f"device to host, {size}", f"raw {gbps(d['raw_gbps'])} ({d['raw_method']}), "
                f"checkpoint {gbps(d['checkpoint_gbps'])}, ratio {d['ratio']:.3f}")
            best_raw = (r["raw_gbps"], size)
        if not any(r["size_bytes"] >= 2 * GIB for r in by_size):
            row("restore engine, 2 GiB", "-", f"ratio >= {RESTORE_RATIO_TARGET:.2f}",
                "fail (no 2 GiB result)")
    if best_raw is None:
        smoke = load_json(os.path.join(results, "smoke-restore-64Mi.json")) or {}
        if smoke.get("results"):
            best_raw = (smoke["results"][0]["raw_gbps"], "64 MiB")

    # The PyTorch functions under each mechanism.
    shim_passed = True
    for model in MODELS:
        for mechanism in MECHANISMS:
            prefix = f"{model}, {mechanism}"
            step = Step(results, f"function-{mechanism}-{model}")
            if mechanism == "shim":
                shim_passed = shim_passed and bool(step.data) and step.data.get("status") == "pass"
            if step.why_not():
                row(f"{prefix}: bench function", "-", "pass", step.why_not())
                continue
            f = step.data
            status = f.get("status")
            why = f.get("why") or ""
            if status == "unsupported":
                row(f"{prefix}: bench function", "-", "pass", f"unsupported ({why})")
                continue
            row(f"{prefix}: bench function", f"status {status}" + (f": {why}" if why else ""),
                "pass", "pass" if status == "pass" and step.rc == 0 else "fail")
            allocated = int(f.get("allocated_bytes", 0))
            row(f"{prefix}: checkpoint / restore (medians)",
                f"{f.get('checkpoint_ms', 0):.1f} ms / {f.get('restore_ms', 0):.1f} ms "
                f"({f.get('restore_gbps', 0):.2f} GB/s)")
            row(f"{prefix}: allocated", bytes_text(allocated))
            if best_raw is not None and best_raw[0] > 0:
                bound_ms = BOUND_FACTOR * allocated / (best_raw[0] * 1e9) * 1e3 + BOUND_SLACK_MS
                measured = f"{f.get('restore_ms', 0):.1f} ms vs bound {bound_ms:.1f} ms"
                if mechanism == "shim":
                    row(f"{prefix}: restore within bound", measured,
                        f"<= 1.2 x allocated / best raw ({best_raw[1]}) + 1 ms",
                        "pass" if f.get("restore_ms", 0) <= bound_ms else "fail")
                else:
                    row(f"{prefix}: restore against the shim's bound", measured)
            elif mechanism == "shim":
                row(f"{prefix}: restore within bound", f"{f.get('restore_ms', 0):.1f} ms",
                    "<= 1.2 x allocated / best raw + 1 ms", "fail (no raw bandwidth measured)")
            freed = int(f.get("freed_bytes", 0))
            row(f"{prefix}: GPU memory freed after checkpoint (driver)",
                f"{bytes_text(freed)} of {allocated} allocated",
                f">= {FREED_FRACTION_TARGET:.2f} x allocated",
                "pass" if allocated > 0 and freed >= FREED_FRACTION_TARGET * allocated else "fail")
            row(f"{prefix}: context left while checkpointed", bytes_text(int(f.get("context_bytes",
                                                                                    0))))
            identical = f.get("outputs_identical")
            row(f"{prefix}: outputs identical after restore", str(identical).lower(), "true",
                "pass" if identical is True else "fail")

    failed_rows = [r for r in rows if r[3].startswith("fail") or r[3].startswith("not run")]
    lines = ["| check | measured | target | result |", "|---|---|---|---|"]
    lines += [f"| {a} | {b} | {c} | {d} |" for a, b, c, d in rows]
    if notes:
        lines += ["", "Failures:"] + [f"- {n}" for n in notes]
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
