#!/usr/bin/env python3
"""scripts/check_structure.py passes on this tree and fails on a small one that breaks each of its rules: an include
of a later layer (among the engine's and among the experiments' folders), a source in no layer folder, a function over
80 lines (in a .cpp, a .cuh, a class body, a Python file), a listed function that grew, and a listed one that is
gone.
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
    os.remove(listing)
    os.remove(os.path.join(tmp, "tensor", "a.cpp"))
    # The experiments' own layers, a source outside them, a .cuh, a method in a class body, a Python function.
    for d in ("experiments/study", "experiments/cli", "scripts"):
        os.makedirs(os.path.join(tmp, d), exist_ok=True)
    with open(os.path.join(tmp, "experiments", "study", "s.cpp"), "w") as f:
        f.write('#include "experiments/cli/commands.h"\n#include "experiments/study/t.h"\n#include "stats/x.h"\n')
    with open(os.path.join(tmp, "experiments", "loose.cpp"), "w") as f:
        f.write("int x;\n")
    with open(os.path.join(tmp, "tensor", "k.cuh"), "w") as f:
        f.write(body(85).replace("int f(", "int kern("))
    with open(os.path.join(tmp, "tensor", "c.h"), "w") as f:
        f.write("struct S {\n  const char* s = \"{\";\n  int method(int x, int y = {}) {\n" +
                "".join("    x += %d;\n" % i for i in range(85)) + "    return x;\n  }\n  int short_one() { return 1; }\n};\n")
    with open(os.path.join(tmp, "scripts", "p.py"), "w") as f:
        f.write("def long_py(x):\n" + "".join("    x += %d\n" % i for i in range(85)) + "    return x\n")
    r = run(tmp)
    check("experiments/study/s.cpp:1: layer 'experiments/study' includes 'experiments/cli/'" in r.stdout and
          "s.cpp:2" not in r.stdout and "s.cpp:3" not in r.stdout,
          "an include up the experiments' layers is named, one of its own layer or the engine's is not")
    check("experiments/loose.cpp: a source file directly in experiments/" in r.stdout,
          "a source outside the experiments' layer folders is named")
    check("tensor/k.cuh:1: kern has 86 lines" in r.stdout, "a long function in a .cuh is named")
    check("tensor/c.h:3: method has 86 lines" in r.stdout and "short_one" not in r.stdout,
          "a long method defined in a class body is named (a brace in a string or a default argument is not code)")
    check("scripts/p.py:1: long_py has 86 lines" in r.stdout, "a long Python function is named")
finish()
