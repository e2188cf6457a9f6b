"""The serve phase of the GPU check (scripts/gpu-serve-check.sh): the server's tenants and their
uploads, and the phase's one table.

  python3 serve-check.py node URL ADMIN_KEY_FILE          prints the node's sandbox state
  python3 serve-check.py tenants URL ADMIN_KEY_FILE UPLOADS
      makes each tenant of UPLOADS ("tenant local-path name" lines, scripts/real-models.py) with
      the admin's key, then has each upload its own files through the files API with its own key
  python3 serve-check.py table WORK
      prints one table from WORK/live/summary.json (the live run under gshare and the simulator's
      predictions of the same requests under gshare and keepalive), WORK/metrics.txt (the
      server's /metrics after the run), WORK/gpu-memory.csv (the driver's figures, where there is
      a GPU) and WORK/notes.txt; writes it to WORK/serve-summary.md too. Exit status 0 when every
      request was answered, none wrong and none with an error other than 504 (its latest start
      passed: an SLO miss, which the table counts), 1 otherwise.

Only the standard library: the machine's Python may lack anything else.
"""

import http.client
import json
import math
import os
import sys
import urllib.parse


def read_key(path):
    with open(path) as f:
        return f.read().strip()


def request(url, method, path, key, body=None, headers=None):
    parts = urllib.parse.urlsplit(url)
    connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=120)
    all_headers = {"Authorization": f"Bearer {key}"}
    all_headers.update(headers or {})
    connection.request(method, path, body=body, headers=all_headers)
    response = connection.getresponse()
    data = response.read()
    connection.close()
    return response.status, data


def node(url, key_file):
    status, data = request(url, "GET", "/api/v1/node", read_key(key_file))
    if status != 200:
        sys.exit(f"GET /api/v1/node: {status} {data[:200]!r}")
    print(json.loads(data).get("sandbox", "unknown"))


def tenants(url, key_file, uploads_path):
    admin = read_key(key_file)
    with open(uploads_path) as f:
        uploads = [line.split(" ", 2) for line in f.read().splitlines() if line.strip()]
    keys = {}
    for tenant, _, _ in uploads:
        if tenant in keys:
            continue
        status, data = request(url, "POST", "/api/v1/tenants", admin,
                               json.dumps({"name": tenant}).encode(),
                               {"Content-Type": "application/json"})
        if status not in (200, 201):
            sys.exit(f"making tenant {tenant}: {status} {data[:200]!r}")
        keys[tenant] = json.loads(data)["key"]
    for tenant, local, name in uploads:
        size = os.path.getsize(local)
        with open(local, "rb") as body:  # streamed: a model file is not read whole
            status, data = request(url, "PUT", "/api/v1/files/" + urllib.parse.quote(name),
                                   keys[tenant], body, {"Content-Length": str(size)})
        if status not in (200, 201):
            sys.exit(f"uploading {name} as {tenant}: {status} {data[:200]!r}")
    print(f"{len(keys)} tenants uploaded {len(uploads)} files through the files API, "
          f"each with its own key")


def restore_median_ms(metrics_path):
    """The median restore's histogram bucket (its upper bound, ms), over every function."""
    if not os.path.exists(metrics_path):
        return None, 0
    buckets = {}
    count = 0
    with open(metrics_path) as f:
        for line in f:
            if line.startswith("gshare_restore_duration_seconds_bucket{"):
                labels, value = line.rsplit(" ", 1)
                le = labels.split('le="', 1)[1].split('"', 1)[0]
                bound = math.inf if le == "+Inf" else float(le)
                buckets[bound] = buckets.get(bound, 0) + float(value)
            elif line.startswith("gshare_restore_duration_seconds_count{"):
                count += int(float(line.rsplit(" ", 1)[1]))
    if count == 0:
        return None, 0
    for bound in sorted(buckets):
        if buckets[bound] >= count / 2:
            return bound * 1000, count
    return None, count


def metric_sum(metrics_path, name):
    """The sum of a counter's samples over every function; None without the file or the name."""
    if not os.path.exists(metrics_path):
        return None
    total = None
    with open(metrics_path) as f:
        for line in f:
            if line.startswith(name + "{") or line.startswith(name + " "):
                try:
                    value = float(line.rsplit(" ", 1)[1])
                except ValueError:
                    continue
                if math.isfinite(value) and value >= 0:
                    total = (total or 0) + value
    return total


