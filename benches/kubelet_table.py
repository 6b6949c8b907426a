#!/usr/bin/env python3
"""The summary table of benches/kubelet.sh: kubelet | picolet | ratio (picolet ÷ kubelet), the
median of each figure per agent and pod count, every value listed when there are several.

    python3 benches/kubelet_table.py OUT/results.tsv
"""
import statistics
import sys
from collections import OrderedDict

UNITS = {
    "binary": "B",
    "RSS": "kB",
    "PSS": "kB",
    "idle CPU": "% of a core",
    "idle wake-ups": "/s",
    "idle CRI calls": "/min",
    "idle bytes written": "B/hour",
    "containerd CPU while idle": "% of a core",
    "start": "s",
    "delete": "s",
    "all running after start": "s",
    "CRI calls per pod start": "calls/pod",
}


def unit(metric):
    for k, u in UNITS.items():
        if metric.startswith(k):
            return u
    return ""


def fmt(v):
    if v >= 1000:
        return f"{v:,.0f}"
    if v >= 100:
        return f"{v:.0f}"
    if v >= 10:
        return f"{v:.1f}"
    return f"{v:.3g}"


def main(path):
    rows = OrderedDict()
    loads = []
    for line in open(path, encoding="utf-8"):
        f = line.rstrip("\n").split("\t")
        if len(f) < 6:
            continue
        agent, pods, metric, value, _note, load = f[:6]
        loads.append(float(load.split()[0]))
        key = (metric, pods)
        rows.setdefault(key, {"kubelet": [], "picolet": []})
        try:
            rows[key][agent].append(float(value))
        except ValueError:
            rows[key][agent].append(value)
    print("| figure | pods | kubelet | picolet | picolet ÷ kubelet |")
    print("|---|---|---|---|---|")
    for (metric, pods), by in rows.items():
        cells = []
        med = {}
        for a in ("kubelet", "picolet"):
            vals = by[a]
            nums = [v for v in vals if isinstance(v, float)]
            if not vals:
                cells.append("—")
                continue
            if len(nums) != len(vals):
                cells.append(" ".join(str(v) for v in vals))
                continue
            med[a] = statistics.median(nums)
            c = fmt(med[a])
            if len(nums) > 1:
                c += " (" + ", ".join(fmt(v) for v in nums) + ")"
            cells.append(c)
        ratio = "—"
        if len(med) == 2 and med["kubelet"] != 0:
            ratio = f"×{med['picolet'] / med['kubelet']:.3g}"
        elif len(med) == 2 and med["picolet"] == 0:
            ratio = "0 = 0"
        print(f"| {metric} ({unit(metric)}) | {pods} | {cells[0]} | {cells[1]} | {ratio} |")
    if loads:
        print(f"\nload average (1 min) when the figures were taken: {min(loads)}–{max(loads)}")


if __name__ == "__main__":
    main(sys.argv[1])
