#!/usr/bin/env python3
"""Every file the build installs is in exactly one Debian package.

    check-deb-install.py BUILD_DIR PREFIX DEBIAN_DIR

Compares what meson installs (BUILD_DIR/meson-info/intro-installed.json,
paths under PREFIX) with the debian/*.install lists, mapped to the same
layout (usr/ dropped, lib/<triplet>/ as lib/). A file no list claims
would fail `make deb` (dh_missing); one claimed twice would be in two
packages; a line that claims nothing is stale. `make deb` itself is too
slow for `make test`; this is its quick half (make deb-check installs the
real packages in a fresh root).
"""
import fnmatch
import glob
import json
import os
import sys


def normalise(pattern):
    p = pattern.strip()
    if p.startswith("usr/"):
        p = p[len("usr/"):]
    return p.replace("lib/*/", "lib/")


def main():
    build, prefix, debian = sys.argv[1:4]
    with open(os.path.join(build, "meson-info", "intro-installed.json"), encoding="utf-8") as f:
        installed = sorted(os.path.relpath(p, prefix) for p in json.load(f).values())
    lists = {}
    for path in sorted(glob.glob(os.path.join(debian, "*.install"))):
        pkg = os.path.basename(path)[: -len(".install")]
        with open(path, encoding="utf-8") as f:
            lists[pkg] = [normalise(l) for l in f if l.strip() and not l.startswith("#")]
    bad = []
    used = set()
    for rel in installed:
        owners = []
        for pkg, pats in lists.items():
            for pat in pats:
                if fnmatch.fnmatch(rel, pat) or rel.startswith(pat.rstrip("/") + "/"):
                    owners.append(pkg)
                    used.add((pkg, pat))
        if len(owners) != 1:
            bad.append("%s: in %s" % (rel, ", ".join(owners) if owners else "no package"))
    for pkg, pats in lists.items():
        # An optional component this build left out (-Dslurm, -Dk8s): not stale.
        if not any((pkg, pat) in used for pat in pats):
            print("note: nothing of %s is built here" % pkg)
            continue
        for pat in pats:
            if (pkg, pat) not in used:
                bad.append("debian/%s.install: %s claims nothing the build installs" % (pkg, pat))
    print("%d installed files, %d packages" % (len(installed), len(lists)))
    for b in bad:
        print("FAIL: " + b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
