#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# `speckv devices` and the pool verbs on dax: URIs, run on the real binary.
# The JSON is machine-dependent (memory, nodes), so its shape is checked, not
# its text. Exit 77 (skip) only when no JSON checker is installed.
set -u
bin=$1 work=$2
rm -rf "$work" && mkdir -p "$work"
fails=0
py=$(command -v python3 || true)
[ -n "$py" ] || { echo "SKIP: python3 is needed to check the JSON shape"; exit 77; }

# expect NAME RC STDERR_SUBSTRING ARGS...
expect() {
    local name=$1 want=$2 needle=$3; shift 3
    "$bin" "$@" >"$work/$name.out" 2>"$work/$name.err"
    local rc=$?
    if [ "$rc" != "$want" ]; then
        echo "--- $name: exit $rc, expected $want"; cat "$work/$name.err"; fails=$((fails + 1)); return
    fi
    if [ -n "$needle" ] && ! grep -qF -- "$needle" "$work/$name.err"; then
        echo "--- $name: stderr lacks '$needle':"; cat "$work/$name.err"; fails=$((fails + 1))
    fi
}

expect devices_json 0 "" devices --json
"$py" - "$work/devices_json.out" <<'PY' || fails=$((fails + 1))
import json, sys
doc = json.load(open(sys.argv[1]))
assert set(doc) >= {"regions", "numa_available", "numa_nodes"}, doc.keys()
assert isinstance(doc["regions"], list)
for r in doc["regions"]:                      # as `daxctl list -RD`
    assert isinstance(r["id"], int) and isinstance(r["path"], str)
    for d in r["devices"]:
        assert d["chardev"].startswith("dax") and isinstance(d["size"], int)
        assert d["mode"] in ("devdax", "system-ram")
        assert "speckv_pool" in d
nodes = doc["numa_nodes"]
if doc["numa_available"]:
    assert nodes and nodes[0]["node"] == 0, nodes
    for n in nodes:
        for k, t in (("size", int), ("free", int), ("cpus", int), ("memory_only", bool),
                     ("distances", dict), ("dax_devices", list)):
            assert isinstance(n[k], t), (k, n)
        assert n["distances"][str(n["node"])] == 10
        assert n["memory_only"] == (n["cpus"] == 0 and n["size"] > 0)
    assert nodes[0]["size"] > 0
if not any(r["devices"] for r in doc["regions"]):
    print("no dax devices on this machine: device objects not exercised")
PY
expect devices_text 0 "" devices
grep -q "^numa nodes:" "$work/devices_text.out" || { echo "--- devices_text: no 'numa nodes:'"; fails=$((fails + 1)); }
if ! "$py" -c 'import json,sys; sys.exit(any(r["devices"] for r in json.load(open(sys.argv[1]))["regions"]))' \
    "$work/devices_json.out"; then :; else
    grep -q "^dax: no dax regions" "$work/devices_text.out" || { echo "--- devices_text: no 'no dax regions'"; fails=$((fails + 1)); }
fi

expect inspect_absent 1 "no device-dax device at /dev/dax987.3" pool inspect dax:/dev/dax987.3
expect inspect_null 1 "/dev/null is character device 1:3 (class mem), not a device-dax device" pool inspect dax:/dev/null
expect check_absent 2 "no device-dax device at /dev/dax987.3" pool check dax:/dev/dax987.3
expect reset_noforce 1 "without --force" pool reset dax:/dev/dax987.3
expect reset_absent 1 "no device-dax device at /dev/dax987.3" pool reset dax:/dev/dax987.3 --force
expect create_absent 1 "no device-dax device at /dev/dax987.3" pool create dax:/dev/dax987.3 --size 8M
: >"$work/plain"
expect create_file 1 "is a regular file, not a device-dax character device" pool create "dax:$work/plain" --size 8M
[ -s "$work/plain" ] && { echo "--- create_file: the file was written"; fails=$((fails + 1)); }

if [ "$fails" -ne 0 ]; then echo "devices_cli: $fails failure(s)"; exit 1; fi
echo "devices_cli: all passed"
