#!/usr/bin/env python3
"""Two structural rules of the source tree, checked in CI (meson test `structure`):

1. Includes follow the layer order: a file in one layer includes project headers only from its own layer and the
   layers before it (util, tensor, data, autograd, ttt, policy, rl, stats, experiments); tests/ and bench/ may
   include anything.
2. Functions stay short: a function body longer than LIMIT lines fails, unless scripts/long_functions.txt names it
   with the reason (tables, kernels written out for speed); a listed function that grew past its listed length, or
   that no longer exists, fails too, so the list only shrinks.

Usage: scripts/check_structure.py [ROOT]   (exit 1 with one line per violation)
"""
import os
import re
import sys

LAYERS = ["util", "tensor", "data", "autograd", "ttt", "policy", "rl", "stats", "experiments"]
LIMIT = 80
SOURCE = (".cpp", ".h", ".cu")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+)/')
# A definition starts at column 0 (namespaces are not indented here) and opens its body on that line or a
# later one; a line of only "}" at column 0 closes it.
START = re.compile(r"^(?:template\s*<.*>\s*)?[A-Za-z_][\w:<>,\s\*&~]*?\b([A-Za-z_~][\w:~]*(?:operator\S*)?)\s*\(")


def source_files(root):
    for layer in LAYERS + ["tests", "bench"]:
        top = os.path.join(root, layer)
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if d not in ("external", "__pycache__")]
            for f in sorted(filenames):
                if f.endswith(SOURCE):
                    yield layer, os.path.join(dirpath, f)


def include_violations(root):
    out = []
    for layer, path in source_files(root):
        if layer not in LAYERS:
            continue
        rank = LAYERS.index(layer)
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if m and m.group(1) in LAYERS and LAYERS.index(m.group(1)) > rank:
                    out.append(f"{os.path.relpath(path, root)}:{n}: layer '{layer}' includes '{m.group(1)}/', "
                               f"a later layer ({' < '.join(LAYERS)})")
    return out


def code(line):
    """The line without its // comment and trailing space."""
    return line.split("//", 1)[0].rstrip()


def functions(path):
    """(name, first line, body lines) of each function defined at column 0."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = fh.read().split("\n")
    found, i = [], 0
    while i < len(lines):
        m = START.match(lines[i])
        if not m or lines[i].startswith(("namespace", "struct", "class", "enum", "union", "#", "//", "using")):
            i += 1
            continue
        j = i  # the line that opens the body: it ends with "{"; a ";" or "}" first means no body here
        while j < len(lines) and not code(lines[j]).endswith(("{", ";", "}")):
            j += 1
        if j >= len(lines) or not code(lines[j]).endswith("{"):
            i = j + 1
            continue
        k = j + 1
        while k < len(lines) and not (lines[k] == "}" or lines[k].startswith(("}  //", "};"))):
            k += 1
        found.append((m.group(1), i + 1, k - j - 1))
        i = k + 1
    return found


def allowed(root):
    """name in 'file:function' → (listed length, reason)."""
    out = {}
    path = os.path.join(root, "scripts", "long_functions.txt")
    if not os.path.exists(path):
        return out
    with open(path, encoding="utf-8") as fh:
        for n, line in enumerate(fh, 1):
            line = line.strip()
            if not line or line.startswith("#"):
                continue
            key, length, reason = (line.split(None, 2) + ["", ""])[:3]
            if not length.isdigit() or not reason:
                sys.exit(f"scripts/long_functions.txt:{n}: expected 'FILE:FUNCTION LINES REASON', got '{line}'")
            out[key] = (int(length), reason)
    return out


def length_violations(root):
    out, seen, allow = [], set(), allowed(root)
    for _, path in source_files(root):
        rel = os.path.relpath(path, root)
        for name, first, body in functions(path):
            key = f"{rel}:{name}"
            if body <= LIMIT:
                continue
            seen.add(key)
            if key not in allow:
                out.append(f"{rel}:{first}: {name} has {body} lines (limit {LIMIT}): split it, or list it in "
                           f"scripts/long_functions.txt with the reason")
            elif body > allow[key][0]:
                out.append(f"{rel}:{first}: {name} grew to {body} lines (listed at {allow[key][0]})")
    for key in sorted(set(allow) - seen):
        out.append(f"scripts/long_functions.txt: {key} is no longer over {LIMIT} lines (or gone): drop its line")
    return out


def main():
    root = sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
    bad = include_violations(root) + length_violations(root)
    for line in bad:
        print(line)
    if bad:
        sys.exit(1)
    print("structure: includes follow the layer order; every function is within "
          f"{LIMIT} lines or listed with its reason")


if __name__ == "__main__":
    main()
