#!/bin/bash
# SPDX-License-Identifier: Apache-2.0
# data_check.sh SHA256SUMS DEFAULT_DATA_DIR
# Every file SHA256SUMS lists is in the data directory ($SPECKV_DATA_DIR, else
# DEFAULT_DATA_DIR) with exactly that sha256, every file there (except README*,
# .gitattributes and SHA256SUMS itself) is listed, and the README.md beside
# SHA256SUMS gives each file the same sha256 in its table: the data the tests
# use is byte for byte the data data/README.md describes.
set -u
sums=$1
dir=${SPECKV_DATA_DIR:-$2}
[ -f "$sums" ] || { echo "FAIL: $sums not found"; exit 1; }
[ -d "$dir" ] || { echo "FAIL: data directory $dir not found (the repository's data/, or SPECKV_DATA_DIR=DIR)"; exit 1; }
cd "$dir" || exit 1
status=0
sha256sum --check --strict "$sums" || status=1
listed=$(awk '{ sub(/^\*/, "", $2); print $2 }' "$sums" | sort)
present=$(find . -type f ! -name 'README*' ! -name 'SHA256SUMS' ! -name '.gitattributes' | sed 's|^\./||' | sort)
extra=$(comm -13 <(printf '%s\n' "$listed") <(printf '%s\n' "$present"))
if [ -n "$extra" ]; then
    echo "FAIL: files in $dir that SHA256SUMS does not list (add them with their origin to data/README.md):"
    printf '  %s\n' $extra
    status=1
fi
readme=$(dirname "$sums")/README.md
while read -r sha file; do
    file=${file#\*}
    grep -F "| \`$file\` |" "$readme" 2>/dev/null | grep -qF "\`$sha\`" ||
        { echo "FAIL: $readme has no table row for $file with sha256 $sha"; status=1; }
done <"$sums"
n=$(printf '%s\n' "$listed" | grep -c .)
[ $status -eq 0 ] && echo "data: $n files in $dir match SHA256SUMS"
exit $status
