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
# PACKED=1 (the default) then checks the packed decoder speckv_pdec on its own
# (work dir WORK_DIR/pdec; PDEC_THROUGH like DEPTH_THROUGH); PACKED=0 skips it.
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
# PACKED=1 (default) also checks the packed decoder speckv_pdec (§19) on its own,
# in quick mode; the packed encoder speckv_penc is still a simulation model
# (exact-integer binary32 functions, register arrays) that Yosys cannot read.
packed=${PACKED:-1}

# check TOP "FILES" "CHPARAM" DIR: one Yosys run and its report
check() {
    top=$1 files=$2 chp=$3 dir=$4
    mkdir -p "$dir"
    {
        echo "read_verilog -sv -DSPECKV_RAM_BLACKBOX -I$rtl $files"
        echo "chparam $chp $top"
        echo "hierarchy -check -top $top"
        echo "proc"
        echo "opt_clean"
        echo "check -assert"
        echo "select -assert-none t:\$dlatch t:\$adlatch t:\$dlatchsr t:\$_DLATCH_* t:\$_DLATCHSR_*"
        echo "tee -o $dir/stat.txt stat -width"
        echo "flatten"
        echo "opt_clean"
        echo "write_json $dir/flat.json"
        if [ "$mode" = full ]; then
            echo "opt -fast"
            echo "wreduce"
            echo "techmap"
            echo "opt -fast"
            echo "abc -lut 6"
            echo "opt_clean"
            echo "check -assert"
            echo "tee -o $dir/stat_lut.txt stat"
            echo "write_json $dir/lut.json"
        fi
    } > "$dir/synth.ys"
    start=$(date +%s)
    if ! yosys -q -l "$dir/yosys.log" "$dir/synth.ys" >"$dir/stdout.txt" 2>&1; then
        grep -n "Latch inferred\|logic loop\|ERROR" "$dir/yosys.log" | head -n 20
        echo "FPGA-SYNTH FAIL (latch, combinational loop or synthesis error; see $dir/yosys.log)"
        exit 1
    fi
    end=$(date +%s)
    echo "yosys $mode check of $top, DW=$dw MAX_BYTES=$maxb: $((end - start)) s (RAMs black-boxed)"
    # per module: cells and flip-flop bits (stat -width lists FF cells as $dff_<width> <count>);
    # the parameter variants of one module (each instantiated once) are added up
    awk -v top="$top" '
      /^=== /{mod=$2; sub(/.*\\/, "", mod); if (mod == "design") mod = "total";
              if (!(mod in nv)) order[++n] = mod; nv[mod]++}
      /Number of cells:/{cells[mod] += $4}
      $1 ~ /^\$_?(a|s|al)?dff(e|sr|ce)?_[0-9]+$/ || $1 ~ /^\$_(S|A)?DFF/ {
         w = $1; sub(/.*_/, "", w); if (w !~ /^[0-9]+$/) w = 1; ff[mod] += w * $2 }
      END{ for (i = 1; i <= n; i++) { m = order[i]; if (m == "speckv_codec_top") continue;
           if (m == "total" && top != "speckv_codec_top") continue;
           name = (nv[m] > 1) ? m " x" nv[m] : m;
           printf "  %-18s %8d cells %8d flip-flop bits\n", name ":", cells[m], ff[m] } }' "$dir/stat.txt"
    # logic depth, register to register (an estimate: no placement, routing or vendor timing)
    if command -v python3 >/dev/null 2>&1; then
        echo "logic depth of the word-level netlist (flattened, before optimisation):"
        thr=""
        for t in ${5:-}; do thr="$thr --through $t"; done
        python3 "$fpga/synth/depth.py" "$dir/flat.json" $thr || exit 1
        if [ "$mode" = full ]; then
            awk '/Number of cells:/{print "  LUT-mapped (abc -lut 6): " $4 " cells"} $1 == "$lut" {print "  6-input LUTs: " $2}' "$dir/stat_lut.txt"
            echo "logic depth of the LUT netlist (each cell one level):"
            python3 "$fpga/synth/depth.py" "$dir/lut.json" || exit 1
        fi
    else
        echo "python3 not found: no depth figure"
    fi
    [ "${KEEP_JSON:-0}" = 1 ] || rm -f "$dir/flat.json" "$dir/lut.json"
}

# the codec without the packed engines (PACKED 0 of speckv_codec_top)
check speckv_codec_top "$rtl/speckv_sdp_ram.v $rtl/speckv_enc.v $rtl/speckv_dec.v $rtl/speckv_codec_top.v" \
    "-set DW $dw -set MAX_BYTES $maxb -set PACKED 0" "$work" "${DEPTH_THROUGH:-}"
if [ "$packed" = 1 ]; then
    # the packed decoder alone (MODES: any value; it only sets a comparison constant)
    check speckv_pdec "$rtl/speckv_sdp_ram.v $rtl/speckv_pdec.v" \
        "-set DW $dw -set MAX_BYTES $maxb -set MODES 39" "$work/pdec" "${PDEC_THROUGH:-}"
fi
echo "FPGA-SYNTH PASS (no latches, no combinational loops)"
