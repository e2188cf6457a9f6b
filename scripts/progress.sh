# progress.sh, sourced by the test scripts: long work with its output in a log and a progress line
# on the screen every minute, so that a slow step on a busy machine is seen moving.
#
#   source scripts/progress.sh
#   logged LOG COMMAND...   runs COMMAND with stdout and stderr into LOG; every 60 s (or
#                           GSHARE_PROGRESS_S) prints "  ... N s: LAST LINE OF LOG"; returns
#                           COMMAND's exit status. On failure the caller shows the log's tail.

logged() {
  local log="$1"
  shift
  local every="${GSHARE_PROGRESS_S:-60}" begun=${SECONDS} next last pid rc
  "$@" >"${log}" 2>&1 &
  pid=$!
  next=$((SECONDS + every))
  while kill -0 "${pid}" 2>/dev/null; do
    sleep 1
    if [ "${SECONDS}" -ge "${next}" ] && kill -0 "${pid}" 2>/dev/null; then
      last="$(tail -n 1 "${log}" 2>/dev/null | cut -c1-150)"
      echo "  ... $((SECONDS - begun)) s: ${last}"
      next=$((SECONDS + every))
    fi
  done
  wait "${pid}"
  rc=$?
  return "${rc}"
}
