#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Where does offloading pay off? Runs `speckv trace replay --all --json` over a grid of
offload-link bandwidths (--devices D: D x the link preset's per-device GB/s, the pool's size
held fixed with --pool-gb) and HBM room for KV (--hbm-kv-gb), and prints each system's
speed-up over gpu_only and over host_offload, with the bandwidths where a speed-up crosses 1
(break-even, linear between grid points). Writes the table as JSON and an SVG plot.

--vary AXIS=V1,V2,... (repeatable) then varies one more factor at a time around a base point
(--base-devices, --base-hbm-kv-gb): link-latency-ns, time-scale (request rate: 0.5 = twice
the trace's), model, gpu, link (a preset: its latency and bandwidth together) or any other
replay option by its name without the dashes, and context: C tokens of input per request in a
generated trace (--context-requests requests of C - 256 input and 256 output tokens, one a
second, no shared prefixes) instead of --trace. A point whose replay fails (e.g. gpu_only can
hold no request of that context) is reported with its error, and the sweep goes on.
Python 3 standard library only.

  tools/trace/sweep.py --speckv build/release/cli/speckv --trace TRACE --max-requests 300 \
      --devices 1,2,4,8 --hbm-kv-gb 20,40 --vary time-scale=2,1,0.5 --out DIR [-- extra replay options]
"""
import argparse
import json
import os
import subprocess
import sys

SYSTEMS = ["gpu_only", "host_offload", "cxl_nospec", "cxl_compress", "cxl_speckv", "oracle", "cxl_pnm"]
COLORS = ["#444444", "#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b"]


def replay(a, devices, hbm, extra, trace=None, soft=False):
    cmd = [a.speckv, "trace", "replay", trace or a.trace, "--json", "--all", "--devices", str(devices), "--pool-gb",
           str(a.pool_gb), "--max-requests", str(a.max_requests)] + (["--hbm-kv-gb", str(hbm)] if hbm > 0 else []) + extra
    out = subprocess.run(cmd, capture_output=True, text=True)
    if out.returncode != 0:
        msg = "%s failed: %s" % (" ".join(cmd), (out.stdout + out.stderr).strip())
        if soft:
            return {"error": msg}
        sys.exit("sweep: " + msg)
    return json.loads(out.stdout)


def speedups(tps):
    """Speed-ups over gpu_only and host_offload; None where the reference made nothing."""
    ref = lambda r: {s: (tps[s] / tps[r] if tps[r] > 0 else None) for s in SYSTEMS}
    return ref("gpu_only"), ref("host_offload")


def context_trace(path, c, n):
    """n requests of c - 256 input and 256 output tokens, one a second, no prefix information."""
    with open(path, "w") as f:
        f.write("#speckv-trace v1 block_tokens=512\n# sweep.py: context %d, %d requests\n" % (c, n))
        for i in range(n):
            f.write("%d %d 256 -\n" % (i * 1000, c - 256))


def crossings(xs, ys):
    """x where y crosses 1, linear between points."""
    found = []
    for i in range(1, len(xs)):
        a, b = ys[i - 1] - 1, ys[i] - 1
        if a == 0:
            found.append(xs[i - 1])
        elif a * b < 0:
            found.append(xs[i - 1] + (xs[i] - xs[i - 1]) * a / (a - b))
    return found


def svg_open(w, h):
    return ['<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" font-family="sans-serif" font-size="12">' % (w, h),
            '<rect width="100%" height="100%" fill="white"/>']


def panel(o, title, xlabel, w, ml, mr, top, ph, ylo, yhi):
    """A panel's title, axes, the dashed line at 1, y ticks and x label; returns its Y mapping."""
    Y = lambda y: top + ph - ph * (y - ylo) / (yhi - ylo)
    o.append('<text x="%d" y="%d" font-weight="bold">%s</text>' % (ml, top - 8, title))
    o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (ml, top + ph, w - mr, top + ph))
    o.append('<line x1="%d" y1="%d" x2="%d" y2="%d" stroke="black"/>' % (ml, top, ml, top + ph))
    o.append('<line x1="%d" y1="%.1f" x2="%d" y2="%.1f" stroke="#999" stroke-dasharray="4 3"/>' % (ml, Y(1), w - mr, Y(1)))
    for t in range(5):
        y = ylo + (yhi - ylo) * t / 4
        o.append('<text x="%d" y="%.1f" text-anchor="end">%.2f</text>' % (ml - 6, Y(y) + 4, y))
    o.append('<text x="%d" y="%d" text-anchor="middle">%s</text>' % ((ml + w - mr) // 2, top + ph + 34, xlabel))
    return Y


def lines_and_legend(o, curves, w, mr, top):
    """curves[s]: the polyline's points of system s; then the legend on the right."""
    for s, c in zip(SYSTEMS, COLORS):
        o.append('<polyline points="%s" fill="none" stroke="%s" stroke-width="2"/>' % (curves[s], c))
    for i, (s, c) in enumerate(zip(SYSTEMS, COLORS)):
        o.append('<rect x="%d" y="%d" width="12" height="12" fill="%s"/><text x="%d" y="%d">%s</text>'
                 % (w - mr + 12, top + 10 + 18 * i, c, w - mr + 30, top + 21 + 18 * i, s))


def svg_close(path, o):
    o.append("</svg>")
    with open(path, "w") as f:
        f.write("\n".join(o) + "\n")


def svg(path, rows, link_gbps, hbms):
    w, h, ml, mr, mt = 760, 300 * len(hbms) + 40, 70, 170, 30
    ph = 300 - 60
    xs = sorted(set(r["link_gbps"] for r in rows))
    xmax = max(xs) * 1.05
    X = lambda x: ml + (w - ml - mr) * x / xmax
    o = svg_open(w, h)
    for k, hbm in enumerate(hbms):
        sel = [r for r in rows if r["hbm_kv_gb"] == hbm]
        top = mt + k * 300
        ys = [r["speedup_vs_gpu_only"][s] for r in sel for s in SYSTEMS]
        Y = panel(o, "Speed-up over gpu_only (generated tokens/s), HBM for KV: %s"
                  % (("%g GB" % hbm) if hbm > 0 else "what the weights leave"),
                  "offload link, GB/s in all (devices x per-device)", w, ml, mr, top, ph,
                  min(ys + [1.0]) * 0.95, max(ys + [1.0]) * 1.05)
        for x in xs:
            o.append('<text x="%.1f" y="%d" text-anchor="middle">%g</text>' % (X(x), top + ph + 16, x))
        lines_and_legend(o, {s: " ".join("%.1f,%.1f" % (X(r["link_gbps"]), Y(r["speedup_vs_gpu_only"][s])) for r in sel)
                             for s in SYSTEMS}, w, mr, top)
    svg_close(path, o)


def svg_axes(path, axes):
    """One panel per --vary axis: each system's speed-up over gpu_only at each value (categorical x)."""
    w, ml, mr, mt, ph = 760, 70, 170, 30, 240
    o = svg_open(w, 300 * len(axes) + 40)
    for k, (axis, sel) in enumerate(axes):
        top = mt + k * 300
        ys = [r["speedup_vs_gpu_only"][s] for r in sel if "tps" in r for s in SYSTEMS if r["speedup_vs_gpu_only"][s]]
        X = lambda i: ml + (w - ml - mr) * (i + 0.5) / len(sel)
        Y = panel(o, "Speed-up over gpu_only (generated tokens/s) against %s" % axis, axis, w, ml, mr, top, ph,
                  min(ys + [1.0]) * 0.95, max(ys + [1.0]) * 1.05)
        for i, r in enumerate(sel):
            label = str(r["value"]) + ("" if "tps" in r else " (failed)")
            o.append('<text x="%.1f" y="%d" text-anchor="middle">%s</text>' % (X(i), top + ph + 16, label))
        lines_and_legend(o, {s: " ".join("%.1f,%.1f" % (X(i), Y(r["speedup_vs_gpu_only"][s])) for i, r in enumerate(sel)
                                         if "tps" in r and r["speedup_vs_gpu_only"][s]) for s in SYSTEMS}, w, mr, top)
    svg_close(path, o)


def fmt(v):
    return "%7s" % "-" if v is None else "%7.3f" % v


def main():
    argv = sys.argv[1:]
    extra = []
    if "--" in argv:
        extra = argv[argv.index("--") + 1:]
        argv = argv[:argv.index("--")]
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--speckv", default="build/release/cli/speckv")
    p.add_argument("--trace", default="data/traces/mooncake_fast25/conversation_trace.jsonl")
    p.add_argument("--max-requests", type=int, default=300)
    p.add_argument("--devices", default="1,2,4,8")
    p.add_argument("--hbm-kv-gb", default="0", help="comma list; 0 = what the weights leave")
    p.add_argument("--pool-gb", type=float, default=2048)
    p.add_argument("--out", required=True)
    p.add_argument("--vary", action="append", default=[], metavar="AXIS=V1,V2,...",
                   help="vary one factor around the base point (repeatable): link-latency-ns, time-scale, model, gpu, "
                        "link, context or another replay option")
    p.add_argument("--base-devices", type=int, default=4, help="link devices of the --vary points")
    p.add_argument("--base-hbm-kv-gb", type=float, default=40, help="HBM for KV of the --vary points (0 = what the weights leave)")
    p.add_argument("--context-requests", type=int, default=32, help="requests of a generated context trace")
    a = p.parse_args(argv)
    vary = []
    for v in a.vary:
        if "=" not in v or not v.split("=", 1)[1]:
            p.error("--vary wants AXIS=V1,V2,... (got %r)" % v)
        axis, vals = v.split("=", 1)
        if axis in ("devices", "hbm-kv-gb", "max-requests", "pool-gb", "json", "all", "system"):
            p.error("--vary %s: that axis is the grid's or the sweep's own option" % axis)
        if axis == "context" and not all(x.isdigit() and int(x) > 256 for x in vals.split(",")):
            p.error("--vary context wants token counts > 256")
        vary.append((axis, vals.split(",")))
    os.makedirs(a.out, exist_ok=True)
    devs = [int(x) for x in a.devices.split(",")]
    hbms = [float(x) for x in a.hbm_kv_gb.split(",")]
    rows = []
    for hbm in hbms:
        for d in devs:
            j = replay(a, d, hbm, extra)
            sy = j["systems"]
            tps = {s: sy[s]["throughput_tps"] for s in SYSTEMS}
            row = {"devices": d, "hbm_kv_gb": hbm, "tps": tps,
                   "speedup_vs_gpu_only": {s: tps[s] / tps["gpu_only"] for s in SYSTEMS},
                   "speedup_vs_host_offload": {s: tps[s] / tps["host_offload"] for s in SYSTEMS}}
            rows.append(row)
            print("hbm %-5s devices %d: %s" % (hbm or "-", d, "  ".join("%s %.1f" % (s, tps[s]) for s in SYSTEMS)), flush=True)
    # Per-device bandwidth of the link preset (from `speckv trace presets --json`).
    link = next((x for x in extra[extra.index("--link") + 1:extra.index("--link") + 2]), "cxl-direct") if "--link" in extra else "cxl-direct"
    pre = json.loads(subprocess.run([a.speckv, "trace", "presets", "--json"], capture_output=True, text=True).stdout)
    bw = next(l["bytes_per_s"] for l in pre["links"] if l["name"] == link) / 1e9
    for r in rows:
        r["link_gbps"] = r["devices"] * bw
    print("\nspeed-up over gpu_only / over host_offload (%d requests of %s, link %s, %g GB/s per device)"
          % (a.max_requests, os.path.basename(a.trace), link, bw))
    print("%-8s %-8s " % ("HBM GB", "link GB/s") + " ".join("%15s" % s for s in SYSTEMS))
    for r in rows:
        print("%-8s %-9g " % (r["hbm_kv_gb"] or "-", r["link_gbps"]) +
              " ".join("%7.3f/%-7.3f" % (r["speedup_vs_gpu_only"][s], r["speedup_vs_host_offload"][s]) for s in SYSTEMS))
    print("\nbreak-even (link GB/s where the speed-up crosses 1; none = same side over the whole range):")
    breaks = []
    for hbm in hbms:
        sel = [r for r in rows if r["hbm_kv_gb"] == hbm]
        xs = [r["link_gbps"] for r in sel]
        for s in SYSTEMS[1:]:
            for ref in ("gpu_only", "host_offload"):
                if s == ref:
                    continue
                ys = [r["speedup_vs_" + ref][s] for r in sel]
                c = crossings(xs, ys)
                side = "above" if all(y >= 1 for y in ys) else "below" if all(y <= 1 for y in ys) else "crosses"
                breaks.append({"hbm_kv_gb": hbm, "system": s, "over": ref, "crossings_gbps": c, "side": side,
                               "min": min(ys), "max": max(ys)})
                print("  HBM %-5s %-13s over %-12s %s (%.3f..%.3f)" % (hbm or "-", s, ref,
                      ", ".join("%.1f" % x for x in c) if c else "none: always " + side, min(ys), max(ys)))
    with open(os.path.join(a.out, "sweep.json"), "w") as f:
        json.dump({"trace": a.trace, "max_requests": a.max_requests, "link": link, "extra": extra, "rows": rows,
                   "break_even": breaks}, f, indent=1)
    svg(os.path.join(a.out, "speedup_vs_link.svg"), rows, bw, hbms)
    print("\nwrote %s and %s" % (os.path.join(a.out, "sweep.json"), os.path.join(a.out, "speedup_vs_link.svg")))
    if not vary:
        return
    axes = []
    for axis, vals in vary:
        print("\n%s, around %d devices (%g GB/s) and %s of HBM for KV: speed-up over gpu_only / over host_offload"
              % (axis, a.base_devices, a.base_devices * bw, ("%g GB" % a.base_hbm_kv_gb) if a.base_hbm_kv_gb > 0 else "all"))
        print("%-14s %9s " % (axis, "gpu_only") + " ".join("%15s" % s for s in SYSTEMS))
        sel = []
        for v in vals:
            if axis == "context":
                tr = os.path.join(a.out, "context-%s.trace" % v)
                context_trace(tr, int(v), a.context_requests)
                j = replay(a, a.base_devices, a.base_hbm_kv_gb, extra, trace=tr, soft=True)
            else:
                j = replay(a, a.base_devices, a.base_hbm_kv_gb, extra + ["--" + axis, v], soft=True)
            r = {"axis": axis, "value": v}
            if "error" in j:
                r["error"] = j["error"]
                print("%-14s failed: %s" % (v, j["error"][-300:]))
            else:
                tps = {s: j["systems"][s]["throughput_tps"] for s in SYSTEMS}
                r["tps"] = tps
                r["requests"] = j["systems"]["gpu_only"]["requests"]
                r["speedup_vs_gpu_only"], r["speedup_vs_host_offload"] = speedups(tps)
                r["prefetch_hit_rate"] = {s: j["systems"][s].get("prefetch_hit_rate") for s in SYSTEMS}
                print("%-14s %9.2f " % (v, tps["gpu_only"]) + " ".join(
                    "%s/%s" % (fmt(r["speedup_vs_gpu_only"][s]), fmt(r["speedup_vs_host_offload"][s]).strip().ljust(7))
                    for s in SYSTEMS), flush=True)
            sel.append(r)
        axes.append((axis, sel))
    with open(os.path.join(a.out, "sweep.json")) as f:
        d = json.load(f)
    d["vary"] = {"base_devices": a.base_devices, "base_hbm_kv_gb": a.base_hbm_kv_gb,
                 "context_requests": a.context_requests, "rows": [r for _, sel in axes for r in sel]}
    with open(os.path.join(a.out, "sweep.json"), "w") as f:
        json.dump(d, f, indent=1)
    svg_axes(os.path.join(a.out, "speedup_vs_factors.svg"), axes)
    print("\nwrote %s" % os.path.join(a.out, "speedup_vs_factors.svg"))


if __name__ == "__main__":
    main()
