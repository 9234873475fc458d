#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Yosys check of the codec RTL (generic, no vendor library). The RAMs are black
# boxes (block RAM on an FPGA), so the figures are the codec logic only.
#   check.sh FPGA_DIR WORK_DIR [quick|full] [DW] [MAX_BYTES]
# quick (CI, 2-3 minutes): elaborate, proc, fail on any latch or combinational
#   loop, print word-level cells and flip-flop bits per module, then flatten and
#   print the longest register-to-register path (synth/depth.py: word-level
#   cells, and LUT levels in a crude LUT6 model) per module.
# full (long: did not finish on the shared 2-core machine, > 13 min and 8 GB at
#   DW=256): also map to 6-input LUTs with ABC and print LUT count and the
#   longest path in LUTs (real LUT levels of the mapped netlist, no routing).
# DEPTH_THROUGH="FILE:A-B ..." also prints the longest path through those source
# lines (synth/depth.py --through); KEEP_JSON=1 keeps the flattened netlists.
# Exit: 0 clean, 1 latch / loop / error, 77 yosys not installed (CTest: skipped).
set -eu
fpga=$1 work=$2 mode=${3:-quick} dw=${4:-256} maxb=${5:-4096}
if ! command -v yosys >/dev/null 2>&1; then
    echo "yosys not found: skipped"
    exit 77
fi
rm -rf "$work"
mkdir -p "$work"
rtl=$fpga/rtl
{
    echo "read_verilog -sv -DSPECKV_RAM_BLACKBOX -I$rtl $rtl/speckv_sdp_ram.v $rtl/speckv_enc.v $rtl/speckv_dec.v $rtl/speckv_codec_top.v"
    # PACKED 0: without the §19 packed engines (speckv_penc / speckv_pdec are simulation models so far)
    echo "chparam -set DW $dw -set MAX_BYTES $maxb -set PACKED 0 speckv_codec_top"
    echo "hierarchy -check -top speckv_codec_top"
    echo "proc"
    echo "opt_clean"
    echo "check -assert"
    echo "select -assert-none t:\$dlatch t:\$adlatch t:\$dlatchsr t:\$_DLATCH_* t:\$_DLATCHSR_*"
    echo "tee -o $work/stat.txt stat -width"
    echo "flatten"
    echo "opt_clean"
    echo "write_json $work/flat.json"
    if [ "$mode" = full ]; then
        echo "opt -fast"
        echo "wreduce"
        echo "techmap"
        echo "opt -fast"
        echo "abc -lut 6"
        echo "opt_clean"
        echo "check -assert"
        echo "tee -o $work/stat_lut.txt stat"
        echo "write_json $work/lut.json"
    fi
} > "$work/synth.ys"
start=$(date +%s)
if ! yosys -q -l "$work/yosys.log" "$work/synth.ys" >"$work/stdout.txt" 2>&1; then
    grep -n "Latch inferred\|logic loop\|ERROR" "$work/yosys.log" | head -n 20
    echo "FPGA-SYNTH FAIL (latch, combinational loop or synthesis error; see $work/yosys.log)"
    exit 1
fi
end=$(date +%s)
echo "yosys $mode check, DW=$dw MAX_BYTES=$maxb: $((end - start)) s (RAMs black-boxed)"
# per module: cells and flip-flop bits (stat -width lists FF cells as $dff_<width> <count>);
# the parameter variants of one module (each instantiated once) are added up
awk '
  /^=== /{mod=$2; sub(/.*\\/, "", mod); if (mod == "design") mod = "total";
          if (!(mod in nv)) order[++n] = mod; nv[mod]++}
  /Number of cells:/{cells[mod] += $4}
  $1 ~ /^\$_?(a|s|al)?dff(e|sr|ce)?_[0-9]+$/ || $1 ~ /^\$_(S|A)?DFF/ {
     w = $1; sub(/.*_/, "", w); if (w !~ /^[0-9]+$/) w = 1; ff[mod] += w * $2 }
  END{ for (i = 1; i <= n; i++) { m = order[i]; if (m == "speckv_codec_top") continue;
       name = (nv[m] > 1) ? m " x" nv[m] : m;
       printf "  %-18s %8d cells %8d flip-flop bits\n", name ":", cells[m], ff[m] } }' "$work/stat.txt"
# logic depth, register to register (an estimate: no placement, routing or vendor timing)
if command -v python3 >/dev/null 2>&1; then
    echo "logic depth of the word-level netlist (flattened, before optimisation):"
    thr=""
    for t in ${DEPTH_THROUGH:-}; do thr="$thr --through $t"; done
    python3 "$fpga/synth/depth.py" "$work/flat.json" $thr || exit 1
    if [ "$mode" = full ]; then
        awk '/Number of cells:/{print "  LUT-mapped (abc -lut 6): " $4 " cells"} $1 == "$lut" {print "  6-input LUTs: " $2}' "$work/stat_lut.txt"
        echo "logic depth of the LUT netlist (each cell one level):"
        python3 "$fpga/synth/depth.py" "$work/lut.json" || exit 1
    fi
else
    echo "python3 not found: no depth figure"
fi
[ "${KEEP_JSON:-0}" = 1 ] || rm -f "$work/flat.json" "$work/lut.json"
echo "FPGA-SYNTH PASS (no latches, no combinational loops)"
