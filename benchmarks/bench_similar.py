"""Similar-sentence generation with RoFormer-Sim: candidates per second, all `n` candidates of a text from one batched
`generate` call against one call per candidate (the original's loop samples one text at a time, and users asked for
"50 at once").

A random model of RoFormer-Sim small's size (6 layers, hidden 384, 6 heads, vocabulary 12,000: the released
`chinese_roformer-sim-char_L-6_H-384_A-6` shape) samples every candidate to a fixed length (`min_new_tokens` =
`max_new_tokens`), so both arms do the same work. The arms are run interleaved, `REPEATS` times each, and the medians
reported; ranking (encoding every candidate with the sentence encoder) is timed separately.

    python benchmarks/bench_similar.py [THREADS]     # CPU, 1 thread by default; writes results/similar_cpu.{json,md}

One thread by default: on a shared 2-core machine two threads spend most of their time waiting for each other at
every small operator (measured 6x slower per decoding step under a load average of 6).
"""

import os
import statistics
import sys
import time
from pathlib import Path

import torch


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import hf_roformer  # noqa: E402
from hf_roformer.apps.similar_sentences import generate_candidates, rank_candidates, sentence_encoder  # noqa: E402


SIZE = dict(vocab_size=12000, hidden_size=384, num_hidden_layers=6, num_attention_heads=6, intermediate_size=1536)
TEXTS = ["今天天气很好，我们去公园散步吧", "这家餐厅的菜味道不错", "明天上午九点在会议室开会", "他把书放在桌子上了"]
NEW_TOKENS = 16
REPEATS = 3
SCENARIOS = [(1, 20), (1, 50), (4, 20)]  # (texts, candidates per text)


def build() -> tuple[hf_roformer.HfRoFormerForCausalLM, hf_roformer.HfRoFormerTokenizer]:
    """A random RoFormer-Sim small and a char tokenizer whose vocabulary holds the characters of `TEXTS`."""
    torch.manual_seed(0)
    config = hf_roformer.HfRoFormerConfig(
        **SIZE, is_decoder=True, unilm=True, pooler_activation="linear", max_position_embeddings=512
    )
    model = hf_roformer.HfRoFormerForCausalLM(config).eval()
    model.generation_config.min_new_tokens = NEW_TOKENS
    specials = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    characters = list(dict.fromkeys("".join(TEXTS)))
    filler = [chr(code) for code in range(0x4E00, 0x9FFF) if chr(code) not in characters]
    tokens = (specials + characters + filler)[: SIZE["vocab_size"]]
    tokenizer = hf_roformer.HfRoFormerTokenizer({token: index for index, token in enumerate(tokens)}, word_level=False)
    return model, tokenizer


def seconds(function) -> float:
    start = time.perf_counter()
    function()
    return time.perf_counter() - start


def main() -> None:
    torch.set_num_threads(int(sys.argv[1]) if len(sys.argv) > 1 else 1)
    model, tokenizer = build()
    encoder = sentence_encoder(model)
    options = dict(max_new_tokens=NEW_TOKENS, do_sample=True, top_p=0.95)
    with torch.inference_mode():
        generate_candidates(model, tokenizer, TEXTS[:1], n=2, **options)  # warm-up
        results = []
        for text_count, n in SCENARIOS:
            texts = TEXTS[:text_count]
            batched, alone, ranking = [], [], []
            for _ in range(REPEATS):  # interleaved, so load changes hit both arms alike
                batched.append(seconds(lambda: generate_candidates(model, tokenizer, texts, n=n, **options)))  # noqa: B023
                alone.append(
                    seconds(
                        lambda: [
                            generate_candidates(model, tokenizer, [text], n=1, **options)
                            for text in texts  # noqa: B023
                            for _ in range(n)  # noqa: B023
                        ]
                    )
                )
                candidates = generate_candidates(model, tokenizer, texts, n=n, **options)
                ranking.append(seconds(lambda: rank_candidates(encoder, tokenizer, texts, candidates)))  # noqa: B023
            total = text_count * n
            row = {
                "texts": text_count,
                "candidates_per_text": n,
                "batched_s": statistics.median(batched),
                "one_at_a_time_s": statistics.median(alone),
                "ranking_s": statistics.median(ranking),
            }
            row["batched_candidates_per_s"] = total / row["batched_s"]
            row["one_at_a_time_candidates_per_s"] = total / row["one_at_a_time_s"]
            row["speedup"] = row["one_at_a_time_s"] / row["batched_s"]
            results.append(row)
            print(row, flush=True)
    payload = {
        "machine": benchlib.machine_info(torch.device("cpu")),
        "load_average_1min": os.getloadavg()[0],
        "size": SIZE,
        "new_tokens": NEW_TOKENS,
        "repeats": REPEATS,
        "results": results,
    }
    rows = [
        [
            f"{row['texts']} x {row['candidates_per_text']}",
            f"{row['batched_candidates_per_s']:.1f}",
            f"{row['one_at_a_time_candidates_per_s']:.1f}",
            f"{row['speedup']:.1f}x",
            f"{row['ranking_s'] * 1000:.0f} ms",
        ]
        for row in results
    ]
    machine = payload["machine"]
    markdown = (
        "# Similar-sentence generation with RoFormer-Sim (CPU)\n\n"
        f"{machine['cpu']}, {machine['torch_threads']} threads, torch {machine['torch']}, transformers "
        f"{machine['transformers']}, {machine['date']}; 1-minute load average {payload['load_average_1min']:.1f} "
        "(a shared 2-core machine: the ratios were measured interleaved in the same run). Random RoFormer-Sim small "
        f"({SIZE}); every candidate sampled to {NEW_TOKENS} tokens (top-p 0.95, KV cache, UniLM mask); median of "
        f"{REPEATS} interleaved runs.\n\n"
        + benchlib.markdown_table(
            [
                "texts x candidates",
                "batched (1 generate call), candidates/s",
                "one generate call per candidate, candidates/s",
                "speed-up",
                "ranking all candidates",
            ],
            rows,
        )
        + "\n`python benchmarks/bench_similar.py`\n"
    )
    for path in benchlib.write_results("similar_cpu", payload, markdown):
        print(path)


if __name__ == "__main__":
    main()