def fast_swap_text(metrics_path):
    """The share of evicted state left uncopied (fast swap), from the node's counters."""
    copied = metric_sum(metrics_path, "gshare_checkpoint_bytes_total")
    skipped = metric_sum(metrics_path, "gshare_checkpoint_skipped_bytes_total")
    if copied is None or skipped is None:
        return "n/a (no checkpoint counters in /metrics)"
    if copied + skipped == 0:
        return "n/a (no eviction had state to keep)"
    return (f"{100 * skipped / (copied + skipped):.1f}% of {(copied + skipped) / 2**20:.0f} MiB "
            f"evicted ({skipped / 2**20:.0f} MiB not copied back)")


def gpu_memory(path):
    """before, peak during, after (MiB), from the sampler's "phase,MiB" lines."""
    if not os.path.exists(path):
        return None
    phases = {}
    with open(path) as f:
        for line in f:
            phase, _, mib = line.strip().partition(",")
            try:
                value = float(mib)
            except ValueError:
                continue
            if math.isfinite(value):
                phases.setdefault(phase, []).append(value)
    if not phases:
        return None
    pick = {"before": min, "during": max, "after": max}
    return {p: pick[p](v) for p, v in phases.items() if p in pick}


def fmt(value, spec):
    return "n/a" if value is None else format(value, spec)


def table(work):
    with open(os.path.join(work, "live", "summary.json")) as f:
        summary = json.load(f)
    live = summary["policies"]["live"]
    prediction = summary.get("prediction") or {}
    notes = []
    notes_path = os.path.join(work, "notes.txt")
    if os.path.exists(notes_path):
        with open(notes_path) as f:
            notes = [line.rstrip() for line in f if line.strip()]
    median_ms, restores_seen = restore_median_ms(os.path.join(work, "metrics.txt"))
    memory = gpu_memory(os.path.join(work, "gpu-memory.csv"))

    columns = [("live gshare", live)]
    for name in ("sim-gshare", "sim-keepalive"):
        columns.append((name.replace("-", " "), prediction.get(name)))

    def row(label, get):
        cells = []
        for _, report in columns:
            cells.append("-" if report is None else get(report))
        return f"| {label} | " + " | ".join(cells) + " |"

    lines = ["| | " + " | ".join(name for name, _ in columns) + " |",
             "|---|" + "---:|" * len(columns),
             row("requests", lambda r: str(r["requests"])),
             "| wrong outputs | " + str(summary["wrong_outputs"]) + " | - | - |",
             "| answered / unanswered | "
             f"{summary['answered']} / {summary['unanswered']} | - | - |",
             "| answers by status | " + ", ".join(
                 f"{code}: {n}" for code, n in sorted(summary["statuses"].items())) +
             " | - | - |",
             row("SLO attainment", lambda r: f"{100 * r['slo_attainment']:.2f}%"),
             row("p50 latency (ms)", lambda r: f"{r['latency_ms']['p50']:.1f}"),
             row("p99 latency (ms)", lambda r: f"{r['latency_ms']['p99']:.1f}"),
             row("GPU-seconds", lambda r: f"{r['gpu_seconds']:.1f}"),
             row("restores", lambda r: str(r["swaps"])),
             f"| restore median (ms, histogram bucket) | {fmt(median_ms, '.1f')} "
             f"({restores_seen} restores) | - | - |",
             f"| fast-swap share (bytes evictions did not copy back) | "
             f"{fast_swap_text(os.path.join(work, 'metrics.txt'))} | - | - |"]
    if memory:
        lines.append("| GPU memory used, driver (MiB): before / peak during / after | "
                     f"{fmt(memory.get('before'), '.0f')} / {fmt(memory.get('during'), '.0f')} / "
                     f"{fmt(memory.get('after'), '.0f')} | - | - |")
    else:
        lines.append("| GPU memory used, driver | n/a (emulated GPUs) | - | - |")
    # A 504 is a request whose latest start passed (the SLO row counts it); any other error is a
    # failure of the platform.
    errors = sum(n for code, n in summary["statuses"].items() if code not in ("200", "504"))
    verdict_ok = summary["wrong_outputs"] == 0 and summary["unanswered"] == 0 and errors == 0 \
        and summary["answered"] == live["requests"]
    text = "\n".join(notes + [""] + lines + [
        "",
        f"verdict: {'pass' if verdict_ok else 'FAIL'} "
        f"({summary['wrong_outputs']} wrong outputs, {errors} errors other than 504, "
        f"{summary['unanswered']} unanswered of {live['requests']} requests)"])
    print(text)
    with open(os.path.join(work, "serve-summary.md"), "w") as f:
        f.write(text + "\n")
    return 0 if verdict_ok else 1


def main(argv):
    if len(argv) == 2 and argv[0] == "table":
        return table(argv[1])
    if len(argv) == 3 and argv[0] == "node":
        return node(argv[1], argv[2])
    if len(argv) == 4 and argv[0] == "tenants":
        return tenants(argv[1], argv[2], argv[3])
    print(__doc__, file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]) or 0)
