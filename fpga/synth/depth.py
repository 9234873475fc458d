#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Logic depth of a flattened Yosys netlist (write_json), register to register.

    depth.py NETLIST.json [TOP] [--through FILE:FIRST-LAST ...]

Start points: top-level inputs, flip-flop outputs, black-box (RAM) outputs,
constants. End points: flip-flop / black-box inputs and top-level outputs.
Two figures for the longest combinational path:

* word-level cells: every cell counts 1 whatever its width (what Yosys `ltp
  -noff` counts; a cell's output waits for its latest input bit, so it is an
  upper bound on the cells one bit goes through);
* LUT levels, a crude model of a 6-input-LUT FPGA: 2-input gates and 2:1
  muxes 0.5 (a LUT6 holds two), comparators and reductions log6 of their
  width, adders 1 + width/32 (carry chain), shifters 1 per 2 bits of shift
  amount, multipliers 4, dividers width x (1 + width/32), N-way muxes 1 + log6 N.

Neither is a timing figure (no placement, no routing, no vendor library); they
say how far a datapath is from a register-to-register budget. Prints the two
depths, the cells of each kind on the longest LUT-level path and the source
lines it goes through. --through FILE:FIRST-LAST also prints the longest path
that goes through a cell made from those source lines (a datapath that is not
the module's longest, e.g. the split-Rice decode). Exit 0; 1 on a
combinational loop (never expected: synth/check.sh asserts there is none first).
"""
import json
import math
import sys
from collections import Counter, defaultdict, deque

SEQ = ("$dff", "$dffe", "$adff", "$adffe", "$sdff", "$sdffe", "$sdffce", "$dffsr", "$dffsre", "$aldff",
       "$aldffe", "$dlatch", "$adlatch", "$dlatchsr", "$mem", "$mem_v2", "$memrd", "$memrd_v2", "$memwr",
       "$memwr_v2", "$meminit", "$meminit_v2", "$ff", "$_DFF_", "$_DFFE_", "$_SDFF", "$_ALDFF", "$_DFFSR")
BITWISE2 = {"$and", "$or", "$xor", "$xnor", "$mux", "$_AND_", "$_OR_", "$_XOR_", "$_XNOR_", "$_NAND_", "$_NOR_",
            "$_MUX_", "$_ANDNOT_", "$_ORNOT_", "$logic_and", "$logic_or", "$bweqx", "$bwmux"}
FREE = {"$not", "$pos", "$_NOT_", "$_BUF_", "$neg_free"}
REDUCE = {"$reduce_and", "$reduce_or", "$reduce_xor", "$reduce_xnor", "$reduce_bool", "$logic_not"}
COMPARE_EQ = {"$eq", "$ne", "$eqx", "$nex"}
ARITH = {"$add", "$sub", "$lt", "$le", "$gt", "$ge", "$neg", "$alu", "$lcu", "$macc"}
SHIFT = {"$shl", "$shr", "$sshl", "$sshr", "$shift", "$shiftx"}
DIV = {"$div", "$mod", "$divfloor", "$modfloor", "$pow"}


def log6(n):
    return max(1.0, math.ceil(math.log(max(n, 2), 6)))


def width(cell, port):
    return len(cell["connections"].get(port, []))


def lut_levels(cell):
    t = cell["type"]
    if t in FREE:
        return 0.0
    if t in BITWISE2:
        return 0.5
    if t in REDUCE:
        return log6(width(cell, "A"))
    if t in COMPARE_EQ:
        return log6(2 * max(width(cell, "A"), width(cell, "B")))
    if t in ARITH:
        w = max(width(cell, "A"), width(cell, "B"), 1)
        return 1.0 + w / 32.0
    if t in SHIFT:
        return max(1.0, math.ceil(width(cell, "B") / 2.0))
    if t == "$mul":
        return 4.0
    if t in DIV:
        w = max(width(cell, "A"), 1)
        return w * (1.0 + w / 32.0)
    if t in ("$pmux", "$bmux", "$demux"):
        s = width(cell, "S")
        return 1.0 + log6(max(s, 2))
    return 1.0


def is_seq(cell):
    t = cell["type"]
    return not t.startswith("$") or any(t.startswith(s) for s in SEQ)


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    args = sys.argv[1:]
    through = []
    while "--through" in args:
        i = args.index("--through")
        f, r = args[i + 1].rsplit(":", 1)
        a, b = r.split("-")
        through.append((f, int(a), int(b)))
        del args[i:i + 2]
    with open(args[0]) as f:
        nl = json.load(f)
    mods = nl["modules"]
    top = args[1] if len(args) > 1 else None
    if top is None:
        for name, m in mods.items():
            if int(str(m.get("attributes", {}).get("top", "0")), 2 if set(str(m.get("attributes", {}).get("top", "0"))) <= {"0", "1"} else 10):
                top = name
    m = mods[top]
    cells = m["cells"]
    driver = {}  # bit -> combinational cell that drives it
    comb = []
    for name, c in cells.items():
        if is_seq(c):
            continue
        comb.append(name)
        for port, d in c.get("port_directions", {}).items():
            if d == "output":
                for b in c["connections"][port]:
                    if isinstance(b, int):
                        driver[b] = name
    preds = {}
    succs = defaultdict(list)
    for name in comb:
        c = cells[name]
        ps = set()
        for port, d in c.get("port_directions", {}).items():
            if d == "input":
                for b in c["connections"][port]:
                    if isinstance(b, int) and b in driver:
                        ps.add(driver[b])
        preds[name] = ps
        for p in ps:
            succs[p].append(name)
    indeg = {n: len(preds[n]) for n in comb}
    q = deque(n for n in comb if indeg[n] == 0)
    order = []
    while q:
        n = q.popleft()
        order.append(n)
        for s in succs[n]:
            indeg[s] -= 1
            if indeg[s] == 0:
                q.append(s)
    if len(order) != len(comb):
        print(f"combinational loop: {len(comb) - len(order)} cells on or behind a cycle")
        return 1
    def inst(n):  # top-level instance a flattened cell came from
        return n.split("\\", 1)[1].split(".", 1)[0] if n.startswith("$flatten\\") else top

    def longest(weight):
        dep, via = {}, {}
        for n in order:
            best, arg = 0.0, None
            for p in preds[n]:
                if dep[p] > best:
                    best, arg = dep[p], p
            dep[n] = best + weight(cells[n])
            via[n] = arg
        return dep, via

    def path_to(end, via):
        path = []
        while end is not None:
            path.append(end)
            end = via[end]
        return path[::-1]

    dc, vc = longest(lambda c: 1.0)
    dl, vl = longest(lut_levels)
    ncomb, nseq = len(comb), len(cells) - len(comb)
    print(f"  {ncomb} combinational and {nseq} sequential / black-box cells (flattened {top})")
    for i in sorted({inst(n) for n in order}):
        mine = [n for n in order if inst(n) == i]
        ec = max(mine, key=lambda n: dc[n])
        el = max(mine, key=lambda n: dl[n])
        path = path_to(el, vl)
        print(f"  {i}: longest register-to-register path {int(dc[ec])} word-level cells; "
              f"{dl[el]:.0f} LUT levels in the model ({len(path)} cells)")
        kinds = Counter(cells[n]["type"] for n in path)
        print("    cells on it: " + ", ".join(f"{t} x{k}" for t, k in kinds.most_common(6)))
        srcs = Counter()
        for n in path:
            src = cells[n].get("attributes", {}).get("src", "").split("|")[-1]
            if src:
                srcs[src.split(":")[0].split("/")[-1] + ":" + src.split(":")[1].split(".")[0]] += 1
        print("    source lines: " + ", ".join(f"{s} ({k})" for s, k in srcs.most_common(6)))

    def src_of(n):  # (file, line) of every source location a cell was made from
        out = []
        for part in cells[n].get("attributes", {}).get("src", "").split("|"):
            if ":" in part:
                fl, rest = part.split(":", 1)
                try:
                    out.append((fl.split("/")[-1], int(rest.split(".")[0])))
                except ValueError:
                    pass
        return out

    for fl, a, b in through:
        sel = [n for n in order if any(f == fl and a <= ln <= b for f, ln in src_of(n))]
        if not sel:
            print(f"  through {fl}:{a}-{b}: no cells")
            continue
        for name, wfn, dep in (("word-level cells", lambda c: 1.0, dc), ("LUT levels in the model", lut_levels, dl)):
            rdep = {}
            for n in reversed(order):
                rdep[n] = wfn(cells[n]) + max((rdep[s] for s in succs[n]), default=0.0)
            best = max(sel, key=lambda n: dep[n] + rdep[n] - wfn(cells[n]))
            print(f"  through {fl}:{a}-{b} ({len(sel)} cells): longest path {dep[best] + rdep[best] - wfn(cells[best]):.0f} {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
