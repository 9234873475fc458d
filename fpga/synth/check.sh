#!/bin/sh
# Yosys check of the codec RTL (generic, no vendor library). The RAMs are black
# boxes (block RAM on an FPGA), so the figures are the codec logic only.
#   check.sh FPGA_DIR WORK_DIR [quick|full] [DW] [MAX_BYTES]
# quick (CI, about 2 minutes): elaborate, proc, flatten, fail on any latch or
#   combinational loop, print word-level cells and flip-flop bits.
# full (once, long: tens of minutes): also `synth` to generic gates, print gate
#   count, flip-flops and the longest combinational path in cells (ltp).
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
    echo "chparam -set DW $dw -set MAX_BYTES $maxb speckv_codec_top"
    echo "hierarchy -check -top speckv_codec_top"
    if [ "$mode" = full ]; then
        echo "synth -top speckv_codec_top -noshare"
    else
        echo "proc"
        echo "opt_clean"
    fi
    echo "check -assert"
    echo "select -assert-none t:\$dlatch t:\$adlatch t:\$dlatchsr t:\$_DLATCH_* t:\$_DLATCHSR_*"
    echo "tee -o $work/stat.txt stat -width"
    if [ "$mode" = full ]; then
        echo "flatten"
        echo "opt_clean"
        echo "tee -o $work/ltp.txt ltp -noff"
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
# per module: cells and flip-flop bits (stat -width lists FF cells as $dff_<width> <count>)
awk '
  /^=== /{mod=$2; sub(/.*\\/, "", mod); if (mod == "design") mod = "total"; order[++n] = mod}
  /Number of cells:/{cells[mod] = $4}
  $1 ~ /^\$_?(a|s|al)?dff(e|sr|ce)?_[0-9]+$/ || $1 ~ /^\$_(S|A)?DFF/ {
     w = $1; sub(/.*_/, "", w); if (w !~ /^[0-9]+$/) w = 1; ff[mod] += w * $2 }
  END{ for (i = 1; i <= n; i++) { m = order[i]; if (m == "speckv_codec_top") continue;
       printf "  %-12s %8d cells %8d flip-flop bits\n", m ":", cells[m], ff[m] } }' "$work/stat.txt"
if [ "$mode" = full ]; then
    grep -h "Longest topological path" "$work/ltp.txt" | sed 's/^/  /'
fi
echo "FPGA-SYNTH PASS (no latches, no combinational loops)"
