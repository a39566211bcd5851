"""Host work per forward: hf_roformer vs transformers' BERT with SDPA, on a model small enough that Python and
operator dispatch are the whole cost (as they are on a GPU at short lengths).

    python benchmarks/bench_host_overhead.py            # 12 layers x width 64, batch 2 x 16 tokens, one thread

For each model and input (plain, padded, decoder step with a cache) it reports the best time per forward over
interleaved rounds, the number of aten operators dispatched, and the operators among them that force a
device-to-host synchronization on CUDA (counted on CPU with a `TorchDispatchMode`; `tests/test_host_syncs.py` asserts
the bound). Results: benchmarks/results/host_overhead_cpu.{json,md}.
"""

import argparse
import sys
import time
from pathlib import Path

import torch
import transformers


sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
import benchlib  # noqa: E402
from sync_counting import count_operators  # noqa: E402

import hf_roformer  # noqa: E402


SIZE = dict(
    vocab_size=1000,
    hidden_size=64,
    num_hidden_layers=12,
    num_attention_heads=4,
    intermediate_size=256,
    max_position_embeddings=64,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def build(kind: str, decoder: bool) -> torch.nn.Module:
    """A model of `kind` ("hf_roformer" or "bert_sdpa") of the benchmark size, in eval mode."""
    torch.manual_seed(0)
    if kind == "bert_sdpa":
        config = transformers.BertConfig(**SIZE, is_decoder=decoder, attn_implementation="sdpa")
        model = transformers.BertLMHeadModel(config) if decoder else transformers.BertModel(config)
    else:
        config = hf_roformer.HfRoFormerConfig(**SIZE, is_decoder=decoder, attn_implementation="sdpa")
        model = hf_roformer.HfRoFormerForCausalLM(config) if decoder else hf_roformer.HfRoFormerModel(config)
    return model.eval()


def inputs(case: str, batch: int, length: int) -> dict:
    """Model inputs of one benchmark case: "plain" (no mask), "padded" (the second row padded to half length)."""
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(1, SIZE["vocab_size"], (batch, length), generator=generator)
    if case == "plain":
        return {"input_ids": ids}
    mask = torch.ones_like(ids)
    mask[1:, length // 2 :] = 0
    return {"input_ids": ids, "attention_mask": mask}


def decode_step(model: torch.nn.Module, batch: int, length: int):
    """A callable running one cached decoding step after a `length`-token prompt (the cache is rebuilt each call
    from a prompt forward done once, then cropped back, so every call sees the same cache length)."""
    prompt = inputs("padded", batch, length)
    with torch.no_grad():
        cache = model(**prompt, use_cache=True).past_key_values
    token = torch.ones(batch, 1, dtype=torch.long)
    mask = torch.cat([prompt["attention_mask"], torch.ones(batch, 1, dtype=torch.long)], dim=1)

    def step():
        output = model(input_ids=token, attention_mask=mask, past_key_values=cache, use_cache=True)
        cache.crop(-1)
        return output

    return step


def forward_call(kind: str, case: str, batch: int, length: int):
    """The no-grad callable timed for one (model, case)."""
    model = build(kind, decoder=case == "decoder_step")
    if case == "decoder_step":
        call = decode_step(model, batch, length)
    else:
        batch_inputs = inputs(case, batch, length)

        def call():
            return model(**batch_inputs)

    def no_grad_call():
        with torch.no_grad():
            return call()

    return no_grad_call


def accelerator_operator_counts(call) -> dict:
    """Operators of one call as tensors on an accelerator dispatch them: the checks that read values on the host for
    CPU tensors take their device path (an asynchronous assertion), as `tests/test_host_syncs.py` counts them. Counted
    on the second call, as every later forward runs (the first also computes the rope frequencies it keeps)."""
    from hf_roformer.remote_code import modeling_hf_roformer

    reads = modeling_hf_roformer.reads_values_on_host
    modeling_hf_roformer.reads_values_on_host = lambda tensor: False
    try:
        call()
        return count_operators(call)
    finally:
        modeling_hf_roformer.reads_values_on_host = reads


def best_times(calls: dict, rounds: int, calls_per_round: int) -> dict:
    """Thread CPU seconds per call of each callable: the best of `rounds` rounds that interleave the callables (so
    drifting load hits all alike), each round timing `calls_per_round` calls."""
    best = {key: float("inf") for key in calls}
    for _ in range(rounds):
        for key, call in calls.items():
            start = time.thread_time()
            for _ in range(calls_per_round):
                call()
            best[key] = min(best[key], (time.thread_time() - start) / calls_per_round)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--batch", type=int, default=2)
    parser.add_argument("--length", type=int, default=16)
    parser.add_argument("--rounds", type=int, default=60)
    parser.add_argument("--calls", type=int, default=20, help="forwards per round")
    parser.add_argument("--passes", type=int, default=5, help="independent measurements; ratios are their median")
    args = parser.parse_args()
    torch.set_num_threads(1)
    transformers.logging.set_verbosity_error()

    cases = ("plain", "padded", "decoder_step")
    kinds = ("hf_roformer", "bert_sdpa")
    calls = {(kind, case): forward_call(kind, case, args.batch, args.length) for kind in kinds for case in cases}
    operators = {key: accelerator_operator_counts(call) for key, call in calls.items()}
    for call in calls.values():  # warm up
        for _ in range(5):
            call()
    passes = [best_times(calls, args.rounds, args.calls) for _ in range(args.passes)]
    best = {key: min(times[key] for times in passes) for key in calls}
    ratios = {
        case: sorted(times[("hf_roformer", case)] / times[("bert_sdpa", case)] for times in passes) for case in cases
    }

    rows, results = [], []
    for case in cases:
        ours, bert = best[("hf_roformer", case)], best[("bert_sdpa", case)]
        median = ratios[case][len(ratios[case]) // 2]
        our_ops, bert_ops = operators[("hf_roformer", case)], operators[("bert_sdpa", case)]
        results.append(
            {
                "case": case,
                "hf_roformer_us": ours * 1e6,
                "bert_sdpa_us": bert * 1e6,
                "time_ratio_median": median,
                "time_ratios": ratios[case],
                "hf_roformer_ops": our_ops["total"],
                "bert_sdpa_ops": bert_ops["total"],
                "hf_roformer_sync_ops": our_ops["syncs"],
                "bert_sdpa_sync_ops": bert_ops["syncs"],
            }
        )
        rows.append(
            [
                case,
                f"{ours * 1e6:.0f}",
                f"{bert * 1e6:.0f}",
                f"{median:.3f}x ({ratios[case][0]:.3f}-{ratios[case][-1]:.3f})",
                f"{our_ops['total']} / {bert_ops['total']}",
                f"{sum(our_ops['syncs'].values())} / {sum(bert_ops['syncs'].values())}",
            ]
        )
    info = benchlib.machine_info(torch.device("cpu"))
    payload = {"machine": info, "size": SIZE, "batch": args.batch, "length": args.length, "results": results}
    table = benchlib.markdown_table(
        [
            "input",
            "hf_roformer µs",
            "BERT-SDPA µs",
            "time ratio: median (range)",
            "aten ops hf / BERT",
            "sync-forcing ops hf / BERT",
        ],
        rows,
    )
    markdown = (
        f"# Host work per forward (CPU, one thread)\n\n{info}\n\n12 layers x width 64, batch {args.batch} x "
        f"{args.length} tokens. Each of {args.passes} passes takes, per model, the best of {args.rounds} interleaved "
        f"rounds of {args.calls} forwards (thread CPU time); µs: the best pass; ratio: the median of the passes' "
        f"ratios and their range.\n\n{table}"
    )
    benchlib.write_results("host_overhead_cpu", payload, markdown)
    print(markdown)


if __name__ == "__main__":
    main()
