#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# fetch_integrity_test.sh FETCH_SCRIPT TMPDIR: tools/fetch-llama.sh with a recorded
# sha512 that is not the package's must fail (exit 1, naming the mismatch) and
# leave nothing installed. Skipped (77) when the registry cannot be reached.
set -u
fetch=$1 dest=$2/fetch-integrity
rm -rf "$dest"
wrong="sha512-$(printf 'not the tarball' | base64 -w0)"
out=$(SPECKV_LLAMA_SRI_SRC=$wrong "$fetch" "$dest" 2>&1); rc=$?
echo "$out"
if [ $rc -eq 2 ]; then echo "SKIP: the npm registry is not reachable"; exit 77; fi
[ $rc -eq 1 ] || { echo "FAIL: exit $rc, want 1"; exit 1; }
echo "$out" | grep -q "is not the recorded" || { echo "FAIL: no integrity message"; exit 1; }
[ ! -e "$dest/lib" ] && [ ! -e "$dest/STAMP" ] || { echo "FAIL: something was installed"; exit 1; }
echo PASS
