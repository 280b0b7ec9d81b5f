#!/usr/bin/env python3
"""Figures of a comparison from its results.json (ponder compare / quick write them by calling this script):

    python3 scripts/plot_compare.py DIR     # reads DIR/results.json, writes DIR/pareto.png and DIR/forest.png

pareto.png  bits/byte against total FLOPs per token: the uniform schedules' Pareto curve as a line, each method as a
            point with its paired 95% CI (the curve at the method's FLOPs + its distance to the curve), the oracle
            frontier; labels sit in a column beside the plot with leader lines, so they never overlap. A second panel
            zooms on the region around the budget, where the methods are.
forest.png  each method's distance to the uniform frontier at its own FLOPs with its 95% CI (over models and
            documents when several models were trained, else over documents); left of 0 = better than uniform.
Needs matplotlib (Debian python3-matplotlib; scripts/setup.sh installs it)."""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def mean(xs):
    return sum(xs) / len(xs)


def method_points(res):
    out = []
    for m in res["methods"]:
        out.append({"name": m["name"], "kind": m["kind"],
                    "flops": mean([s["total_flops_per_token"] for s in m["seeds"]]) / 1e6,
                    "bpb": mean([s["bpb"] for s in m["seeds"]]),
                    "frontier": m.get("frontier_delta")})
    return out


def uniform_curve(points):
    uni = sorted([p for p in points if p["kind"] == "uniform"], key=lambda p: p["flops"])
    curve = []
    for p in uni:
        if not curve or p["bpb"] < curve[-1]["bpb"]:
            curve.append(p)
    return uni, curve


def curve_at(curve, f):
    if f <= curve[0]["flops"]:
        return curve[0]["bpb"]
    if f >= curve[-1]["flops"]:
        return curve[-1]["bpb"]
    for a, b in zip(curve, curve[1:]):
        if a["flops"] <= f <= b["flops"]:
            w = (f - a["flops"]) / (b["flops"] - a["flops"])
            return (1 - w) * a["bpb"] + w * b["bpb"]
    return curve[-1]["bpb"]


def label_column(ax, items, x_text):
    """Labels in a column at x_text (axes fraction), spread so they do not overlap, each with a leader line."""
    items = sorted(items, key=lambda it: it[2])
    if not items:
        return
    ylo, yhi = ax.get_ylim()
    gap = (yhi - ylo) / max(len(items) + 1, 12)
    ys, last = [], None
    for _, _, y in items:
        y = max(y, last + gap) if last is not None else y
        ys.append(y)
        last = y
    shift = max(0.0, ys[-1] - (yhi - gap / 2))
    for (name, x, y), yl in zip(items, ys):
        ax.annotate(name, xy=(x, y), xytext=(x_text, yl - shift), textcoords=("axes fraction", "data"), fontsize=8,
                    va="center", arrowprops=dict(arrowstyle="-", color="0.6", lw=0.6))


def draw(ax, points, uni, curve, oracle, budget, zoom, budget_name="uniform-2"):
    """One panel; a method with a distance to the uniform curve is drawn at curve + distance (the paired estimate)."""
    ax.plot([p["flops"] for p in curve], [p["bpb"] for p in curve], "-", color="0.3", lw=1.5,
            label="uniform Pareto curve", zorder=1)
    ax.plot([p["flops"] for p in uni], [p["bpb"] for p in uni], "s", color="0.3", ms=5, zorder=2)
    if oracle:
        ax.plot([p["total_flops_per_token"] / 1e6 for p in oracle], [p["bpb"] for p in oracle], "o--", mfc="none",
                color="tab:green", ms=5, label="oracle frontier (uses the labels: an upper bound)", zorder=2)
    others = [p for p in points if p["kind"] not in ("uniform", "oracle")]
    for p in others:
        fd = p["frontier"]
        if fd and fd.get("ci") and None not in fd["ci"]:
            p["y"] = curve_at(curve, p["flops"]) + fd["mean"]
            ax.errorbar([p["flops"]], [p["y"]], yerr=[[fd["mean"] - fd["ci"][0]], [fd["ci"][1] - fd["mean"]]],
                        fmt="o", color="tab:blue", ms=5, capsize=3, zorder=3)
        else:
            p["y"] = p["bpb"]
            ax.plot([p["flops"]], [p["y"]], "o", color="tab:blue", ms=5, zorder=3)
    if budget:
        ax.axvline(budget, color="tab:red", lw=0.8, ls=":", label="budget (%s's FLOPs)" % budget_name)
    if zoom:
        xs = [p["flops"] for p in others] + ([budget] if budget else [])
        if not xs:  # uniform schedules and the oracle only: zoom on the cheapest uniform point
            xs = [min(p["flops"] for p in uni)]
        near = [p for p in uni if min(xs) * 0.9 <= p["flops"] <= max(xs) * 1.1]
        ys = [p["bpb"] for p in near] + [p["y"] for p in others]
        ys += [o["bpb"] for o in oracle if min(xs) * 0.9 <= o["total_flops_per_token"] / 1e6 <= max(xs) * 1.1]
        pad = (max(ys) - min(ys)) * 0.15 + 1e-3
        ax.set_xlim(min(xs + [p["flops"] for p in near]) * 0.98, max(xs + [p["flops"] for p in near]) * 1.02)
        ax.set_ylim(min(ys) - pad, max(ys) + pad)
    ax.grid(True, color="0.9")
    ax.set_xlabel("total MFLOPs per token (base + inner TTT + policy overhead)")
    ax.set_ylabel("bits per byte (lower is better)")
    xlo, xhi = ax.get_xlim()
    ylo, yhi = ax.get_ylim()
    # the overview labels the uniform schedules only; the methods are labelled in the zoomed panel
    visible = [(p["name"], p["flops"], p.get("y", p["bpb"])) for p in points
               if xlo <= p["flops"] <= xhi and ylo <= p.get("y", p["bpb"]) <= yhi and p["kind"] != "oracle"
               and (zoom or p["kind"] == "uniform")]
    label_column(ax, visible, 1.03)


