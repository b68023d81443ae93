#!/usr/bin/env python3
"""The ninja targets of everything `meson install` installs, for debian/rules."""
import json
import os
import subprocess
import sys

build = sys.argv[1]
targets = json.loads(subprocess.run(["meson", "introspect", "--targets", build],
                                    check=True, capture_output=True, text=True).stdout)
for t in targets:
    if t.get("installed"):
        for f in t["filename"]:
            print(os.path.relpath(f, os.path.abspath(build)))
