"""`generate` with the key/value cache gives what it gives without the cache — greedy, beam search and seeded
sampling; plain decoders, left-padded batches, prompts as embeddings, dynamic NTK, UniLM (RoFormer-Sim), the bare
tied head, and transformers' RoFormer checkpoints through the opt-in routing — on the installed transformers release
(CI runs the oldest supported and the newest): the release that renamed the cache argument (5.24) made cached
decoding silently decode each step without its past."""

import itertools
import json

import pytest
import torch
import transformers
from conftest import TINY, tiny_config, tiny_reference_config

import hf_roformer
from hf_roformer.remote_code.releases_hf_roformer import CACHE_FIELD, LEGACY_CACHE_ARGUMENT


pytestmark = [  # see setup.cfg
    pytest.mark.releases("remote_code.modeling_hf_roformer"),
]


STRATEGIES = {
    "greedy": dict(do_sample=False),
    "beam": dict(do_sample=False, num_beams=3, num_return_sequences=2),
    "sample": dict(do_sample=True, top_k=20),
}
DYNAMIC_NTK = {"rope_type": "dynamic", "factor": 4.0, "original_max_position_embeddings": 8}


def decoder(**overrides) -> hf_roformer.HfRoFormerForCausalLM:
    torch.manual_seed(0)
    return hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True, initializer_range=0.2, **overrides)).eval()


MODELS = {
    "plain": lambda: decoder(),
    "rotary_value": lambda: decoder(rotary_value=True),
    "dynamic_ntk": lambda: decoder(rope_parameters=DYNAMIC_NTK, max_position_embeddings=8),
    "unilm": lambda: decoder(unilm=True),
    "bare_tied_head": lambda: decoder(lm_head_transform=False),
    "eager": lambda: decoder(attn_implementation="eager"),
}


def record_cache_lengths(model) -> list[int]:
    """The cached length the model was handed at each forward call, appended to the returned list."""
    lengths = []

    def record(module, args, kwargs):
        cache = kwargs.get(CACHE_FIELD, kwargs.get(LEGACY_CACHE_ARGUMENT))
        lengths.append(0 if cache is None else cache.get_seq_length())

    model.register_forward_pre_hook(record, with_kwargs=True)
    return lengths


def assert_cached_equals_uncached(model, strategy: str, steps: int = 6, **inputs) -> None:
    """`generate` with and without the cache: the same sequences, the same scores of every step (and beam scores);
    the cached run really decodes from its cache (each step after the first is handed the tokens before it)."""
    lengths = record_cache_lengths(model)
    runs = {}
    for use_cache in (True, False):
        lengths.clear()
        torch.manual_seed(1)
        runs[use_cache] = model.generate(
            **inputs, max_new_tokens=steps, min_new_tokens=steps, use_cache=use_cache, pad_token_id=0,
            return_dict_in_generate=True, output_scores=True, **STRATEGIES[strategy],
        )  # fmt: skip
        if use_cache:
            assert lengths[0] == 0 and all(later > 0 for later in lengths[1:]), lengths
            assert lengths == sorted(lengths) and len(lengths) == steps, lengths
    cached, uncached = runs[True], runs[False]
    assert torch.equal(cached.sequences, uncached.sequences)
    for step, (with_cache, without) in enumerate(zip(cached.scores, uncached.scores, strict=True)):
        torch.testing.assert_close(with_cache, without, atol=1e-5, rtol=0, msg=lambda m, step=step: f"step {step}: {m}")
    if strategy == "beam":
        torch.testing.assert_close(cached.sequences_scores, uncached.sequences_scores, atol=1e-5, rtol=0)


def left_padded_prompts() -> dict:
    """Two prompts of 5 and 3 tokens, the shorter left-padded (as `generate` wants a batch)."""
    input_ids = torch.tensor([[5, 6, 7, 8, 9], [0, 0, 11, 12, 13]])
    return {"input_ids": input_ids, "attention_mask": (input_ids != 0).long()}


@pytest.mark.parametrize("strategy", list(STRATEGIES))
@pytest.mark.parametrize("name", list(MODELS))
def test_cached_generation_equals_uncached(name, strategy):
    model = MODELS[name]()
    assert_cached_equals_uncached(model, strategy, input_ids=torch.tensor([[3, 14, 15, 92, 65]]))


@pytest.mark.parametrize("strategy", list(STRATEGIES))
@pytest.mark.parametrize("name", ["plain", "dynamic_ntk", "unilm"])
def test_cached_generation_of_a_left_padded_batch_equals_uncached(name, strategy):
    assert_cached_equals_uncached(MODELS[name](), strategy, **left_padded_prompts())


def test_cached_generation_from_prompt_embeddings_equals_uncached():
    model = decoder()
    prompts = left_padded_prompts()
    embeds = model.get_input_embeddings()(prompts["input_ids"]).detach()
    assert_cached_equals_uncached(model, "greedy", inputs_embeds=embeds, attention_mask=prompts["attention_mask"])


