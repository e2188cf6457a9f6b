# shell_test.sh: what the shell-driven end-to-end tests share, sourced by each. Every check
# counts as passed or failed; a failed one says which check it was (its name and the test's line)
# and shows what the command printed, so that a failure on a loaded CI machine can be read from
# the log alone.
#
#   source "$(dirname "$0")/shell_test.sh"   # makes $work, a scratch folder removed at exit
#   run NAME COMMAND...        COMMAND exits 0. Its stdout goes to $work/NAME.stdout, its stderr
#                              to $work/NAME.stderr. Returns COMMAND's exit status.
#   expect NAME CODE PATTERN COMMAND...
#                              COMMAND exits CODE and its stdout or stderr has a line matching
#                              the basic regular expression PATTERN (grep's; empty: any output).
#                              Output files as for run.
#   check NAME COMMAND...      COMMAND (a test, a python3 check of a report) exits 0; on failure
#                              its own output is shown, then the last run's or expect's.
#   finish                     prints "N passed, M failed"; returns 0 when none failed.
# No check waits on time: each runs its command to its end.

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
passed=0
failed=0
_last_name=""

# _show FILE TITLE: the last 60 lines of FILE, indented, when it has any.
_show() {
  [ -s "$1" ] || return 0
  echo "  $2 ($(wc -l <"$1") lines; the last 60):"
  tail -n 60 "$1" | sed 's/^/  | /'
}

# _failed NAME WHY: counts a failure and prints its header, with the line of the test script
# whose call led here (the outermost call, through any helper of the test's own).
_failed() {
  failed=$((failed + 1))
  echo "FAIL $1 (line ${BASH_LINENO[$((${#BASH_LINENO[@]} - 2))]}): $2"
}

# _show_last: the command, exit status and output of the last run or expect.
_show_last() {
  [ -n "${_last_name}" ] || return 0
  echo "  the last command ($_last_name): ${_last_command}"
  echo "  it exited ${_last_rc}"
  _show "$work/${_last_name}.stdout" "its stdout"
  _show "$work/${_last_name}.stderr" "its stderr"
}

# _record NAME COMMAND...: runs COMMAND with its output in $work/NAME.{stdout,stderr}.
_record() {
  _last_name="$1"
  shift
  _last_command="$*"
  "$@" >"$work/${_last_name}.stdout" 2>"$work/${_last_name}.stderr"
  _last_rc=$?
}

run() {
  local name="$1"
  shift
  _record "$name" "$@"
  if [ "${_last_rc}" -eq 0 ]; then
    passed=$((passed + 1))
  else
    _failed "$name" "exit ${_last_rc}, want 0"
    _show_last
  fi
  return "${_last_rc}"
}

expect() {
  local name="$1" code="$2" pattern="$3"
  shift 3
  _record "$name" "$@"
  local why=""
  if [ "${_last_rc}" -ne "$code" ]; then
    why="exit ${_last_rc}, want $code"
  elif [ -n "$pattern" ] &&
    ! cat "$work/$name.stdout" "$work/$name.stderr" | grep -q -- "$pattern"; then
    why="no line of its output matches /$pattern/"
  fi
  if [ -z "$why" ]; then
    passed=$((passed + 1))
    return 0
  fi
  _failed "$name" "$why"
  _show_last
  return 1
}

check() {
  local name="$1" out
  shift
  out="$(mktemp "$work/check.XXXXXX")"
  "$@" >"$out" 2>&1
  local rc=$?
  if [ "$rc" -eq 0 ]; then
    passed=$((passed + 1))
    rm -f "$out"
    return 0
  fi
  _failed "$name" "the check exited $rc: $*"
  _show "$out" "the check's output"
  rm -f "$out"
  _show_last
  return 1
}

finish() {
  echo "$passed passed, $failed failed"
  [ "$failed" -eq 0 ]
}
