#!/bin/bash
# CLI tests: run the real `speckv` binary and compare stdout, stderr and the
# exit code of each case with tests/cli/expected/<case>.{out,err,rc}.
# Volatile text (work dir, UUIDs, times) is normalised first.
# UPDATE=1 rewrites the expected files (review the diff before committing).
set -u
bin=$1 src=$2 work=$3 hostile=${4:-}
rm -rf "$work" && mkdir -p "$work"
fails=0 n=0

norm() {
    sed -e "s#$work#WORK#g" \
        -e 's/[0-9a-f]\{8\}-[0-9a-f]\{4\}-[0-9a-f]\{4\}-[0-9a-f]\{4\}-[0-9a-f]\{12\}/UUID/g' \
        -e 's/[0-9]\{4\}-[0-9][0-9]-[0-9][0-9]T[0-9:]*Z/TIME/g' \
        -e 's/pid [0-9]*/pid PID/g; s/attach id [0-9]*/attach id N/g' \
        -e "s#/dev/shm/speckv-cli-test-[0-9]*#XDG#g"
}

# case NAME EXPECTED_RC ARGS...
case_() {
    local name=$1 want=$2; shift 2
    n=$((n + 1))
    "$bin" "$@" >"$work/$name.out.raw" 2>"$work/$name.err.raw"
    local rc=$?
    norm <"$work/$name.out.raw" >"$work/$name.out"
    norm <"$work/$name.err.raw" >"$work/$name.err"
    echo "$rc" >"$work/$name.rc"
    if [ "${UPDATE:-0}" = 1 ]; then
        cp "$work/$name.out" "$src/expected/$name.out"
        cp "$work/$name.err" "$src/expected/$name.err"
        cp "$work/$name.rc" "$src/expected/$name.rc"
        return
    fi
    local ok=1
    if [ "$rc" != "$want" ]; then ok=0; echo "--- case $name: exit code $rc, expected $want"; fi
    for k in out err rc; do
        if ! diff -u "$src/expected/$name.$k" "$work/$name.$k" >"$work/$name.$k.diff"; then
            ok=0
            echo "--- case $name: $k differs"
            cat "$work/$name.$k.diff"
        fi
    done
    if [ $ok = 1 ]; then echo "ok   $name"; else echo "FAIL $name"; fails=$((fails + 1)); fi
}

P=$work/a.pool
case_ version 0 --version
case_ no_args 2
case_ unknown_cmd 2 frobnicate
case_ create 0 pool create "file:$P" --size 8M
case_ create_again 1 pool create "file:$P" --size 8M
case_ create_bad_size 1 pool create "file:$work/b.pool" --size 5000
case_ create_bad_uri 1 pool create "ftp:$work/c.pool" --size 8M
case_ inspect 0 pool inspect "file:$P"
case_ inspect_json 0 pool inspect "file:$P" --json
case_ check_clean 0 pool check "file:$P"
case_ demo 0 demo "file:$P" --layers 2 --tokens 64 --keep
case_ check_blocks_json 0 pool check "file:$P" --json
# Damage one data page of the first block (data area starts at data_offset).
off=$("$bin" pool inspect "file:$P" --json | sed 's/.*"data_offset":\([0-9]*\).*/\1/')
printf '\xff' | dd of="$P" bs=1 seek=$((off + 100)) conv=notrunc status=none
case_ check_corrupt 1 pool check "file:$P"
case_ repair_keeps_corruption 1 pool check "file:$P" --repair
case_ reset_refused 1 pool reset "file:$P"
case_ reset 0 pool reset "file:$P" --force
case_ check_after_reset 0 pool check "file:$P"
case_ inspect_missing 1 pool inspect "file:$work/none.pool"
case_ check_missing 2 pool check "file:$work/none.pool"
head -c 3000000 /dev/zero >"$work/zero.bin"
case_ check_not_pool 2 pool check "file:$work/zero.bin"
case_ inspect_anon 1 pool inspect "anon:?size=8M"

# A packed image whose directory entry says zero page and coded, at a wild
# offset (tests/cli/hostile_pool.cc): reported, never followed (issue 28 made
# inspect and stats die of SIGSEGV on it; check always reported it).
if [ -n "$hostile" ]; then
    H=$work/hostile.pool
    "$hostile" "$H" || { echo "FAIL hostile_pool: could not write $H"; fails=$((fails + 1)); }
    case_ hostile_inspect 1 pool inspect "file:$H"
    case_ hostile_inspect_json 1 pool inspect "file:$H" --json
    case_ hostile_stats 1 pool stats "file:$H"
    case_ hostile_check 1 pool check "file:$H"
fi

# Named numa: pools (node 0): a tmpfs file in $XDG_RUNTIME_DIR/speckv, here a
# private directory under /dev/shm; unnamed numa: is refused with the reason.
xdg=/dev/shm/speckv-cli-test-$$
rm -rf "$xdg" && mkdir -p "$xdg"
export XDG_RUNTIME_DIR=$xdg
N="numa:0?name=cli1"
case_ numa_create 0 pool create "$N" --size 8M
case_ numa_create_again 1 pool create "$N" --size 8M
case_ numa_demo 0 demo "$N" --layers 2 --tokens 64 --keep
case_ numa_inspect 0 pool inspect "$N"
case_ numa_inspect_json 0 pool inspect "$N" --json
case_ numa_check 0 pool check "$N"
case_ numa_reset_refused 1 pool reset "$N"
case_ numa_reset 0 pool reset "$N" --force
case_ numa_check_after_reset 0 pool check "$N"
case_ numa_inspect_other_node 1 pool inspect "numa:1?name=cli1"
case_ numa_inspect_missing 1 pool inspect "numa:0?name=nope"
case_ numa_unnamed_inspect 1 pool inspect "numa:0?size=8M"
case_ numa_unnamed_check 2 pool check "numa:0?size=8M"
case_ numa_unnamed_reset 1 pool reset "numa:0?size=8M" --force
case_ numa_unnamed_create 1 pool create "numa:0" --size 8M
case_ numa_bad_name 1 pool create "numa:0?name=../x" --size 8M
case_ numa_bad_param 1 pool create "numa:0?name=ok&colour=red" --size 8M
case_ numa_empty_name 1 pool inspect "numa:0?name="
left=$(ls "$xdg/speckv")
[ "$left" = "cli1.numa.pool" ] || { echo "FAIL numa files: '$left' in $xdg/speckv"; fails=$((fails + 1)); }
rm -rf "$xdg"
unset XDG_RUNTIME_DIR

echo "$((n - fails)) passed, $fails failed"
[ $fails = 0 ]
