#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# `pip install ./bindings/python` as README "Install" says, offline: a venv with
# the system's site-packages (Debian 12: python3-venv, python3-setuptools,
# python3-wheel), pip --no-build-isolation --no-index. Then `import speckv`
# from outside the source tree finds the library through $SPECKV_LIB, and,
# without it, through the dynamic loader's search.
#   python_install.sh PYTHON LIBRARY WORK_DIR
set -eu
py=$1 lib=$2 work=$3
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../.." && pwd)
# The given interpreter, else Debian's own (a pyenv python may lack wheel).
use=
for c in "$py" /usr/bin/python3; do
    if "$c" -c 'import ensurepip, setuptools, wheel' 2>/dev/null; then use=$c; break; fi
done
[ -n "$use" ] || { echo "SKIP: no python3 with ensurepip, setuptools and wheel (Debian: python3-venv python3-setuptools python3-wheel)"; exit 77; }
py=$use
echo "python_install: $py ($("$py" -c 'import sys, setuptools; print(sys.version.split()[0], "setuptools", setuptools.__version__)'))"
rm -rf "$work" && mkdir -p "$work"
# setuptools builds in the source folder (build/, *.egg-info): build a copy.
cp -r "$root/bindings/python" "$work/src"
rm -rf "$work/src/tests"
"$py" -m venv --system-site-packages "$work/venv"
vpy=$work/venv/bin/python
env -u PIP_INDEX_URL -u PIP_FIND_LINKS PIP_CONFIG_FILE=/dev/null PIP_DISABLE_PIP_VERSION_CHECK=1 \
    "$vpy" -m pip install --no-build-isolation --no-index "$work/src" >"$work/pip.log" 2>&1 ||
    { cat "$work/pip.log"; echo "pip install failed"; exit 1; }
"$vpy" -m pip show speckv >"$work/show.txt"
grep -qx 'Version: 0.1.0' "$work/show.txt" && grep -qx 'License: Apache-2.0' "$work/show.txt" ||
    { cat "$work/show.txt"; echo "pip show: wrong metadata"; exit 1; }
cd "$work"
export PYTHONDONTWRITEBYTECODE=1
check='
import os, sys, speckv
venv = os.path.realpath(sys.argv[1])
assert os.path.realpath(speckv.__file__).startswith(venv), speckv.__file__
n, text = speckv.library_version()
with speckv.Pool("anon:?size=16M") as pool:
    h = pool.alloc(4096, speckv.FP16)
    pool.write(h, 0, b"hello")
    assert bytes(pool.read(h, 0, 5)) == b"hello"
    pool.free(h)
print("import speckv:", speckv.__file__, "library", text, speckv.load()._name)
'
env -u PYTHONPATH SPECKV_LIB="$lib" "$vpy" -c "$check" "$work/venv"
# Without $SPECKV_LIB: the loader's search (here LD_LIBRARY_PATH); with
# nothing to find, a NotFoundError that says what to do.
if ! ldconfig -p 2>/dev/null | grep -q 'libspeckv\.so\.0 '; then
    env -u PYTHONPATH -u SPECKV_LIB LD_LIBRARY_PATH="$(dirname "$lib")" "$vpy" -c "$check" "$work/venv"
    env -u PYTHONPATH -u SPECKV_LIB -u LD_LIBRARY_PATH "$vpy" -c '
import speckv
try:
    speckv.load()
except speckv.NotFoundError as e:
    assert "SPECKV_LIB" in e.message, e.message
    print("no library: NotFoundError:", e.message)
else:
    raise SystemExit("loaded a libspeckv that should not be found")'
fi
echo "python_install: pip install --no-build-isolation --no-index into a venv, import speckv: ok"
