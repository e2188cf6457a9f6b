#!/usr/bin/env python3
"""Checks deploy/grafana-dashboard.json against the metric set that gshare exports.

  scripts/check-dashboard.py [DASHBOARD] [GSHARE_METRICS_CC]

The metric set is read from src/gshare/metrics/gshare_metrics.cc: every registry_.AddCounter,
AddHistogram and AddGauge call, with its labels. The checks:

- the dashboard is well-formed JSON with a ${DS_PROMETHEUS} datasource input;
- every gshare_* name in a panel's expression or a template variable's query is a defined metric,
  or a histogram's series (NAME_bucket, NAME_sum, NAME_count), and a histogram is never used bare;
- every label matched on a metric ({label="..."}) is one of its labels (or le on a _bucket series,
  or the target labels instance and job); every label in by (...) or without (...) is a label of
  some metric in that expression;
- where promtool is installed (Debian's prometheus package, installed by scripts/setup.sh), every
  expression parses as PromQL (`promtool check rules`, Grafana's variables replaced). Without
  promtool this check is skipped with a message, or fails when CI=true.

Exit status 0 when every check passes, 1 otherwise. Python 3 standard library only.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET_LABELS = {"instance", "job"}
HISTOGRAM_SUFFIXES = ("_bucket", "_sum", "_count")


def read_metric_set(path):
    """Returns {name: (type, set of labels)} from gshare_metrics.cc."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    variables = {}
    for m in re.finditer(r"std::vector<std::string>\s+(\w+)\s*=\s*\{([^}]*)\}", text):
        variables[m.group(1)] = set(re.findall(r'"([^"]*)"', m.group(2)))
    metrics = {}
    call = re.compile(r"\bAdd(Counter|Histogram|Gauge)\s*\(\s*\"(gshare_\w+)\"")
    for m in call.finditer(text):
        kind, name = m.group(1).lower(), m.group(2)
        pos = m.end()
        # Skip the help text: one or more adjacent string literals after a comma.
        help_text = re.compile(r'\s*,\s*(?:"(?:[^"\\]|\\.)*"\s*)+')
        h = help_text.match(text, pos)
        if not h:
            raise ValueError(f"{path}: cannot read the help text of {name}")
        pos = h.end()
        rest = text[pos:]
        if rest.startswith(")"):
            labels = set()
        else:
            a = re.match(r",\s*(\{[^}]*\}|\w+)", rest)
            if not a:
                raise ValueError(f"{path}: cannot read the labels of {name}")
            arg = a.group(1)
            if arg.startswith("{"):
                labels = set(re.findall(r'"([^"]*)"', arg))
            elif arg in variables:
                labels = variables[arg]
            else:
                raise ValueError(f"{path}: {name}'s labels are {arg}, which is not a known list")
        if name in metrics:
            raise ValueError(f"{path}: {name} is registered twice")
        metrics[name] = (kind, labels)
    if not metrics:
        raise ValueError(f"{path}: no AddCounter/AddHistogram/AddGauge calls found")
    return metrics


def resolve(series, metrics):
    """(metric name, labels the series may carry) for a series name, or None when undefined."""
    if series in metrics:
        kind, labels = metrics[series]
        return (None if kind == "histogram" else (series, labels))
    for suffix in HISTOGRAM_SUFFIXES:
        base = series[: -len(suffix)]
        if series.endswith(suffix) and metrics.get(base, ("",))[0] == "histogram":
            labels = set(metrics[base][1])
            if suffix == "_bucket":
                labels.add("le")
            return (base, labels)
    return None


def expressions(dashboard):
    """(where, expression) for every panel target and every query variable."""
    found = []

    def walk(panels, prefix):
        for panel in panels:
            title = panel.get("title", "?")
            for target in panel.get("targets", []):
                if "expr" in target:
                    found.append((f"panel '{prefix}{title}' target {target.get('refId')}",
                                  target["expr"]))
            walk(panel.get("panels", []), f"{prefix}{title} / ")

    walk(dashboard.get("panels", []), "")
    for var in dashboard.get("templating", {}).get("list", []):
        if var.get("type") != "query":
            continue
        query = var.get("query")
        if isinstance(query, dict):
            query = query.get("query")
        if query:
            found.append((f"variable '{var.get('name')}'", query))
    return found


def grafana_to_promql(expr):
    """Replaces Grafana's variables so that promtool can parse the expression."""
    expr = expr.replace("$__rate_interval", "5m").replace("$__interval", "1m")
    expr = expr.replace("$__range", "1h")
    return re.sub(r"\$\{?(\w+)\}?", ".*", expr)


