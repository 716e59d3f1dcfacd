#!/usr/bin/env python3
"""Fails on an include that crosses the layers the wrong way (docs/design.md, "Layers").

Every source folder is one layer; a file may include its own layer's headers and those its layer's edges name, a
layer or one header. Each `#include "..."` of src/, collectives/, transports/ and pure/ is resolved as the
compiler does (the file's folder, then include/, src/, the root); a forbidden edge is listed as file:line and the
header it includes. tests/, perf/ and tools/ are not checked. Usage: check_layers.py [SOURCE_ROOT]"""
import os
import re
import sys

# (folder, layer): the longest matching folder wins.
FOLDERS = [
    ("include", "api"),
    ("pure", "pure"),
    ("src/util", "util"),
    ("src/bootstrap", "bootstrap"),
    ("src/proxy", "proxy"),
    ("src/topo", "topo"),
    ("transports", "transports"),
    ("collectives", "collectives"),
    ("src/tune", "tune"),
    ("src/core", "core"),
    ("src/storage", "storage"),
]

# What each layer may include besides itself, bottom to top: a layer name, or one header's path.
ALLOWED = {
    "pure": [],
    "util": ["api"],
    "bootstrap": ["api", "util"],
    "proxy": ["api", "util"],
    "topo": ["api", "util"],
    "transports": ["api", "util", "pure", "proxy", "topo"],
    "collectives": ["api", "util", "pure", "transports/transport.h"],
    "tune": ["api", "util", "pure", "transports/transport.h", "collectives/coll_comm.h"],
    "core": ["api", "util", "pure", "bootstrap", "proxy", "topo", "transports", "collectives", "tune"],
    "storage": ["api", "util"],
}

CHECKED = ["src", "collectives", "transports", "pure"]
SEARCH = ["include", "src", "."]
INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"')


def layer_of(path):
    best = None
    for folder, layer in FOLDERS:
        if path == folder or path.startswith(folder + "/"):
            if best is None or len(folder) > len(best[0]):
                best = (folder, layer)
    return best[1] if best else None


def resolve(root, src, name):
    for base in [os.path.dirname(src)] + SEARCH:
        path = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, path)):
            return path
    return None


def allowed(layer, target, target_layer):
    return target_layer == layer or any(a == target_layer or a == target for a in ALLOWED[layer])


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else os.path.join(os.path.dirname(__file__), ".."))
    problems = []
    nfiles = 0
    for top in CHECKED:
        for dirpath, _, names in os.walk(os.path.join(root, top)):
            for name in sorted(names):
                if not name.endswith((".c", ".h", ".cu", ".cuh")):
                    continue
                src = os.path.relpath(os.path.join(dirpath, name), root)
                layer = layer_of(src)
                if layer is None:
                    problems.append(f"{src}: in no layer (add its folder to FOLDERS)")
                    continue
                nfiles += 1
                with open(os.path.join(root, src), encoding="utf-8") as f:
                    for lineno, line in enumerate(f, 1):
                        m = INCLUDE.match(line)
                        if not m:
                            continue
                        target = resolve(root, src, m.group(1))
                        if target is None:
                            problems.append(f"{src}:{lineno}: includes \"{m.group(1)}\", which is not in the tree")
                            continue
                        target_layer = layer_of(target)
                        if target_layer is None or not allowed(layer, target, target_layer):
                            problems.append(f"{src}:{lineno}: {layer} may not include {target} ({target_layer})")
    for p in problems:
        print(p)
    print(f"{nfiles} files checked, {len(problems)} forbidden include edge(s)")
    return 1 if problems or nfiles == 0 else 0


if __name__ == "__main__":
    sys.exit(main())
