"""Prints two `gshare replay` runs side by side with the simulator's prediction of each.

  python3 scripts/side-by-side.py out/live/gshare/summary.json out/live/keepalive/summary.json

Each summary holds the live run (policy "live") and, with the admin key, the prediction
("prediction": {"sim-<policy>": ...}). The last line compares the first run's GPU-seconds with the
second's at their SLO attainment. Exit status 1 when a summary cannot be read, or a run had a
wrong or unanswered request, or more than 5% of its requests answered other than 200 (a late
request answered 504 is a miss the SLO column counts, not a failure of the job).
"""

import json
import math
import sys


def load(path):
    with open(path) as f:
        summary = json.load(f)
    live = summary["policies"]["live"]
    prediction = summary.get("prediction") or {}
    name, predicted = next(iter(prediction.items()), ("sim", None))
    return summary, live, name, predicted


def number(value, digits=1):
    if value is None or (isinstance(value, float) and not math.isfinite(value)):
        return "-"
    return f"{value:.{digits}f}"


def main():
    if len(sys.argv) != 3:
        print(__doc__, file=sys.stderr)
        return 2
    columns, problems = [], []
    for path in sys.argv[1:]:
        summary, live, name, predicted = load(path)
        policy = name.removeprefix("sim-")
        columns.append((f"live {policy}", live, summary))
        columns.append((f"sim {policy}", predicted, None))
        not_ok = sum(count for status, count in summary["statuses"].items() if status != "200")
        if summary["wrong_outputs"] or summary["unanswered"] or not_ok * 20 > live["requests"]:
            problems.append(f"{policy}: {summary['wrong_outputs']} wrong, "
                            f"{summary['unanswered']} unanswered, {not_ok} answered other than 200")
    rows = [
        ("requests", lambda r, s: str(r["requests"])),
        ("GPU-seconds", lambda r, s: number(r["gpu_seconds"])),
        ("SLO attainment", lambda r, s: number(100 * r["slo_attainment"], 2) + "%"),
        ("p50 latency (ms)", lambda r, s: number(r["latency_ms"]["p50"])),
        ("p99 latency (ms)", lambda r, s: number(r["latency_ms"]["p99"])),
        ("restores", lambda r, s: str(r["swaps"]) if r.get("swaps") is not None else "-"),
        ("wrong answers", lambda r, s: str(s["wrong_outputs"]) if s else "-"),
    ]
    width = max(len(c[0]) for c in columns) + 2
    print(f"{'':18}" + "".join(f"{c[0]:>{width}}" for c in columns))
    for label, cell in rows:
        line = f"{label:18}"
        for _, run, summary in columns:
            line += f"{(cell(run, summary) if run else '-'):>{width}}"
        print(line)
    first, second = columns[0][1], columns[2][1]
    if first["gpu_seconds"] and second["gpu_seconds"]:
        ratio = first["gpu_seconds"] / second["gpu_seconds"]
        print(f"\n{columns[0][0]} uses {ratio:.2f}x the GPU-seconds of {columns[2][0]}, at "
              f"{100 * first['slo_attainment']:.2f}% SLO attainment against "
              f"{100 * second['slo_attainment']:.2f}%.")
    for problem in problems:
        print("problem: " + problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
