#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# SPECKV_LOG=stderr[:LEVEL]: a process without a log callback still sees the
# library's warnings. A process attaches to a pool and dies without closing;
# the next opener (`speckv demo`, which sets no callback without -v) reclaims
# what it left and warns, on stderr only when SPECKV_LOG asks for it.
# Usage: run.sh SPECKV_BINARY LIBSPECKV_SO WORK_DIR
set -u
bin=$(realpath "$1") lib=$(realpath "$2") work=$(realpath -m "$3")
rm -rf "$work" && mkdir -p "$work"
fails=0
ok() { echo "ok   $1"; }
bad() { echo "FAIL $1"; fails=$((fails + 1)); }
P="file:$work/p.pool"
"$bin" pool create "$P" --size 8M -q || { echo "FAIL pool create"; exit 1; }
die_attached() {  # a process attaches and exits without speckv_pool_close
    python3 - "$lib" "$P" <<'PY' || bad "a process attached and died"
import ctypes, os, sys
lib = ctypes.CDLL(sys.argv[1])
pool = ctypes.c_void_p()
rc = lib.speckv_pool_open(sys.argv[2].encode(), None, ctypes.byref(pool))
if rc != 0:
    print("speckv_pool_open:", rc); sys.exit(1)
os._exit(0)
PY
}
run() {  # run NAME [ENV=VALUE]: demo on the pool after a process died attached
    local name=$1; shift
    die_attached
    env "$@" "$bin" demo "$P" --layers 1 --tokens 16 -q 2>"$work/$name.err" || bad "$name: demo failed"
}
want='^speckv: warn: process [0-9]* attached to the pool is gone'
run quiet
grep -q "$want" "$work/quiet.err" && bad "no SPECKV_LOG: nothing on stderr" || ok "no SPECKV_LOG: nothing on stderr"
run stderr SPECKV_LOG=stderr
grep -q "$want" "$work/stderr.err" && ok "SPECKV_LOG=stderr: $(head -1 "$work/stderr.err")" ||
    { bad "SPECKV_LOG=stderr shows the warning"; cat "$work/stderr.err"; }
run error SPECKV_LOG=stderr:error
grep -q "$want" "$work/error.err" && bad "SPECKV_LOG=stderr:error hides warnings" || ok "SPECKV_LOG=stderr:error hides warnings"
run bogus SPECKV_LOG=syslog
grep -q "SPECKV_LOG=syslog not understood" "$work/bogus.err" && ok "SPECKV_LOG=syslog: $(head -1 "$work/bogus.err")" ||
    { bad "SPECKV_LOG=syslog is reported"; cat "$work/bogus.err"; }
echo "$fails failed"
[ "$fails" = 0 ]