def pareto(res, out):
    points = method_points(res)
    uni, curve = uniform_curve(points)
    if not curve:
        return
    oracle = res.get("oracle", {}).get("frontier", [])
    budget_name = ((res.get("oracle") or {}).get("headroom") or {}).get("budget", "uniform-2")
    budget = next((p["flops"] for p in points if p["name"] == budget_name), None)  # MFLOPs, as the points
    fig, axes = plt.subplots(1, 2, figsize=(13, 5.2), gridspec_kw={"wspace": 0.55})
    draw(axes[0], points, uni, curve, oracle, budget, zoom=False, budget_name=budget_name)
    axes[0].set_title("all schedules", fontsize=10)
    draw(axes[1], points, uni, curve, oracle, budget, zoom=True, budget_name=budget_name)
    axes[1].set_title("around the budget (bars: paired 95% CI vs the uniform curve)", fontsize=10)
    handles, labels = axes[1].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=3, fontsize=8, frameon=False)
    fig.suptitle("Bits per byte against compute (model 1; held-out %s)" %
                 ("streams" if res.get("streams") else "windows"), fontsize=11)
    fig.subplots_adjust(left=0.06, right=0.88, bottom=0.2, top=0.88)
    fig.savefig(out, dpi=110)
    plt.close(fig)


def forest(res, out):
    rows = []
    reps = res.get("replicates")
    if reps:
        for r in reps["methods"]:
            fd = r.get("frontier_delta", {})
            if fd.get("mean") is not None:
                rows.append((r["method"], fd["mean"], fd["ci"][0], fd["ci"][1]))
        where = "over %d models × documents" % reps["models"]
    else:
        for m in res["methods"]:
            fd = m.get("frontier_delta")
            if fd and fd.get("mean") is not None:
                rows.append((m["name"], fd["mean"], fd["ci"][0], fd["ci"][1]))
        where = "one model, over documents"
    if not rows:
        return
    rows.sort(key=lambda r: r[1])
    fig, ax = plt.subplots(figsize=(7.5, 0.45 * len(rows) + 1.6))
    for i, (name, m, lo, hi) in enumerate(rows):
        color = "tab:green" if hi < 0 else "tab:red" if lo > 0 else "0.4"
        ax.errorbar([m], [i], xerr=[[m - lo], [hi - m]], fmt="o", color=color, capsize=3)
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r[0] for r in rows], fontsize=9)
    ax.axvline(0, color="0.3", lw=0.8)
    ax.set_xlabel("Δ bits/byte vs the uniform frontier at the method's own FLOPs (negative: better)")
    ax.set_title("Distance to the uniform frontier, 95%% CI (%s)" % where, fontsize=10)
    ax.grid(True, axis="x", color="0.9")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


def main(directory):
    with open(os.path.join(directory, "results.json")) as f:
        res = json.load(f)
    if "methods" not in res:  # `ponder compare` over several models: the first model's numbers for the Pareto view
        first = os.path.join(directory, "model-1", "results.json")
        with open(first) as f:
            one = json.load(f)
        one["replicates"] = res.get("replicates")
        res = one
    pareto(res, os.path.join(directory, "pareto.png"))
    forest(res, os.path.join(directory, "forest.png"))


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: plot_compare.py DIR (with DIR/results.json)")
    main(sys.argv[1])
