#!/usr/bin/env bash
# The hardening targets of gshare serve, measured against a real server on this machine:
#
#   bash scripts/bench-hardening.sh [CLIENTS] [BODY_MIB]     # default 50 60
#
# 1. CLIENTS clients without a key each announce a BODY_MIB body, half with
#    `Expect: 100-continue`, half sending it: the server's peak resident memory growth (VmHWM,
#    reset before through /proc/PID/clear_refs) and every answer's status (401 expected, never
#    100 Continue).
# 2. Tenant A posts four BODY_MIB JSON inference bodies to its echo function at once; meanwhile
#    tenant B calls its own echo with one element, and the health check, one after another:
#    their p50 and p99 latency, and those of the same calls on an idle server in the same run.
# 3. `gshare tenant remove` beside the server: the time from the command's exit until the
#    removed tenant's key is refused (401), and until its function process is gone.
# Starts gshare serve (one emulated GPU) on a free port of 127.0.0.1 with a fresh data directory
# under /tmp, and stops it. Needs the build (scripts/build.sh), python3 and curl. The figures in
# docs/serve.md come from this script.
set -euo pipefail
cd "$(dirname "$0")/.."
source scripts/serve-url.sh
CLIENTS="${1:-50}"
BODY_MIB="${2:-60}"
command -v curl >/dev/null || { echo "curl is not installed (apt-get install curl)" >&2; exit 1; }
command -v python3 >/dev/null || { echo "python3 is not installed" >&2; exit 1; }

WORK="$(mktemp -d /tmp/gshare-bench-hardening.XXXXXX)"
chmod 0711 "$WORK"
./build/gshare serve --data-dir "$WORK/data" --listen 127.0.0.1:0 --grpc-listen 127.0.0.1:0 --device emulated --gpus 1 --gpu-memory 4Gi \
  --snapshot-pool 512Mi --max-body "$((BODY_MIB + 4))Mi" --uid-ledger "$WORK/uid-ranges" \
  >"$WORK/serve.out" 2>"$WORK/serve.log" &
SERVER=$!
cleanup() {
  kill -TERM "$SERVER" 2>/dev/null && wait "$SERVER" || true
  rm -rf "$WORK"
}
trap cleanup EXIT
URL="$(serve_url "$SERVER" "$WORK/serve.out" "$WORK/serve.log")" || exit 1
ADMIN="$(cat "$WORK/data/admin.key")"
add_tenant() {
  curl -sf -XPOST -H "Authorization: Bearer $ADMIN" -d "{\"name\":\"$1\"}" "$URL/api/v1/tenants" |
    sed -n 's/.*"key":"\([^"]*\)".*/\1/p'
}
deploy_echo() {
  curl -sf -XPOST -H "Authorization: Bearer $1" --data-binary @- "$URL/api/v1/functions" \
    >/dev/null <<'SPEC'
{"name": "echo", "model_size": "1Mi", "gpu_memory": "8Mi", "exec_latency": "1ms", "slo": "60s",
 "max_batch": 1, "runtime": "echo", "timeout": "120s"}
SPEC
  for _ in $(seq 1 600); do
    [ "$(curl -s -o /dev/null -w '%{http_code}' -H "Authorization: Bearer $1" \
      "$URL/v2/models/echo/ready")" = 200 ] && return 0
    sleep 0.1
  done
  echo "echo did not become ready" >&2
  return 1
}
KEY_A="$(add_tenant alpha)"
KEY_B="$(add_tenant beta)"
deploy_echo "$KEY_A"
deploy_echo "$KEY_B"
echo "gshare serve at $URL (pid $SERVER); $(nproc) cores"
python3 - "$URL" "$SERVER" "$KEY_A" "$KEY_B" "$CLIENTS" "$BODY_MIB" "$WORK" <<'PY'
import http.client, json, os, socket, subprocess, sys, threading, time
url, server, key_a, key_b, clients, body_mib, work = sys.argv[1:]
server, clients, body_mib = int(server), int(clients), int(body_mib)
host, port = url.split("//")[1].split(":")
port = int(port)
body_bytes = body_mib << 20

