#!/usr/bin/env python3
"""meson-option.py BUILD NAME VALUE: exit 0 when the Meson build folder
BUILD has option NAME set to VALUE (as Meson prints it: true, false, a
string), 1 otherwise or when BUILD is not set up. The Makefile asks it
before reconfiguring a folder, so a folder already right is left alone
(its next build stays a no-op)."""
import json
import os
import sys

build, name, value = sys.argv[1:4]
try:
    with open(os.path.join(build, "meson-info", "intro-buildoptions.json")) as f:
        options = json.load(f)
except (OSError, ValueError):
    sys.exit(1)
for o in options:
    if o.get("name") == name:
        v = o.get("value")
        shown = str(v).lower() if isinstance(v, bool) else str(v)
        sys.exit(0 if shown == value else 1)
sys.exit(1)