def check_expression(where, expr, metrics):
    errors = []
    # Strip quoted strings so that label values never read as names.
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    names_in_expr = set()
    for m in re.finditer(r"\b(gshare_\w+)\s*(\{[^}]*\})?", bare):
        series, matchers = m.group(1), m.group(2)
        resolved = resolve(series, metrics)
        if resolved is None:
            if series in metrics:
                errors.append(f"{where}: {series} is a histogram; use {series}_bucket, _sum or _count")
            else:
                errors.append(f"{where}: {series} is not a metric of gshare_metrics.cc")
            continue
        base, labels = resolved
        names_in_expr.add(series)
        allowed = labels | TARGET_LABELS
        for label in re.findall(r"(\w+)\s*(?:=~|!~|!=|=)", matchers or ""):
            if label not in allowed:
                errors.append(f"{where}: {series} has no label '{label}' (it has "
                              f"{', '.join(sorted(labels)) or 'none'})")
    all_labels = set(TARGET_LABELS)
    for series in names_in_expr:
        all_labels |= resolve(series, metrics)[1]
    for m in re.finditer(r"\b(?:by|without)\s*\(([^)]*)\)", bare):
        for label in re.findall(r"\w+", m.group(1)):
            if label not in all_labels:
                errors.append(f"{where}: grouping by '{label}', a label of none of its metrics")
    # label_values(metric, label) in a variable's query.
    for m in re.finditer(r"label_values\(\s*(gshare_\w+)[^,]*,\s*(\w+)\s*\)", bare):
        resolved = resolve(m.group(1), metrics)
        if resolved and m.group(2) not in resolved[1] | TARGET_LABELS:
            errors.append(f"{where}: {m.group(1)} has no label '{m.group(2)}'")
    if not names_in_expr and not errors:
        errors.append(f"{where}: uses no gshare metric")
    return errors


def promtool_check(exprs):
    """Parses every panel expression with promtool; returns errors, or None when skipped."""
    promtool = shutil.which("promtool")
    if promtool is None:
        return None
    rules = []
    for i, (where, expr) in enumerate(exprs):
        if expr.lstrip().startswith("label_values("):
            continue  # Grafana's function, not PromQL
        rules.append(f"      - record: dashboard:expr_{i}\n"
                     f"        expr: {json.dumps(grafana_to_promql(expr))}\n")
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "dashboard-rules.yml")
        with open(path, "w", encoding="utf-8") as f:
            f.write("groups:\n  - name: dashboard\n    rules:\n" + "".join(rules))
        run = subprocess.run([promtool, "check", "rules", path], capture_output=True, text=True)
    if run.returncode != 0:
        output = (run.stdout + run.stderr).strip()
        failed = sorted({int(i) for i in re.findall(r"dashboard:expr_(\d+)", output)})
        return [f"{exprs[i][0]}: not PromQL: {exprs[i][1]}" for i in failed] + [
            f"promtool check rules: {output}"]
    return []


def main(argv):
    dashboard_path = argv[1] if len(argv) > 1 else os.path.join(ROOT, "deploy", "grafana-dashboard.json")
    metrics_path = argv[2] if len(argv) > 2 else os.path.join(
        ROOT, "src", "gshare", "metrics", "gshare_metrics.cc")
    try:
        with open(dashboard_path, encoding="utf-8") as f:
            dashboard = json.load(f)
        metrics = read_metric_set(metrics_path)
    except (OSError, ValueError) as e:
        print(f"check-dashboard: {e}", file=sys.stderr)
        return 1

    errors = []
    inputs = {i.get("name") for i in dashboard.get("__inputs", [])}
    if "DS_PROMETHEUS" not in inputs:
        errors.append("no DS_PROMETHEUS datasource input (__inputs)")
    exprs = expressions(dashboard)
    if not exprs:
        errors.append("no expressions found")
    for where, expr in exprs:
        errors.extend(check_expression(where, expr, metrics))

    promtool_errors = promtool_check(exprs)
    if promtool_errors is None:
        message = "promtool not found (Debian package prometheus); PromQL syntax not checked"
        if os.environ.get("CI") == "true":
            errors.append(message)
        else:
            print(f"check-dashboard: skipped: {message}", file=sys.stderr)
    else:
        errors.extend(promtool_errors)

    if errors:
        for e in errors:
            print(f"check-dashboard: {e}", file=sys.stderr)
        return 1
    used = set()
    for _, expr in exprs:
        for series in re.findall(r"\bgshare_\w+", expr):
            used.add(resolve(series, metrics)[0])
    print(f"check-dashboard: {len(exprs)} expressions over {len(used)} of the {len(metrics)} "
          f"metrics of {os.path.relpath(metrics_path, ROOT)}; all defined, labels match"
          + ("" if promtool_errors is None else ", PromQL parses (promtool)"))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
