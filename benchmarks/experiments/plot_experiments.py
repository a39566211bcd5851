"""Figures and tables of the pre-training experiments, from the logs in `benchmarks/results/experiments/`.

    python benchmarks/experiments/plot_experiments.py

writes docs/experiments/*.png and benchmarks/results/experiments/tables.md.
"""

import json

import matplotlib


matplotlib.use("Agg")
import matplotlib.pyplot as pyplot  # noqa: E402
from common import FIGURES, RESULTS  # noqa: E402


def curves(name: str) -> dict[str, list[tuple[int, float]]]:
    """Training loss, evaluation loss and evaluation accuracy of one run, as (step, value) lists."""
    record = json.loads((RESULTS / f"{name}.json").read_text())
    history = [entry for stage in record["stages"] for entry in stage["log_history"]]
    series = {"loss": [], "eval_loss": [], "eval_accuracy": []}
    for entry in history:
        for key in series:
            if key in entry:
                series[key].append((entry["step"], entry[key]))
    return series


def plot_pair(names: dict[str, str], title: str, output: str) -> None:
    """Training loss and held-out accuracy of two runs against steps, side by side."""
    figure, (loss_axes, accuracy_axes) = pyplot.subplots(1, 2, figsize=(11, 4))
    for name, label in names.items():
        series = curves(name)
        loss_axes.plot(*zip(*series["loss"], strict=True), label=f"{label} (train)", linewidth=1)
        loss_axes.plot(*zip(*series["eval_loss"], strict=True), "--", label=f"{label} (held out)", linewidth=1)
        accuracy_axes.plot(*zip(*series["eval_accuracy"], strict=True), label=label, linewidth=1.2)
    loss_axes.set(xlabel="step", ylabel="MLM loss", title=title)
    accuracy_axes.set(xlabel="step", ylabel="held-out masked-token accuracy", title=title)
    for axes in (loss_axes, accuracy_axes):
        axes.grid(alpha=0.3)
        axes.legend(fontsize=8)
    FIGURES.mkdir(parents=True, exist_ok=True)
    figure.tight_layout()
    figure.savefig(FIGURES / output, dpi=120)
    pyplot.close(figure)


def convergence_table(names: dict[str, str]) -> str:
    """Held-out accuracy and loss of each run at a few steps."""
    rows = []
    data = {label: curves(name) for name, label in names.items()}
    steps = sorted({step for step, _ in next(iter(data.values()))["eval_accuracy"]})  # the last step is logged twice
    shown = [step for step in steps if step in (100, 300, 500, 1000) or step == steps[-1]]
    for label, series in data.items():
        accuracy = dict(series["eval_accuracy"])
        loss = dict(series["eval_loss"])
        rows.append(f"| {label} | " + " | ".join(f"{accuracy[s]:.1%} / {loss[s]:.2f}" for s in shown) + " |")
    header = "| run | " + " | ".join(f"step {s}" for s in shown) + " |\n|---|" + "---|" * len(shown)
    return header + "\n" + "\n".join(rows) + "\n"


def plot_lengths() -> str:
    """Accuracy against evaluated length for each rope setting (and after continued pre-training); its table."""
    record = json.loads((RESULTS / "length_generalization.json").read_text())
    lengths = record["lengths"]
    figure, axes = pyplot.subplots(figsize=(7, 4.5))
    rows = []
    for name, scores in record["zero_shot"].items():
        values = [scores[str(length)]["accuracy"] for length in lengths]
        axes.plot(lengths, values, marker="o", label=f"{name} (trained at 128, no training)", linewidth=1)
        rows.append(f"| {name}, zero-shot | " + " | ".join(f"{value:.1%}" for value in values) + " |")
    continued = [record["continued_512_default"][str(length)]["accuracy"] for length in lengths]
    axes.plot(lengths, continued, marker="s", color="black", label="default, + 150 steps at 512", linewidth=1.5)
    rows.append("| default, + 150 steps at 512 | " + " | ".join(f"{value:.1%}" for value in continued) + " |")
    rows.append(f"| BERT (learned table of 128) | {record['bert_at_128']['accuracy']:.1%} |" + " — |" * 4)
    axes.set_xscale("log", base=2)
    axes.set_xticks(lengths, [str(length) for length in lengths])
    axes.set(xlabel="evaluated sequence length (tokens)", ylabel="held-out masked-token accuracy")
    axes.set_title("Length generalization of a RoFormer pre-trained at 128 tokens")
    axes.grid(alpha=0.3)
    axes.legend(fontsize=8)
    figure.tight_layout()
    figure.savefig(FIGURES / "length_generalization.png", dpi=120)
    pyplot.close(figure)
    header = "| model, rope | " + " | ".join(str(length) for length in lengths) + " |\n|---|" + "---|" * len(lengths)
    return header + "\n" + "\n".join(rows) + "\n"


def main() -> None:
    convergence = {"convergence_roformer": "RoFormer (RoPE)", "convergence_bert": "BERT (learned absolute)"}
    linear = {"linear_roformer": "linear attention + RoPE (eq. 19)", "linear_absolute": "linear attention, absolute"}
    plot_pair(convergence, "MLM pre-training, softmax attention", "convergence.png")
    plot_pair(linear, "MLM pre-training, linear attention", "linear_attention.png")
    tables = (
        "## Convergence (accuracy / loss on held-out text)\n\n" + convergence_table(convergence) + "\n"
        "## Linear attention (accuracy / loss on held-out text)\n\n" + convergence_table(linear) + "\n"
        "## Length generalization (held-out accuracy)\n\n" + plot_lengths()
    )
    (RESULTS / "tables.md").write_text(tables)
    print(tables)


if __name__ == "__main__":
    main()
