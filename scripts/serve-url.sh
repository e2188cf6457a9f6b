# Sourced by the scripts that start `gshare serve` in the background (run.sh, bench-*.sh).
#
#   URL="$(serve_url "$SERVER" OUT_FILE LOG_FILE)"
#
# Waits (up to 60 s) for the server with pid SERVER to print `listening on URL` to OUT_FILE and
# prints the URL; when the server ends first or never listens, prints its log (LOG_FILE) to stderr
# and returns 1.
serve_url() {
  local server="$1" out="$2" log="$3" url=""
  for _ in $(seq 1 600); do
    url="$(sed -n 's/^listening on \(http:.*\)$/\1/p' "$out")"
    if [ -n "$url" ]; then
      echo "$url"
      return 0
    fi
    if ! kill -0 "$server" 2>/dev/null; then
      echo "gshare serve did not start:" >&2
      cat "$log" >&2
      return 1
    fi
    sleep 0.1
  done
  echo "gshare serve did not listen within 60 s" >&2
  return 1
}