ROFORMER_CHECKPOINTS = {
    "plain": {},
    "embedding_size": dict(embedding_size=16),
    "rotary_value": dict(rotary_value=True),
    "untied_head": dict(tie_word_embeddings=False),
}


@pytest.mark.parametrize("strategy", ["greedy", "beam"])
@pytest.mark.parametrize("name", list(ROFORMER_CHECKPOINTS))
def test_routed_roformer_checkpoints_generate_with_the_cache_as_without(tmp_path, name, strategy):
    """transformers' `roformer` decoders loaded through the Auto classes after `use_for_roformer_checkpoints()`."""
    torch.manual_seed(0)
    config = tiny_reference_config(is_decoder=True, initializer_range=0.2, **ROFORMER_CHECKPOINTS[name])
    transformers.RoFormerForCausalLM(config).save_pretrained(tmp_path)
    hf_roformer.use_for_roformer_checkpoints()
    try:
        model = transformers.AutoModelForCausalLM.from_pretrained(tmp_path).eval()
    finally:
        hf_roformer.use_for_roformer_checkpoints(False)
    assert type(model) is hf_roformer.HfRoFormerForCausalLM
    assert_cached_equals_uncached(model, strategy, **left_padded_prompts())


def test_either_cache_name_is_accepted_and_not_both():
    """A step fed the cache as `cache` (transformers 5.24's name) or `past_key_values` (5.17-5.23's) continues the
    same sequence; both at once is refused."""
    model = decoder()
    input_ids = torch.randint(1, TINY["vocab_size"], (2, 10))
    with torch.no_grad():
        full = model(input_ids, use_cache=False).logits
        for name in ("cache", "past_key_values"):
            first = model(input_ids[:, :6], use_cache=True)
            rest = model(input_ids[:, 6:], use_cache=True, **{name: getattr(first, CACHE_FIELD)})
            torch.testing.assert_close(rest.logits, full[:, 6:], atol=1e-5, rtol=0)
        cache = getattr(model(input_ids[:, :6], use_cache=True), CACHE_FIELD)
        with pytest.raises(ValueError, match="Pass the key/value cache once"):
            model(input_ids[:, 6:], cache=cache, past_key_values=cache)


def test_trainer_leaves_the_cache_out_of_evaluation_logits():
    """The config names the output field the cache is in on this release, which the Trainer drops from logits."""
    assert hf_roformer.HfRoFormerConfig.keys_to_ignore_at_inference == [CACHE_FIELD]
    model = decoder()
    output = model(torch.tensor([[1, 2, 3]]), use_cache=True)
    assert CACHE_FIELD in output.keys()


SIMILAR_GOLDEN = """\
今天天气很好
1.0000	东四天中夏试！北的天20
1.0000	年不气一是，左气a的明大
1.0000	火左上九雪人前我了春明日
我们在北京测试roformer！
1.0000	星明在们三前hello九十气日
1.0000	人们九东东北十九的ro测
1.0000	上很秋们s大年右不月九二
"""


def equal_scores_in_text_order(printed: str) -> list[str]:
    """`similar`'s output lines with each run of paraphrases that print the same score put in text order: the
    fixture's random encoder scores every paraphrase at 1.0000, and the order of such ties is float noise that differs
    between CPUs (seen on two AMD EPYC machines), not a property of the generation this test checks."""
    printed_score = lambda line: line.split("\t")[0] if "\t" in line else None  # noqa: E731
    lines = []
    for score, run in itertools.groupby(printed.splitlines(), key=printed_score):
        group = list(run)
        lines += sorted(group) if score is not None else group
    return lines


def test_similar_gives_the_same_paraphrases_on_every_release(tmp_path, capsys):
    """`hf-roformer similar` (sampled, seed 0) on the converted RoFormer-Sim fixture prints what it printed on
    transformers 5.23, where cached UniLM generation was checked against bert4keras, on every release."""
    from test_similar_sentences import ERA, FIXTURES

    from hf_roformer.conversion.convert import convert_tf_checkpoint
    from hf_roformer_cli import main

    output = tmp_path / "sim"
    convert_tf_checkpoint(FIXTURES / ERA / "sim", output, family="sim", layer_norm_eps=1e-7)
    assert json.loads((output / "config.json").read_text())["unilm"] is True
    capsys.readouterr()
    texts = ["今天天气很好", "我们在北京测试roformer！"]
    main(["similar", *texts, "-n", "6", "-k", "3", "--model_name_or_path", str(output), "--seed", "0",
          "--max_new_tokens", "12"])  # fmt: skip
    printed = capsys.readouterr().out
    assert equal_scores_in_text_order(printed) == equal_scores_in_text_order(SIMILAR_GOLDEN), printed
