"""Cost of exact caching for length-dependent rope types (dynamic NTK), against a static type (linear).

Static rope types cache rotated keys. Length-dependent types cache keys unrotated and rotate them at every step with
the current frequencies (exact, O(cached length) extra work per step), and a prompt longer than the original length is
encoded with per-query frequencies (exact, chunked eager attention instead of SDPA). This measures both costs.

    python benchmarks/bench_rope_cache.py      # CPU, 2 threads; writes results/rope_cache_cpu.{json,md}
"""

import sys
import time
from pathlib import Path

import torch


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402

import hf_roformer  # noqa: E402


ORIGINAL = 512
SIZE = dict(vocab_size=1000, hidden_size=256, num_hidden_layers=4, num_attention_heads=4, intermediate_size=1024)
ROPES = {
    "default": {"rope_type": "default"},
    "linear": {"rope_type": "linear", "factor": 4.0},
    "dynamic": {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": ORIGINAL},
}


def build(rope: str) -> hf_roformer.HfRoFormerForCausalLM:
    torch.manual_seed(0)
    config = hf_roformer.HfRoFormerConfig(
        **SIZE, is_decoder=True, max_position_embeddings=ORIGINAL, rope_parameters=ROPES[rope]
    )
    return hf_roformer.HfRoFormerForCausalLM(config).eval()


def generation_rate(model, prompt_length: int, new_tokens: int, batch: int = 1) -> float:
    """Decoding tokens/s (per sequence) after a prompt, with the cache; left-padded prompts when batch > 1."""
    input_ids = torch.randint(1, 1000, (batch, prompt_length))
    attention_mask = torch.ones_like(input_ids)
    for row in range(1, batch):  # different real lengths: each row has its own frequencies past the original length
        attention_mask[row, : 17 * row] = 0
    arguments = dict(max_new_tokens=new_tokens, min_new_tokens=new_tokens, do_sample=False, pad_token_id=0)
    with torch.inference_mode():
        start = time.perf_counter()
        model.generate(input_ids, attention_mask=attention_mask, max_length=None, **{**arguments, "max_new_tokens": 1})
        prefill = time.perf_counter() - start
        start = time.perf_counter()
        model.generate(input_ids, attention_mask=attention_mask, **arguments)
        total = time.perf_counter() - start
    return new_tokens / max(total - prefill, 1e-9)


def prefill_seconds(model, length: int) -> float:
    """Seconds for one forward over a prompt of `length` tokens (median of 3)."""
    input_ids = torch.randint(1, 1000, (1, length))
    with torch.inference_mode():
        return benchlib.time_call(lambda: model(input_ids, use_cache=True), torch.device("cpu"), 3, 1)["median_s"]


def main() -> None:
    torch.set_num_threads(2)
    models = {rope: build(rope) for rope in ROPES}
    results = {"decode_tokens_per_s": {}, "prefill_seconds": {}}
    for scenario, (prompt, new, batch) in {
        "1 x (256 -> 1280), crosses L": (256, 1024, 1),
        "4 x (600 -> 856), left-padded, past L": (600, 256, 4),
    }.items():
        results["decode_tokens_per_s"][scenario] = {
            rope: generation_rate(m, prompt, new, batch) for rope, m in models.items()
        }
        print(scenario, results["decode_tokens_per_s"][scenario], flush=True)
    for length in (512, 1024, 2048):
        results["prefill_seconds"][str(length)] = {rope: prefill_seconds(m, length) for rope, m in models.items()}
        print(length, results["prefill_seconds"][str(length)], flush=True)
    payload = {
        "machine": benchlib.machine_info(torch.device("cpu")),
        "size": SIZE,
        "original_length": ORIGINAL,
        "ropes": ROPES,
        "results": results,
    }
    rows = [
        [scenario] + [f"{rate[rope]:,.1f}" for rope in ROPES] + [f"{rate['dynamic'] / rate['linear']:.2f}x"]
        for scenario, rate in results["decode_tokens_per_s"].items()
    ]
    prefill_rows = [
        [length] + [f"{seconds[rope]:.3f}" for rope in ROPES] + [f"{seconds['dynamic'] / seconds['linear']:.2f}x"]
        for length, seconds in results["prefill_seconds"].items()
    ]
    machine = payload["machine"]
    markdown = (
        "# Exact caching for length-dependent rope types (CPU)\n\n"
        f"{machine['cpu']}, {machine['torch_threads']} threads, torch {machine['torch']}, transformers "
        f"{machine['transformers']}, {machine['date']}. Causal LM {SIZE}, original length L = {ORIGINAL}, factor 4.\n\n"
        "## Decoding throughput (tokens/s per sequence, greedy, KV cache)\n\n"
        + benchlib.markdown_table(["scenario", *ROPES, "dynamic / linear"], rows)
        + "\n## Prompt encoding (seconds, one forward)\n\n"
        + benchlib.markdown_table(["prompt tokens", *ROPES, "dynamic / linear"], prefill_rows)
    )
    for path in benchlib.write_results("rope_cache_cpu", payload, markdown):
        print(path)


if __name__ == "__main__":
    main()
