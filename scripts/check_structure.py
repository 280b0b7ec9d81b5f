#!/usr/bin/env python3
"""Two structural rules of the source tree, checked in CI (meson test `structure`):

1. Includes follow the layer order: a file in one layer includes project headers only from its own layer and the
   layers before it (LAYERS below: the engine's folders, then the experiments' folders, process < study < model <
   codebench < bench < cli); tests/ and bench/ may include anything. A source file directly in experiments/ (in no
   layer folder) fails.
2. Functions stay short: a function body longer than LIMIT lines fails, unless scripts/long_functions.txt names it
   with the reason (tables, kernels written out for speed); a listed function that grew past its listed length, or
   that no longer exists, fails too, so the list only shrinks. C++ (.cpp, .h, .cu, .cuh) functions count at
   namespace scope and inside class bodies (methods defined in the class); Python functions and methods count in
   tests/ and scripts/.

Usage: scripts/check_structure.py [ROOT]   (exit 1 with one line per violation)
"""
import ast
import os
import re
import sys

LAYERS = ["util", "tensor", "stats", "data", "autograd", "ttt", "policy", "rl", "methods", "experiments/process",
          "experiments/study", "experiments/model", "experiments/codebench", "experiments/bench", "experiments/cli"]
LIMIT = 80
SOURCE = (".cpp", ".h", ".cu", ".cuh")
INCLUDE = re.compile(r'^\s*#\s*include\s+"([a-z_]+(?:/[a-z_]+)?)/')
# A definition: a return type and a name, then "(" (a constructor: just the name); its body opens with "{" on that
# line or a later one, before any ";".
START = re.compile(r"^\s*(?:template\s*<.*>\s*)?[A-Za-z_][\w:<>,\s\*&~]*?\b([A-Za-z_~][\w:~]*(?:operator\S*)?)\s*\(")
NOT_A_FUNCTION = ("if", "for", "while", "switch", "return", "catch", "sizeof", "decltype", "static_assert", "alignas")
SCOPE = re.compile(r"^\s*(?:template\s*<.*>\s*)?(namespace|struct|class|union|enum|extern\s+\"C\")\b")


def layer_of(rel):
    """The layer a path relative to the root belongs to (the longest matching folder), or None."""
    best = None
    for layer in LAYERS + ["tests", "bench", "scripts", "experiments"]:
        if rel == layer or rel.startswith(layer + "/"):
            best = layer if best is None or len(layer) > len(best) else best
    return best


def source_files(root, suffixes=SOURCE):
    for top in ["util", "tensor", "data", "autograd", "ttt", "policy", "rl", "methods", "stats", "experiments", "tests", "bench",
                "scripts"]:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if d not in ("external", "__pycache__"))
            for f in sorted(filenames):
                if f.endswith(suffixes):
                    path = os.path.join(dirpath, f)
                    yield layer_of(os.path.relpath(path, root)), path


def include_violations(root):
    out = []
    for layer, path in source_files(root):
        rel = os.path.relpath(path, root)
        if layer == "experiments":
            out.append(f"{rel}: a source file directly in experiments/: put it in the layer folder it belongs to "
                       f"({', '.join(l for l in LAYERS if l.startswith('experiments/'))})")
            continue
        if layer not in LAYERS:
            continue
        rank = LAYERS.index(layer)
        with open(path, encoding="utf-8", errors="replace") as fh:
            for n, line in enumerate(fh, 1):
                m = INCLUDE.match(line)
                if not m:
                    continue
                target = layer_of(m.group(1) + "/x")
                # experiments/x.h (in no layer folder) sits at least as high as the experiments' first layer
                level = LAYERS.index("experiments/process") if target == "experiments" else \
                    LAYERS.index(target) if target in LAYERS else -1
                if level > rank:
                    out.append(f"{rel}:{n}: layer '{layer}' includes '{target}/', a later layer "
                               f"({' < '.join(LAYERS)})")
    return out


def stripped(text):
    """The source with comments and the insides of string, raw-string and character literals blanked out (newlines
    kept, so that line numbers hold): what is left is code, whose braces and parentheses can be counted."""
    out, i, n = [], 0, len(text)
    while i < n:
        ch = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            i = n if j < 0 else j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append("\n" * text.count("\n", i, j))
            i = j
        elif ch == "R" and text.startswith('"', i + 1) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            open_paren = text.find("(", i + 2)
            delim = ")" + text[i + 2:open_paren] + '"'
            j = text.find(delim, open_paren)
            j = n if j < 0 else j + len(delim)
            out.append('""' + "\n" * text.count("\n", i, j))
            i = j
        elif ch in "\"'" and not (ch == "'" and i > 0 and text[i - 1].isalnum()):  # 1'000: a digit separator
            j = i + 1
            while j < n and text[j] != ch and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            out.append(ch + ch)
            i = j + 1
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def functions(path):
    """(name, first line, body lines) of each function defined at namespace scope or in a class body. The body's
    lines are those strictly between the line that opens it and the line that closes it."""
    with open(path, encoding="utf-8", errors="replace") as fh:
        lines = [l.rstrip() for l in stripped(fh.read()).split("\n")]
    found, stack, pending, head, parens = [], [], None, None, 0  # stack: (kind, name, first line, opening line)
    for n, line in enumerate(lines):
        outer = not stack or stack[-1][0] in ("namespace", "class")
        if outer and pending is None and not line.lstrip().startswith("#"):
            s = SCOPE.match(line)
            m = START.match(line)
            if s:
                pending = "class" if s.group(1) in ("struct", "class", "union") else \
                    "other" if s.group(1) == "enum" else "namespace"
            elif m and m.group(1) not in NOT_A_FUNCTION and not line.lstrip().startswith(("using", "typedef")):
                pending, head, parens = "function", (m.group(1), n), 0
        for ch in line:
            if ch in "()":
                parens += 1 if ch == "(" else -1
            elif ch == "{" and pending == "function" and parens > 0:
                stack.append(("other", "", n, n))  # a braced default argument, or a lambda's, in the parameter list
            elif ch == "{":
                kind = pending or "other"
                name, first = head if kind == "function" else ("", n)
                stack.append((kind, name, first, n))
                pending = None
            elif ch == "}" and stack:
                kind, name, first, opened = stack.pop()
                if kind == "function":
                    found.append((name, first + 1, max(n - opened - 1, 0)))
            elif ch == ";" and pending is not None and parens == 0:
                pending = None  # a declaration, not a definition
    return found


def python_functions(path):
    with open(path, encoding="utf-8", errors="replace") as fh:
        try:
            tree = ast.parse(fh.read())
        except SyntaxError as e:
            return [("<syntax error: %s>" % e.msg, e.lineno or 1, 0)]
    return [(node.name, node.lineno, node.end_lineno - node.lineno) for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))]


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


def every_function(root):
    for _, path in source_files(root):
        for f in functions(path):
            yield path, f
    for _, path in source_files(root, (".py",)):
        for f in python_functions(path):
            yield path, f


def length_violations(root):
    out, seen, allow = [], set(), allowed(root)
    for path, (name, first, body) in every_function(root):
        rel = os.path.relpath(path, root)
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