def status_of(pid):
    fields = {}
    for line in open(f"/proc/{pid}/status"):
        name, _, value = line.partition(":")
        fields[name] = value.strip()
    return fields

def peak_kib(pid):
    return int(status_of(pid)["VmHWM"].split()[0])

def rss_kib(pid):
    return int(status_of(pid)["VmRSS"].split()[0])

# 1. Keyless bodies.
open(f"/proc/{server}/clear_refs", "w").write("5")
before = peak_kib(server)
chunk = b"[" * (1 << 20)
codes = []
lock = threading.Lock()
def keyless(i):
    expect = i % 2 == 0
    s = socket.create_connection((host, port))
    s.settimeout(60)
    head = (f"POST /v2/models/echo/infer HTTP/1.1\r\nHost: {host}\r\n"
            f"Content-Type: application/json\r\nContent-Length: {body_bytes}\r\n")
    if expect:
        head += "Expect: 100-continue\r\n"
    s.sendall((head + "\r\n").encode())
    def send_body():
        try:
            for _ in range(body_mib):
                s.sendall(chunk)
        except OSError:
            pass
    sender = None
    if not expect:
        sender = threading.Thread(target=send_body)
        sender.start()
    answer = b""
    try:
        while b"\r\n" not in answer:
            got = s.recv(4096)
            if not got:
                break
            answer += got
    except OSError:
        pass
    try:
        s.shutdown(socket.SHUT_RDWR)
    except OSError:
        pass
    if sender:
        sender.join()
    s.close()
    line = answer.split(b"\r\n", 1)[0].decode(errors="replace")
    with lock:
        codes.append((expect, line.split(" ")[1] if " " in line else "none"))
threads = [threading.Thread(target=keyless, args=(i,)) for i in range(clients)]
for t in threads: t.start()
for t in threads: t.join()
after = peak_kib(server)
summary = {}
for expect, code in codes:
    summary[(expect, code)] = summary.get((expect, code), 0) + 1
print(f"1. {clients} keyless {body_mib} MiB bodies: server peak RSS {before / 1024:.1f} -> "
      f"{after / 1024:.1f} MiB (+{(after - before) / 1024:.1f} MiB; target at most +64 MiB)")
for (expect, code), n in sorted(summary.items()):
    print(f"   {'with' if expect else 'without'} Expect: 100-continue: {n} answered {code}")

# 2. Another tenant's small calls during one tenant's large bodies.
def call(method, path, key=None, body=None):
    c = http.client.HTTPConnection(host, port, timeout=300)
    headers = {"Content-Type": "application/json"}
    if key:
        headers["Authorization"] = f"Bearer {key}"
    c.request(method, path, body=body, headers=headers)
    r = c.getresponse()
    data = r.read()
    c.close()
    return r.status, data

