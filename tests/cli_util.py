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


# Keys that hold wall-clock times or the command line: two runs that must agree may differ in these alone.
TIMING = ("seconds", "seconds_per_token", "train_seconds", "command", "wall_seconds")


def same(x, y, path="", drop=TIMING):
    """"" when two parsed JSON values are equal but for the keys in drop, else where they first differ."""
    if isinstance(x, dict) and isinstance(y, dict):
        if x.keys() != y.keys():
            return path + ": keys " + str(sorted(set(x) ^ set(y)))
        return next((w for k in x if k not in drop for w in [same(x[k], y[k], path + "/" + k, drop)] if w), "")
    if isinstance(x, list) and isinstance(y, list):
        if len(x) != len(y):
            return path + ": lengths %d, %d" % (len(x), len(y))
        return next((w for i, (u, v) in enumerate(zip(x, y)) for w in [same(u, v, path + "/%d" % i, drop)] if w), "")
    return "" if x == y else path + ": %r vs %r" % (x, y)
