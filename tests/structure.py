#!/usr/bin/env python3
"""scripts/check_structure.py passes on this tree and fails on a small one that breaks each of its rules: an include
of a later layer, a function over 80 lines, a listed function that grew, and a listed one that is gone.
Usage: structure.py ROOT"""
import os
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from cli_util import check, finish  # noqa: E402

root = sys.argv[1]
script = os.path.join(root, "scripts", "check_structure.py")


def run(tree):
    return subprocess.run([sys.executable, script, tree], capture_output=True, text=True)


r = run(root)
check(r.returncode == 0, "this tree keeps both rules: " + r.stdout[-400:])


def body(n):
    return "int f(int x) {\n" + "".join("  x += %d;\n" % i for i in range(n)) + "  return x;\n}\n"


with tempfile.TemporaryDirectory() as tmp:
    os.makedirs(os.path.join(tmp, "tensor"))
    os.makedirs(os.path.join(tmp, "scripts"))
    with open(os.path.join(tmp, "tensor", "a.cpp"), "w") as f:
        f.write('#include "experiments/x.h"\n#include "tensor/b.h"\n\n' + body(85))
    r = run(tmp)
    check(r.returncode == 1 and "tensor/a.cpp:1: layer 'tensor' includes 'experiments/'" in r.stdout
          and "tensor/b.h" not in r.stdout, "an include of a later layer is named, one of the same layer is not")
    check("tensor/a.cpp:4: f has 86 lines (limit 80)" in r.stdout, "a long function is named with its length")
    listing = os.path.join(tmp, "scripts", "long_functions.txt")
    with open(os.path.join(tmp, "tensor", "a.cpp"), "w") as f:
        f.write(body(85))
    with open(listing, "w") as f:
        f.write("tensor/a.cpp:f 90 a table\n")
    check(run(tmp).returncode == 0, "a function listed with its reason passes")
    with open(listing, "w") as f:
        f.write("tensor/a.cpp:f 82 a table\n")
    r = run(tmp)
    check(r.returncode == 1 and "grew to 86 lines (listed at 82)" in r.stdout, "a listed function that grew fails")
    with open(listing, "w") as f:
        f.write("tensor/a.cpp:f 90 a table\ntensor/gone.cpp:g 100 old\n")
    r = run(tmp)
    check(r.returncode == 1 and "tensor/gone.cpp:g is no longer over 80 lines" in r.stdout, "a stale entry fails")
finish()
