#!/usr/bin/env bash
# Prints the Debian packages that hold the shared libraries the given programs load, one a line,
# sorted. The Dockerfile's build stage runs it on `gshare` and `gshare-function` so that the runtime
# stage installs exactly those packages, whichever optional parts (CBC, CUDA) the build has.
#
#   scripts/runtime-packages.sh PROGRAM...
#
# Exit status: 0, or 1 when a library is missing or belongs to no installed package.
set -euo pipefail

if [ $# -eq 0 ]; then
  echo "usage: $0 PROGRAM..." >&2
  exit 2
fi

# The package that owns FILE, trying the path ldd printed, the file it links to (Debian's
# alternatives, such as libopenblas.so.0, are links outside any package) and, on a merged /usr,
# the same path with and without the /usr prefix.
owner() {
  local file="$1" real candidates=() c pkg
  real="$(readlink -f "$file")"
  candidates=("$file" "$real")
  for c in "$file" "$real"; do
    case "$c" in
      /usr/*) candidates+=("${c#/usr}") ;;
      /*) candidates+=("/usr${c}") ;;
    esac
  done
  for c in "${candidates[@]}"; do
    if pkg="$(dpkg-query -S "$c" 2>/dev/null)"; then
      # "libfoo1:amd64: /usr/lib/..." -> "libfoo1"; diversions are not packages.
      pkg="$(printf '%s\n' "$pkg" | grep -v '^diversion by' | head -n1 | cut -d: -f1)"
      if [ -n "$pkg" ]; then
        printf '%s\n' "$pkg"
        return 0
      fi
    fi
  done
  return 1
}

status=0
packages=()
for program in "$@"; do
  if ! out="$(ldd "$program" 2>&1)"; then
    echo "runtime-packages: ldd failed on ${program}: ${out}" >&2
    exit 1
  fi
  while read -r line; do
    case "$line" in
      *"=> not found"*)
        echo "runtime-packages: ${program}: ${line}" >&2
        status=1
        continue
        ;;
      *"=> /"*) lib="$(printf '%s\n' "$line" | sed -E 's/.*=> (\/[^ ]+).*/\1/')" ;;
      /*) lib="${line%% *}" ;;  # the dynamic loader: /lib64/ld-linux-x86-64.so.2 (0x...)
      *) continue ;;            # linux-vdso.so.1, which is no file
    esac
    if pkg="$(owner "$lib")"; then
      packages+=("$pkg")
    else
      echo "runtime-packages: ${program}: ${lib} belongs to no installed package" >&2
      status=1
    fi
  done <<<"$out"
done

printf '%s\n' "${packages[@]}" | sort -u
exit "$status"
