#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# iverilog smoke run of the codec RTL: writes vectors with fpga_vecgen (C++
# reference), compiles fpga/sim/tb_codec.v with the RTL and replays them.
#   run_iverilog.sh VECGEN FPGA_DIR WORK_DIR [PAGES] [FUZZ] [SEED] [DW]
# Exit: 0 pass, 1 mismatch, 77 iverilog/vvp not installed (CTest: skipped).
set -eu
vecgen=$1 fpga=$2 work=$3 pages=${4:-12} fuzz=${5:-12} seed=${6:-1} dw=${7:-512}
if ! command -v iverilog >/dev/null 2>&1 || ! command -v vvp >/dev/null 2>&1; then
    echo "iverilog/vvp not found: skipped"
    exit 77
fi
# known mode ids: codec::kModeCount of the C++ reference
modes=$(sed -n 's/^constexpr int kModeCount = \([0-9]*\);.*/\1/p' "$fpga/../lib/codec/codec.h")
rm -rf "$work"
mkdir -p "$work"
"$vecgen" "$work/vec" --pages "$pages" --fuzz "$fuzz" --seed "$seed" --beat $((dw / 8))
iverilog -g2012 -Ptb_codec.MODES="${modes:-18}" -Ptb_codec.DW="$dw" -I "$fpga/rtl" -o "$work/tb.vvp" "$fpga/sim/tb_codec.v" \
    "$fpga/rtl/speckv_codec_top.v" "$fpga/rtl/speckv_enc.v" "$fpga/rtl/speckv_dec.v" "$fpga/rtl/speckv_penc.v" \
    "$fpga/rtl/speckv_pdec.v" "$fpga/rtl/speckv_sdp_ram.v"
vvp -n "$work/tb.vvp" +vec="$work/vec" +seed="$seed" +stall=30 | tee "$work/log.txt"
grep -q "FPGA-IVERILOG PASS" "$work/log.txt"
