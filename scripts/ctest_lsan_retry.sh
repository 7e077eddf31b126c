#!/usr/bin/env bash
# ctest under LeakSanitizer, with one retry for LeakSanitizer's own crash.
#
#   scripts/ctest_lsan_retry.sh BUILD_DIR [ctest arguments...]
#
# LeakSanitizer stops every thread at exit and reads their stacks; when a thread a library
# started (NVRTC's, libgomp's) is tearing itself down at that moment, the tracer itself can
# fault ("Tracer caught signal 11" then "LeakSanitizer has encountered a fatal error"), after the
# test has passed and before any leak was looked for. That is not a finding of the test, so the
# tests that failed run once more -- only when every failure's output shows that crash. A real
# failure (an assertion, a sanitizer report, a leak) fails the run at once, and a test whose
# rerun fails again fails it too.
set -uo pipefail
dir=$1
shift
ctest --test-dir "$dir" --output-on-failure "$@"
rc=$?
[ $rc -eq 0 ] && exit 0
log=$dir/Testing/Temporary/LastTest.log
failed=$dir/Testing/Temporary/LastTestsFailed.log
[ -f "$log" ] && [ -f "$failed" ] || exit $rc
# Every failed test's output in LastTest.log must carry the tracer's crash.
python3 - "$log" "$failed" <<'PY' || exit $rc
import re, sys
log = open(sys.argv[1], errors="replace").read()
names = [l.split(":", 1)[1].strip() for l in open(sys.argv[2]) if ":" in l]
if not names:
    sys.exit(1)
# LastTest.log holds one block per test: a line "N/M Testing: NAME", its output, then
# "Test Failed." or "Test Passed.".
blocks = re.split(r"^\d+/\d+ Testing: ", log, flags=re.M)[1:]
out = {b.split("\n", 1)[0].strip(): b for b in blocks}
for n in names:
    b = out.get(n, "")
    if "LeakSanitizer has encountered a fatal error" not in b or "Tracer caught signal" not in b:
        sys.exit(1)
print("ctest_lsan_retry: LeakSanitizer's tracer crashed at exit in: " + ", ".join(names) +
      "; running them once more")
PY
ctest --test-dir "$dir" --output-on-failure --rerun-failed "$@"