small = json.dumps({"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 1], "data": [0.5]}]})
def probe(seconds=None, count=None, stop=None):
    infer, live = [], []
    end = time.monotonic() + seconds if seconds else None
    while True:
        if stop is not None and stop.is_set():
            break
        if end is not None and time.monotonic() > end:
            break
        if count is not None and len(infer) >= count:
            break
        t = time.perf_counter()
        code, _ = call("POST", "/v2/models/echo/infer", key_b, small)
        infer.append((time.perf_counter() - t, code))
        t = time.perf_counter()
        code, _ = call("GET", "/v2/health/live")
        live.append((time.perf_counter() - t, code))
    return infer, live

def pct(values, p):
    values = sorted(values)
    return values[max(0, min(len(values) - 1, int(-(-p * len(values) // 100)) - 1))] * 1000

idle_infer, idle_live = probe(count=200)
# Four large bodies: numbers "0.5," repeated to about body_mib MiB.
elements = (body_bytes - 200) // 4
large = ('{"inputs":[{"name":"x","datatype":"FP32","shape":[1,%d],"data":[' % elements +
         "0.5," * (elements - 1) + '0.5]}]}').encode()
large_codes = []
def post_large():
    t = time.perf_counter()
    code, _ = call("POST", "/v2/models/echo/infer", key_a, large)
    large_codes.append((code, time.perf_counter() - t))
stop = threading.Event()
rss_peak = [rss_kib(server)]
def watch_rss():
    while not stop.is_set():
        rss_peak[0] = max(rss_peak[0], rss_kib(server))
        time.sleep(0.05)
watcher = threading.Thread(target=watch_rss)
watcher.start()
bigs = [threading.Thread(target=post_large) for _ in range(4)]
started = time.perf_counter()
for t in bigs: t.start()
results = {}
def busy_probe():
    results["busy"] = probe(stop=stop)
prober = threading.Thread(target=busy_probe)
prober.start()
for t in bigs: t.join()
large_seconds = time.perf_counter() - started
stop.set()
prober.join()
watcher.join()
busy_infer, busy_live = results["busy"]
def line(name, samples):
    times = [t for t, _ in samples]
    codes = sorted(set(c for _, c in samples))
    return (f"   {name}: {len(samples)} calls, status {codes}, p50 {pct(times, 50):.1f} ms, "
            f"p99 {pct(times, 99):.1f} ms, max {max(times) * 1000:.1f} ms")
print(f"2. four {len(large) / (1 << 20):.1f} MiB JSON bodies from tenant alpha "
      f"({elements} elements each): status {[c for c, _ in large_codes]}, all answered after "
      f"{large_seconds:.1f} s; server RSS peak {rss_peak[0] / 1024:.0f} MiB")
print(line("idle server, beta's one-element inference", idle_infer))
print(line("idle server, /v2/health/live", idle_live))
print(line("during alpha's bodies, beta's one-element inference", busy_infer))
print(line("during alpha's bodies, /v2/health/live", busy_live))
print("   target: both at most 50 ms at p99 during the bodies")
PY
# 3. Revocation through the command line.
ALPHA_UID="$(ps -eo uid,comm | awk '$2 ~ /gshare-functio/ {print $1}' | sort -n | head -1)"
BEFORE="$(date +%s%N)"
./build/gshare tenant remove alpha --data-dir "$WORK/data" >/dev/null
EXITED="$(date +%s%N)"
REFUSED=""
GONE=""
for _ in $(seq 1 2000); do
  NOW="$(date +%s%N)"
  if [ -z "$REFUSED" ] && [ "$(curl -s -o /dev/null -w '%{http_code}' \
    -H "Authorization: Bearer $KEY_A" "$URL/v2/models/echo/ready")" = 401 ]; then
    REFUSED=$(( (NOW - EXITED) / 1000000 ))
  fi
  if [ -z "$GONE" ] && [ -n "$ALPHA_UID" ] && ! ps -eo uid,comm | awk -v u="$ALPHA_UID" \
    '$1 == u && $2 ~ /gshare-functio/ {found=1} END {exit !found}'; then
    GONE=$(( (NOW - EXITED) / 1000000 ))
  fi
  [ -n "$REFUSED" ] && [ -n "$GONE" ] && break
  sleep 0.01
done
echo "3. gshare tenant remove alpha took $(( (EXITED - BEFORE) / 1000000 )) ms; after it exited," \
  "alpha's key was refused within ${REFUSED:-?} ms and its function process (uid ${ALPHA_UID:-?})" \
  "was gone within ${GONE:-?} ms (target: both within 2000 ms)"
[ "$(curl -s -o /dev/null -w '%{http_code}' -XPOST -H "Authorization: Bearer $KEY_B" \
  -d '{"inputs":[{"name":"x","datatype":"FP32","shape":[1,1],"data":[1]}]}' \
  "$URL/v2/models/echo/infer")" = 200 ] && echo "   beta is still served"
