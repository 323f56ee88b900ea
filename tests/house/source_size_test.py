"""The tree stays readable: no source file over MAX_FILE lines and no
function over MAX_FUNCTION lines outside tests (docs/DESIGN.md "Naming and
style"), except the few listed in EXCEPTIONS with the reason they are long.

A function is a definition that opens at the start of a line (namespace
scope, or a class member indented by two) with a parameter list and ends at
its matching brace; brace matching skips strings, characters and comments.

usage: source_size_test.py SOURCE_ROOT"""

import os
import re
import sys

MAX_FILE = 800
MAX_FUNCTION = 120
DIRS = ["src", "apps", "pktgen", "cc", "include"]

# path or path:function -> why it may be longer.
EXCEPTIONS = {
    "src/verbs/provider.cc": "libibverbs' ops table: one small entry point per verb, "
                             "kept together so the provider reads as the verbs API does",
    "pktgen/schedule.cc:build_halving_doubling":
        "one algorithm (recursive halving and doubling with the fold-in and fold-out of "
        "non-power-of-two ranks, Thakur, Rabenseifner and Gropp 2005) whose four phases "
        "update the same block ranges; apart, they would pass six vectors between them",
}

SIGNATURE = re.compile(r"^(?:  )?[A-Za-z_][\w:<>,\*&\s~\[\]]*?\b([\w:~]+)\s*\([^;]*$")
NOT_FUNCTION = {"if", "for", "while", "switch", "catch", "return", "namespace", "struct",
                "class", "enum", "union"}


def strip_code(text):
    """The text with strings, characters and comments blanked (lines kept)."""
    out, i, n = [], 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif text.startswith('R"', i):
            m = re.match(r'R"([^(]*)\(', text[i:])
            end = text.find(")" + m.group(1) + '"', i) if m else -1
            j = n if end < 0 else end + len(m.group(1)) + 2
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and i > 0 and text[i - 1].isalnum():
            out.append(c)  # a digit separator (1'000), not a character
            i += 1
        elif c in "\"'":
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            out.append(c + " " * (j - i - 1) + c)
            i = j + 1
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(text):
    """(name, first line, length in lines) of each function definition."""
    code = strip_code(text)
    lines = code.split("\n")
    found = []
    i = 0
    while i < len(lines):
        m = SIGNATURE.match(lines[i])
        if not m or m.group(1).split("::")[-1] in NOT_FUNCTION or lines[i].startswith("  }"):
            i += 1
            continue
        # The body opens on this line or within the next few (a signature
        # over several lines); a ';' first means a declaration.
        j, opened = i, False
        while j < len(lines) and j < i + 8:
            if ";" in lines[j] and "{" not in lines[j]:
                break
            if "{" in lines[j]:
                opened = True
                break
            j += 1
        if not opened:
            i += 1
            continue
        depth, k = 0, j
        while k < len(lines):
            depth += lines[k].count("{") - lines[k].count("}")
            if depth <= 0 and k >= j:
                break
            k += 1
        found.append((m.group(1), i + 1, k - i + 1))
        i = k + 1
    return found


def main():
    root = sys.argv[1]
    problems = []
    checked = 0
    for d in DIRS:
        for dirpath, _, files in os.walk(os.path.join(root, d)):
            for f in sorted(files):
                if not f.endswith((".cc", ".h")):
                    continue
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, root)
                text = open(path, encoding="utf-8").read()
                checked += 1
                n = text.count("\n")
                if n > MAX_FILE and rel not in EXCEPTIONS:
                    problems.append(f"{rel}: {n} lines (at most {MAX_FILE})")
                for name, line, length in functions(text):
                    if length > MAX_FUNCTION and f"{rel}:{name}" not in EXCEPTIONS:
                        problems.append(f"{rel}:{line}: {name} is {length} lines "
                                        f"(at most {MAX_FUNCTION})")
    for p in problems:
        print(f"FAIL {p}")
    # The scanner itself must see functions, or the test could not fail.
    sample = "int f(int a) {\n  if (a) {\n    return 1'000;\n  }\n  return '}';\n}\n"
    assert functions(sample) == [("f", 1, 6)], functions(sample)
    print(f"{checked} files checked, {len(problems)} over the limits")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
