#!/usr/bin/env python3
"""Every function DCCL's header declares under an NCCL name has NVIDIA's signature: for each declaration of
include/dccl.h named nccl*, a C file asserts that the function NVIDIA's nccl.h declares has the same type (return
and parameters), and the C compiler, given NVIDIA's header, decides. Functions NVIDIA's header lacks are named and
fail the check. Exits 77 where NVIDIA's header is missing.
Usage: check_signatures.py DCCL_HEADER NVIDIA_INCLUDE_DIR [CC=cc]"""
import os
import re
import subprocess
import sys
import tempfile


def declarations(path):
    text = open(path).read()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.S)
    text = re.sub(r"^\s*#.*$", " ", text, flags=re.M)
    found = {}
    for m in re.finditer(r"([A-Za-z_][\w\s\*]*?)\b(nccl\w+)\s*\(([^;{}]*?)\)\s*;", text):
        ret, name, params = (" ".join(x.split()) for x in m.groups())
        ret = ret.replace("extern ", "").strip()
        if ret.split()[-1:] in (["typedef"], ["define"]) or not ret:
            continue
        found[name] = (ret, params or "void")
    return found


def main():
    header, nv_include = sys.argv[1], sys.argv[2]
    cc = sys.argv[3] if len(sys.argv) > 3 else "cc"
    nv_header = os.path.join(nv_include, "nccl.h")
    if not os.path.exists(nv_header):
        print(f"SKIP: no NVIDIA nccl.h in {nv_include}")
        return 77
    ours = declarations(header)
    theirs = declarations(nv_header)
    missing = sorted(n for n in ours if n not in theirs)
    lines = ["#include <nccl.h>", ""]
    for name, (ret, params) in sorted(ours.items()):
        if name in theirs:
            lines.append(f"_Static_assert(__builtin_types_compatible_p(__typeof__(&{name}), {ret} (*)({params})), "
                         f"\"{name}: DCCL's signature differs from NVIDIA's\");")
    with tempfile.TemporaryDirectory() as tmp:
        src = os.path.join(tmp, "signatures.c")
        open(src, "w").write("\n".join(lines) + "\n")
        res = subprocess.run([cc, "-std=gnu11", "-fsyntax-only", "-I", nv_include, src], capture_output=True,
                             text=True)
    checked = len(ours) - len(missing)
    if missing:
        print("FAIL: declared by DCCL under NCCL's names but not in NVIDIA's nccl.h:", ", ".join(missing))
    if res.returncode != 0:
        print(res.stderr)
        print(f"FAIL: signatures differ (above)")
    if missing or res.returncode != 0:
        return 1
    print(f"PASS: {checked} functions have NVIDIA's signatures (nccl.h in {nv_include})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
