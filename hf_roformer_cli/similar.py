"""`hf-roformer similar`: sentences similar to a text, generated and ranked by RoFormer-Sim (the `similar_sentences`
app)."""

import argparse

from .parsing import HelpFormatter, fraction, non_negative_int, option, positive_int


def add_parser(commands) -> None:
    """`similar` and its options."""
    parser = commands.add_parser(
        "similar",
        help="generate sentences similar to a text with RoFormer-Sim, ranked by similarity",
        description="Generate candidates after `[CLS] text [SEP]` under RoFormer-Sim's UniLM mask (one batched "
        "`generate` call) and rank them by the cosine similarity of their sentence vectors to the text's.",
        formatter_class=HelpFormatter,
    )
    parser.add_argument("texts", nargs="+", metavar="text", help="source sentence(s)")
    parser.add_argument(*option("model_name_or_path"), required=True, help="a converted RoFormer-Sim directory")
    parser.add_argument("-n", *option("num_candidates"), type=positive_int, default=20,
                        help="candidates generated per text (default: %(default)s)")  # fmt: skip
    parser.add_argument("-k", *option("num_results"), type=positive_int,
                        help="best candidates printed per text (default: all)")  # fmt: skip
    parser.add_argument(*option("top_p"), type=fraction, default=0.95,
                        help="nucleus sampling threshold (default: %(default)s)")  # fmt: skip
    parser.add_argument(*option("top_k"), type=positive_int, help="sample among the k likeliest tokens only")
    parser.add_argument(*option("max_new_tokens"), type=positive_int, default=64,
                        help="longest candidate in tokens (default: %(default)s)")  # fmt: skip
    parser.add_argument("--greedy", action="store_true", help="greedy decoding instead of sampling")
    parser.add_argument("--seed", type=non_negative_int, help="random seed, for repeatable candidates")
    parser.set_defaults(_run=run)


def run(args: argparse.Namespace, passed_through: list[str]) -> None:
    """Print the similar sentences of each text, best first, with their similarity."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from hf_roformer.apps.similar_sentences import generate_similar
    from hf_roformer.pretrained.sources import resolve_model_source
    from hf_roformer.utils.errors import UsageError

    source = resolve_model_source(args.model_name_or_path, "--model_name_or_path")
    if args.seed is not None:
        torch.manual_seed(args.seed)
    tokenizer = AutoTokenizer.from_pretrained(source.path, **source.load_kwargs)
    model = AutoModelForCausalLM.from_pretrained(source.path, **source.load_kwargs).eval()
    try:
        results = generate_similar(
            model, tokenizer, args.texts, n=args.num_candidates, k=args.num_results, do_sample=not args.greedy,
            top_p=args.top_p, top_k=args.top_k, max_new_tokens=args.max_new_tokens,
        )  # fmt: skip
    except ValueError as error:  # a model without a sentence encoder, or generation settings it refuses
        raise UsageError(f"--model_name_or_path {args.model_name_or_path}: {error}") from None
    for text, similar in zip(args.texts, results, strict=True):
        print(text)
        for sentence in similar:
            print(f"{sentence.similarity:.4f}\t{sentence.text}")


__all__ = ["add_parser", "run"]
