"""What every end-to-end test script here shares: `check` prints one line per assertion (ok / FAIL and what was
checked) and counts it; `finish` prints the tally and exits non-zero if any check failed."""
import subprocess
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


def runner(ponder, timeout=600):
    """A function running `ponder ARGS...` that checks it exits 0 (unless ok=False) and returns the process."""
    def run(*args, ok=True):
        r = subprocess.run([ponder, *args], capture_output=True, text=True, timeout=timeout)
        if ok:
            check(r.returncode == 0, "ponder " + " ".join(args[:2]) + " exits 0: " + r.stderr[-1500:])
        return r
    return run
