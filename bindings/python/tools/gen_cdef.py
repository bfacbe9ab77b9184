#!/usr/bin/env python3
"""Derives the cffi declarations of the thin layer from include/cairn.h.

cffi's ``cdef`` takes C declarations without preprocessor conditionals, includes or
comments. This script reads the generated header, keeps the branch a C11 compiler sees,
keeps ``#define NAME <integer>`` constants, drops comments and everything else the
preprocessor would consume, and writes ``src/cairn/_cdef.h``.

    python3 tools/gen_cdef.py          # rewrite src/cairn/_cdef.h
    python3 tools/gen_cdef.py --check  # exit 1 when it is out of date

A conditional it does not understand is an error, so a new construct in the header is
noticed here rather than miscompiled by cffi.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
PACKAGE_ROOT = HERE.parent
HEADER = PACKAGE_ROOT.parent.parent / "include" / "cairn.h"
OUTPUT = PACKAGE_ROOT / "src" / "cairn" / "_cdef.h"

BANNER = (
    "/* Derived from include/cairn.h by bindings/python/tools/gen_cdef.py. Do not edit:\n"
    "   run `python3 bindings/python/tools/gen_cdef.py` after the header changes. */\n"
)

# What a C11 compiler, not a C++ one, sees.
_C11 = {"__cplusplus": None, "__STDC_VERSION__": 201112}


def _eval_condition(cond: str, defined: dict[str, object]) -> bool:
    """Evaluates an `#if` expression over the few macros the header tests."""
    expr = cond

    def repl_defined(m: re.Match[str]) -> str:
        return "True" if defined.get(m.group(1)) is not None else "False"

    expr = re.sub(r"defined\s*\(\s*(\w+)\s*\)", repl_defined, expr)
    expr = re.sub(r"(\d+)[LlUu]+\b", r"\1", expr)
    expr = expr.replace("||", " or ").replace("&&", " and ")
    expr = re.sub(r"!(?!=)", " not ", expr)

    def repl_name(m: re.Match[str]) -> str:
        name = m.group(0)
        if name in ("True", "False", "and", "or", "not"):
            return name
        if name not in defined:
            raise ValueError(f"unknown macro {name!r} in #if {cond}")
        value = defined[name]
        return "0" if value is None else str(value)

    expr = re.sub(r"[A-Za-z_]\w*", repl_name, expr)
    if not re.fullmatch(r"[\s\w()<>=!+\-*]*", expr):
        raise ValueError(f"cannot evaluate #if {cond}")
    return bool(eval(expr, {"__builtins__": {}}, {}))  # noqa: S307 - a checked expression


def _strip_comments(text: str) -> str:
    text = re.sub(r"/\*.*?\*/", "", text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def derive(header: str) -> str:
    """Returns the cdef text for the header's source."""
    defined: dict[str, object] = dict(_C11)
    out: list[str] = []
    # A stack of (this branch is taken, some branch was taken, the enclosing one is active).
    stack: list[tuple[bool, bool, bool]] = []

    def active() -> bool:
        return all(s[0] and s[2] for s in stack) if stack else True

    for raw in _strip_comments(header).splitlines():
        line = raw.strip()
        if not line.startswith("#"):
            if active() and line:
                out.append(raw.rstrip())
            continue
        directive, _, rest = line[1:].strip().partition(" ")
        rest = rest.strip()
        if directive in ("if", "ifdef", "ifndef"):
            outer = active()
            if directive == "if":
                taken = _eval_condition(rest, defined)
            elif directive == "ifdef":
                taken = defined.get(rest) is not None
            else:
                taken = defined.get(rest) is None
            stack.append((taken, taken, outer))
        elif directive == "elif":
            _, any_taken, outer = stack.pop()
            taken = not any_taken and _eval_condition(rest, defined)
            stack.append((taken, any_taken or taken, outer))
        elif directive == "else":
            _, any_taken, outer = stack.pop()
            stack.append((not any_taken, True, outer))
        elif directive == "endif":
            stack.pop()
        elif directive == "define":
            if not active():
                continue
            name, _, value = rest.partition(" ")
            value = value.strip()
            defined[name] = value or 1
            if re.fullmatch(r"\d+", value):
                out.append(f"#define {name} {value}")
        elif directive == "include":
            continue
        else:
            raise ValueError(f"unsupported directive #{directive}")
    if stack:
        raise ValueError("unbalanced #if/#endif in the header")
    # Collapse runs of blank lines (comments left them) for a readable file.
    text = "\n".join(out)
    return BANNER + "\n" + re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def main(argv: list[str]) -> int:
    header_path = HEADER
    text = derive(header_path.read_text())
    if "--check" in argv:
        current = OUTPUT.read_text() if OUTPUT.exists() else ""
        if current != text:
            print(f"{OUTPUT} is out of date with {header_path}: run {Path(__file__).name}", file=sys.stderr)
            return 1
        return 0
    OUTPUT.write_text(text)
    print(f"wrote {OUTPUT}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
