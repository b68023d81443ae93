#!/usr/bin/env python3
"""Man page source (scdoc) from a template and a program's --help.

    gen-man.py TEMPLATE OUTPUT.scd [PROGRAM [ARG...]]

The program's --help is the one source of its options: the man page shows
it as it is, so the two cannot disagree. In TEMPLATE, @HELP@ (a line of
its own) becomes PROGRAM ARG... --help's output: where that output is laid
out as a manual (headings in capitals at the start of a line, cuslice
--help), each heading becomes a scdoc section and its body a literal block;
otherwise (cusliced --help: "usage:" and options) the whole output is one
literal block. @VERSION@ becomes $CUSLICE_VERSION. Without PROGRAM the
template is copied with @VERSION@ replaced (libcuslice(7), cusim(7)).
"""
import os
import re
import subprocess
import sys
import textwrap


def literal(lines):
    # scdoc needs no escaping inside a literal block; trailing blanks go.
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    # The page indents a block itself: the help's own margin goes.
    lines = textwrap.dedent("\n".join(lines)).split("\n")
    return ["```"] + [l.rstrip() for l in lines] + ["```"] if lines else []


def convert(text):
    lines = text.splitlines()
    heading = re.compile(r"^[A-Z][A-Z ]+$")
    if not any(heading.match(l) for l in lines):
        return literal(lines)
    out, body, title = [], [], None
    for l in lines:
        if heading.match(l):
            if title:
                out += ["# " + title, ""] + literal(body) + [""]
            title, body = l, []
        else:
            body.append(l)
    if title:
        out += ["# " + title, ""] + literal(body) + [""]
    return out


def main(argv):
    if len(argv) < 3:
        sys.exit("usage: gen-man.py TEMPLATE OUTPUT.scd [PROGRAM [ARG...]]")
    template, output, prog = argv[1], argv[2], argv[3:]
    text = open(template, encoding="utf-8").read()
    text = text.replace("@VERSION@", os.environ.get("CUSLICE_VERSION", ""))
    if prog:
        env = dict(os.environ, COLUMNS="80")
        # The tools are built with ASan in the test build: leaks at exit are not this page's business.
        env["ASAN_OPTIONS"] = "detect_leaks=0"
        r = subprocess.run(prog + ["--help"], capture_output=True, text=True, env=env)
        if r.returncode != 0:
            sys.exit("%s --help: exit %d: %s" % (" ".join(prog), r.returncode, r.stderr))
        text = text.replace("@HELP@\n", "\n".join(convert(r.stdout)) + "\n")
    elif "@HELP@" in text:
        sys.exit("%s has @HELP@ but no program was given" % template)
    with open(output, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main(sys.argv)
