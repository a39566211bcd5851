"""Print the Markdown table of the released RoFormer checkpoints (`conversion/checkpoints.md`)."""

from hf_roformer.conversion.families import RELEASED


def main() -> None:
    print("# Released RoFormer checkpoints\n")
    print("| file | family | layers x hidden (heads) | vocab | tokenizer | heads | TF variables |")
    print("|---|---|---|---|---|---|---|")
    for c in RELEASED:
        size = f"{c.layers} x {c.hidden} ({c.heads})"
        heads = ", ".join(c.heads_classes)
        print(f"| {c.file} | {c.family} | {size} | {c.vocab_size} | {c.tokenizer} | {heads} | {c.expected_variables} |")
    print(
        "\nTF variable counts follow the family layouts (v1 and GPT without a pooler, Sim with its linear pooler, "
        "V2: 2 embeddings + 6 kernels per layer); a v1 checkpoint with a pooler converts too, with the pooler."
    )


if __name__ == "__main__":
    main()
