#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Self-test of the ABI gate (tools/abi/check_abi.py): it passes on the fresh
build and fails, saying how to record the change, when the header or the
exports drift from a baseline.
    abi_gate_test.py LIBRARY CC
"""
import os
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GATE = [sys.executable, os.path.join(ROOT, "tools", "abi", "check_abi.py")]
HEADER = os.path.join(ROOT, "include", "speckv.h")


def gate(*args):
    r = subprocess.run(GATE + list(args), capture_output=True, text=True)
    return r.returncode, r.stdout + r.stderr


def expect(ok, what, out):
    if not ok:
        print("FAIL:", what, "\n" + out)
        sys.exit(1)
    print("ok:", what)


def main():
    lib, cc = sys.argv[1], sys.argv[2]
    with tempfile.TemporaryDirectory() as t:
        base = os.path.join(t, "base")
        shutil.copytree(os.path.join(ROOT, "tools", "abi"), base, ignore=shutil.ignore_patterns("*.py", "__pycache__"))
        rc, out = gate("--lib", lib, "--baseline-dir", base)
        expect(rc == 0, "the fresh build matches the committed baseline", out)

        # A changed signature and a renumbered code in the header.
        h = open(HEADER).read()
        old = "SPECKV_API int speckv_free(speckv_pool *pool, speckv_handle handle);"
        assert old in h, "test needs updating: speckv_free's declaration moved"
        bad = os.path.join(t, "speckv.h")
        open(bad, "w").write(h.replace(old, old.replace("handle);", "handle, int flags);"))
                             .replace("#define SPECKV_EINTERNAL (-17)", "#define SPECKV_EINTERNAL (-18)"))
        rc, out = gate("--lib", lib, "--baseline-dir", base, "--header", bad)
        expect(rc == 1 and "speckv_free" in out and "SPECKV_EINTERNAL" in out and "CHANGELOG" in out
               and "--update" in out, "a changed declaration fails and says to update baseline + CHANGELOG", out)

        # A library exporting a new symbol in the existing version node, and a leak.
        syms = [l.split("@@")[0] for l in open(os.path.join(base, "symbols.txt")) if l.startswith("speckv_")]
        src = os.path.join(t, "fake.c")
        with open(src, "w") as f:
            for s in syms + ["speckv_new_thing"]:
                f.write("void %s(void) {}\n" % s)
            f.write("void leaked_helper(void) {}\n")
        vmap = os.path.join(t, "fake.map")
        open(vmap, "w").write("SPECKV_0.1 { global: speckv_*; leaked_helper; local: *; };\n")
        fake = os.path.join(t, "libfake.so")
        subprocess.run([cc, "-shared", "-fPIC", "-o", fake, src, "-Wl,--version-script=" + vmap], check=True)
        # Once 0.1.x is released (dated in the changelog), its node is frozen.
        released_log = os.path.join(t, "CHANGELOG.released.md")
        open(released_log, "w").write("# Changelog\n\n## [0.1.0] - 2026-12-01\n")
        rc, out = gate("--lib", fake, "--baseline-dir", base, "--changelog", released_log)
        expect(rc == 1 and "speckv_new_thing@@SPECKV_0.1" in out and "existing version node" in out
               and "leaked_helper" in out, "a new symbol in a released node and a leaked symbol fail", out)

        # --update refuses a change that CHANGELOG.md does not mention.
        empty_log = os.path.join(t, "CHANGELOG.md")
        open(empty_log, "w").write("# Changelog\n")
        rc, out = gate("--lib", lib, "--baseline-dir", base, "--header", bad, "--changelog", empty_log, "--update")
        expect(rc == 1 and "does not mention" in out, "--update needs a CHANGELOG line", out)
        open(empty_log, "a").write("- speckv_free gains flags; SPECKV_EINTERNAL renumbered (test)\n")
        rc, out = gate("--lib", lib, "--baseline-dir", base, "--header", bad, "--changelog", empty_log, "--update")
        expect(rc == 0, "--update with the CHANGELOG line rewrites the baseline", out)
        rc, out = gate("--lib", lib, "--baseline-dir", base, "--header", bad)
        expect(rc == 0, "the updated baseline passes", out)


if __name__ == "__main__":
    main()
