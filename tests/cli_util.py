"""What every end-to-end test script here shares: `check` prints one line per assertion (ok / FAIL and what was
checked) and counts it; `finish` prints the tally and exits non-zero if any check failed."""
import sys

_passes = []
_failures = []


def check(ok, what):
    print(("ok   " if ok else "FAIL ") + what)
    (_passes if ok else _failures).append(what)
    return ok


def finish():
    print("%d passed, %d failed" % (len(_passes), len(_failures)))
    sys.exit(1 if _failures else 0)
