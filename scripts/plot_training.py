#!/usr/bin/env python3
"""Training curves of one or more runs from their train.jsonl logs (`ponder quick` calls this for its models):

    python3 scripts/plot_training.py OUT.png [LABEL=]RUN/train.jsonl ...

Three panels against the optimiser step: the training loss (nats/token, as logged every train.log_every steps, with
a running mean when there are many points), the validation bits/byte (every train.eval_every steps), and the carry
token factor of each TTT layer (relu(1/b + token_idx[b-1]) or softplus, logged with validation): where it reaches 0 a
layer's extra inner steps can no longer change any later output, which is worth seeing while it happens. A resumed
run's later lines win. Needs matplotlib (Debian python3-matplotlib; scripts/setup.sh installs it)."""
import json
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def read_log(path):
    steps, evals = {}, {}
    with open(path) as f:
        for n, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                j = json.loads(line)
            except ValueError:
                sys.exit("plot_training.py: %s line %d is not JSON" % (path, n))
            if j.get("type") != "step":
                continue
            steps[j["step"]] = j["loss"]
            if "val_bpb" in j:
                evals[j["step"]] = (j["val_bpb"], j.get("carry_token_factor", []))
    if not steps:
        sys.exit("plot_training.py: %s has no step lines" % path)
    return sorted(steps.items()), sorted(evals.items())


def running_mean(ys, width):
    out, acc = [], 0.0
    for i, y in enumerate(ys):
        acc += y
        if i >= width:
            acc -= ys[i - width]
        out.append(acc / min(i + 1, width))
    return out


def main(out, specs):
    runs = []
    for spec in specs:
        label, _, path = spec.rpartition("=")
        runs.append((label or os.path.basename(os.path.dirname(os.path.abspath(path))), read_log(path)))
    fig, axes = plt.subplots(1, 3, figsize=(15, 4.4))
    colours = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, (label, (steps, evals)) in enumerate(runs):
        c = colours[i % len(colours)]
        xs, ys = [s for s, _ in steps], [y for _, y in steps]
        width = max(1, len(ys) // 40)
        axes[0].plot(xs, running_mean(ys, width), color=c, lw=1.2, label=label)
        if evals:
            axes[1].plot([s for s, _ in evals], [v[0] for _, v in evals], "o-", color=c, ms=3, lw=1.2, label=label)
            layers = max(len(v[1]) for _, v in evals)
            for layer in range(layers):
                pts = [(s, v[1][layer]) for s, v in evals if layer < len(v[1])]
                axes[2].plot([p[0] for p in pts], [p[1] for p in pts], ["-", "--", ":", "-."][layer % 4], color=c,
                             lw=1.2, label="%s, layer %d" % (label, layer) if len(runs) <= 3 else
                             ("layer %d" % layer if i == 0 else None))
    axes[0].set_title("Training loss (nats/token%s)" % (", running mean" if any(
        len(r[1][0]) >= 80 for r in runs) else ""), fontsize=10)
    axes[1].set_title("Validation bits/byte", fontsize=10)
    axes[2].set_title("Carry token factor per TTT layer", fontsize=10)
    axes[2].set_ylabel("0: extra inner steps change nothing later", fontsize=9)
    axes[2].axhline(0, color="0.3", lw=0.8)
    for ax in axes:
        ax.set_xlabel("step")
        ax.grid(True, color="0.9")
    axes[0].legend(fontsize=8, loc="upper right")
    if any(ax.get_legend_handles_labels()[0] for ax in axes[2:]):
        axes[2].legend(fontsize=7, loc="best")
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    plt.close(fig)


if __name__ == "__main__":
    if len(sys.argv) < 3:
        sys.exit("usage: plot_training.py OUT.png [LABEL=]RUN/train.jsonl ...")
    main(sys.argv[1], sys.argv[2:])
