#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The test vectors of docs/codec.md §12 through the RTL: `speckv codec vectors`
# writes input/record/decoded triples (with the real K/V pages of MODEL when one
# is given: a MODEL given but missing is an error, not a fallback), fpga_tb_codec
# encodes every raw/paper/int8 input and decodes every record, comparing with
# the files byte for byte.
#   run_vectors.sh SPECKV_CLI FPGA_TB WORK_DIR [MODEL]
set -eu
cli=$1 tb=$2 work=$3 model=${4:-}
rm -rf "$work"
mkdir -p "$work"
set +e
if [ -n "$model" ]; then
    [ -f "$model" ] || { echo "FPGA-RTL FAIL: model $model not found (the repository's data/, or SPECKV_DATA_DIR=DIR)"; exit 1; }
    "$cli" codec vectors --out "$work/v" --model "$model"
else
    echo "no MODEL given: synthetic vectors only"
    "$cli" codec vectors --out "$work/v"
fi
rc=$?
set -e
# The RTL check runs on whatever triples were written; a failing CLI is the
# codec's own test's business, but say so loudly.
if [ $rc -ne 0 ]; then
    [ -f "$work/v/index.tsv" ] || { echo "speckv codec vectors failed ($rc), no index.tsv"; exit 1; }
    echo "WARNING: speckv codec vectors exited $rc; checking the $(grep -vc '^#' "$work/v/index.tsv") triples it wrote"
fi
"$tb" --vectors "$work/v" --pages 0 --fuzz 0 --perf 0 --stall 30
