"""Seeded fuzz of the configuration, as a user's mistakes would come: single-field and rope-parameter mutations,
random combinations, malformed `config.json` files, overrides in `from_pretrained` and assignments after
construction.

Every case must end in one of two ways:

- rejected with a `ValueError` or `TypeError` whose message names the offending field (or rope key, or file);
- accepted, and then a tiny model built from the config runs a forward whose outputs are all finite, and the config
  survives a `to_dict` / `from_dict` round trip.

Anything else (another exception class, an error naming nothing the case changed, an accepted config that fails
later or gives NaN/inf) is a failure. The default budget runs in the normal suite; a larger one, with the counts
printed as JSON, runs with `python tests/test_config_fuzz.py --scale 10`.
"""

import argparse
import json
import random
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch
from transformers.activations import ACT2FN

import hf_roformer
from hf_roformer import HfRoFormerConfig
from hf_roformer.remote_code.config_rules_hf_roformer import FIELD_RULES, FLOAT32_TINY, ROPE_TYPE_RULES, is_integer
from hf_roformer.remote_code.releases_hf_roformer import CACHE_FIELD


SEED = 17
CASES = 2400

# A tiny architecture every case starts from (head dim 8): models build and run in milliseconds.
TINY = dict(
    vocab_size=32,
    hidden_size=16,
    num_hidden_layers=1,
    num_attention_heads=2,
    intermediate_size=12,
    max_position_embeddings=8,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)
# Architectures the mutations are applied to.
BASES = [
    {},
    {"is_decoder": True},
    {"norm_type": "rms_norm", "use_bias": False, "hidden_act": "relu", "layer_norm_eps": 1e-7},
    {"attention_type": "linear"},
    {"attention_type": "linear", "is_decoder": True},
    {"is_decoder": True, "unilm": True, "pooler_activation": "linear"},
    {"is_decoder": True, "add_cross_attention": True},
    {"embedding_size": 8, "pooler_activation": "tanh", "classifier_pooling": "mean"},
    {"rope_parameters": {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 4}},
]

NAN, INF = float("nan"), float("inf")
# Values a user might put anywhere by mistake.
ANY_VALUES = [None, True, False, 0, -1, 1, 2, 3, 0.0, -0.5, 0.5, 1.0, 1.5, NAN, INF, -INF, 1e-300, 1e30]
ANY_VALUES += ["", "abc", "1", "0.1", "true", [], [1], [1.0, "a"], {}, {"a": 1}]

# Values near what each field accepts, valid ones and near misses, mixed with `ANY_VALUES` (sizes stay small so
# models stay tiny).
VALID_VALUES = {
    "vocab_size": [8, 32, 64],
    "embedding_size": [None, 4, 8, 16, 24],
    "hidden_size": [8, 12, 16, 24, 32],
    "num_hidden_layers": [1, 2],
    "num_attention_heads": [1, 2, 3, 4],
    "intermediate_size": [1, 4, 33],
    "hidden_act": sorted(ACT2FN),
    # Integers where floats are expected are valid (JSON writers write 0 for 0.0); lengths stay below 2**63.
    "hidden_dropout_prob": [0, 0.1, 1.0, 1],
    "attention_probs_dropout_prob": [0, 0.1, 1.0, 1],
    "max_position_embeddings": [1, 4, 16, 10**9, 2**63 - 1, 2**63],
    "type_vocab_size": [1, 2, 3],
    "initializer_range": [0.0, 0.02, 1.0, 0, 1, 2, 10**400],
    "layer_norm_eps": [1e-12, 1e-5, 1.0, 1e30, FLOAT32_TINY, FLOAT32_TINY / 2, 1, 0],
    "pad_token_id": [None, 0, 5, 31, 32],
    "bos_token_id": [None, 0, 31, 32],
    "eos_token_id": [None, 1, [1, 2], [31, 32], [True]],
    "rope_parameters": [None, {"rope_type": "default", "rope_theta": 500.0}, {"rope_type": "linear", "factor": 2.0}],
    "attention_type": ["softmax", "linear", "performer"],
    "linear_feature_map": ["elu", "relu", "softmax", "gelu"],
    "linear_rotation_order": ["after_feature_map", "before_feature_map", "eq19"],
    "linear_attention_eps": [1e-6, FLOAT32_TINY, 1e30, 1],
    "linear_chunk_size": [1, 2, 64],
    "classifier_pooling": ["cls", "mean", "max"],
    "norm_type": ["layer_norm", "rms_norm", "scale_norm"],
    "pooler_activation": [None, "tanh", "linear", "relu"],
    "padding_free": ["auto", "always", "never", "sometimes"],
    "lm_head_layer_norm_eps": [None, 1e-12, 1e-7, 1],
    "chunk_size_feed_forward": [0, 1, 2, 5],
    "dtype": [None, "float32", "bfloat16", torch.float16, "float", "int8", torch.int64, "int8x"],
    "problem_type": [None, "regression", "single_label_classification", "multi_label_classification", "ranking"],
    "num_labels": [1, 2, 5],
    "id2label": [{0: "a", 1: "b"}, {"0": "a"}, {"x": "a"}, {0: 1}],
    "label2id": [{"a": 0}, {0: "a"}],
    "architectures": [["HfRoFormerForMaskedLM"], [1]],
    "transformers_version": ["5.0.0"],
    "is_encoder_decoder": [False],
}
BOOLEAN_FIELDS = [name for name, rule in FIELD_RULES.items() if rule.types in {(bool,), (bool, type(None))}]
# Keys that are not fields but reach the config from a `config.json` or keyword arguments.
EXTRA_KEYS = {
    "head_dim": [8, 3, "8"],
    "to_dict": [1],
    "use_return_dict": [True],
    "rope_scaling": [{"type": "linear", "factor": 2.0}, {"rope_type": "ntk", "factor": 0.5}, [1], "linear"],
    "rope_theta": [500.0, 1.0, -1.0, "1e4", None, 10000, 10**400],
    "output_attentions": [True, False],
    "some_unknown_key": [1, None],
}

# Valid `rope_parameters` of each type for head dimension `d`.
ROPE_EXAMPLES: dict[str, Callable[[int], dict]] = {
    "default": lambda d: {"rope_type": "default", "rope_theta": 10000.0},
    "linear": lambda d: {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0},
    "ntk": lambda d: {"rope_type": "ntk", "rope_theta": 10000.0, "factor": 4.0},
    "dynamic": lambda d: {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4},
    "yarn": lambda d: {
        "rope_type": "yarn",
        "factor": 4.0,
        "original_max_position_embeddings": 4,
        "beta_fast": 32.0,
        "beta_slow": 1.0,
        "mscale": 1.0,
        "mscale_all_dim": 0.5,
        "truncate": False,
    },
    "longrope": lambda d: {
        "rope_type": "longrope",
        "short_factor": [1.0] * (d // 2),
        "long_factor": [2.0] * (d // 2),
        "original_max_position_embeddings": 4,
        "factor": 2.0,
    },
    "llama3": lambda d: {
        "rope_type": "llama3",
        "factor": 8.0,
        "low_freq_factor": 1.0,
        "high_freq_factor": 4.0,
        "original_max_position_embeddings": 4,
    },
    "proportional": lambda d: {"rope_type": "proportional", "partial_rotary_factor": 0.5, "factor": 1.0},
}
ROPE_KEYS = sorted({key for example in ROPE_EXAMPLES.values() for key in example(8)} | {"partial_rotary_factor"})
ROPE_KEYS += ["attention_factor", "type", "unknown_key"]
ROPE_VALUES = ANY_VALUES + [0.99, 4.0, 8, 32, 1e6, 1e300, 10.0, 11.0, "yarn", "su", *ROPE_EXAMPLES]
ROPE_VALUES += [[1.0] * 4, [0.0] * 4, [1e-300] * 4, [1e39] * 4, [1.0] * 3, [1, "a", 1, 1], [1, 2, 1, 2]]
# Values that overflow inside transformers' rope code or torch (YaRN's ln(L / (2 pi beta)), int64 positions, floats).
ROPE_VALUES += [1e308, 5e-324, 1e-100, 1e100, 2**63 - 1, 2**63, 10**30, 10**400]
# Head sizes (hidden_size, num_attention_heads) that stress the rope types: head dim 2, 4, 6 and odd.
HEAD_SHAPES = [(4, 2), (8, 2), (12, 2), (6, 2), (16, 2)]


@dataclass
class Case:
    """One fuzz case: `make(folder)` returns a config (or raises); an error must name one of `names`."""

    kind: str
    description: str
    names: tuple[str, ...]
    make: Callable[[Path], HfRoFormerConfig]


def pick_base(rng: random.Random) -> dict:
    return {**TINY, **json.loads(json.dumps(rng.choice(BASES)))}


def field_value(rng: random.Random, name: str):
    """A valid value of the field half the time, anything a user might write otherwise."""
    valid = VALID_VALUES.get(name) or EXTRA_KEYS.get(name) or ([True, False] if name in BOOLEAN_FIELDS else [])
    if valid and rng.random() < 0.5:
        return rng.choice(valid)
    return rng.choice(ANY_VALUES)


def names_for(name: str) -> tuple[str, ...]:
    """What an error about `name` may name: the legacy rope keys are converted into `rope_parameters` first."""
    return (name, "rope_parameters") if name in ("rope_scaling", "rope_theta") else (name,)


def single_field_case(rng: random.Random) -> Case:
    name = rng.choice([*FIELD_RULES, *EXTRA_KEYS])
    value = field_value(rng, name)
    base = pick_base(rng)
    overrides = {**base, name: value}
    return Case("field", f"{name}={value!r} on {base}", names_for(name), lambda folder: HfRoFormerConfig(**overrides))


def mutated_rope(rng: random.Random) -> tuple[dict, tuple[str, ...]]:
    """Config fields with a valid `rope_parameters` of a random type, then zero to two keys changed or removed, on a
    head shape that stresses the type; and the names an error may give."""
    hidden_size, heads = rng.choice(HEAD_SHAPES)
    rope_type = rng.choice(list(ROPE_EXAMPLES))
    parameters = ROPE_EXAMPLES[rope_type](hidden_size // heads)
    changed = []
    for _ in range(rng.choice([0, 1, 1, 1, 2])):
        key = rng.choice(ROPE_KEYS)
        changed.append(key)
        if key in parameters and rng.random() < 0.2:
            del parameters[key]
        else:
            parameters[key] = rng.choice(ROPE_VALUES)
    if rng.random() < 0.1:
        parameters["attention_factor"] = rng.choice([0.5, 1.0, 9.9, 10.5, 0.0])
        changed.append("attention_factor")
    fields = {**pick_base(rng), "hidden_size": hidden_size, "num_attention_heads": heads, "rope_parameters": parameters}
    # An error names a changed key, the head dimension, or the type (its own rules, or linear attention's).
    names = ("head dimension", "`rope_parameters['rope_type']`", *(f"['{key}']" for key in changed))
    return fields, names + (("rope_type",) if "rope_type" in changed else ())


def rope_case(rng: random.Random) -> Case:
    fields, names = mutated_rope(rng)
    return Case("rope", f"{fields}", names, lambda folder: HfRoFormerConfig(**fields))


def combination_case(rng: random.Random) -> Case:
    base = pick_base(rng)
    names = rng.sample(sorted(VALID_VALUES), rng.randint(2, 4))
    changes = {name: rng.choice(VALID_VALUES[name]) for name in names}
    overrides = {**base, **changes}
    return Case("combination", f"{changes} on {base}", tuple(names), lambda folder: HfRoFormerConfig(**overrides))


def json_case(rng: random.Random) -> Case:
    """A `config.json` as a user or another tool might leave it: not JSON, not an object, or an object with a bad
    or unexpected value."""
    roll = rng.random()
    if roll < 0.3:
        text = rng.choice(["[1, 2]", '"hf_roformer"', "5", "null", "true", "{bad json", "", '{"a": }', "[]"])
        names: tuple[str, ...] = ("config.json",)
    else:
        model_type = rng.choice(["hf_roformer", "hf_roformer", "roformer"])
        if rng.random() < 0.25:
            content, names = mutated_rope(rng)
        else:
            name = rng.choice([*FIELD_RULES, *EXTRA_KEYS])
            content, names = {**pick_base(rng), name: field_value(rng, name)}, names_for(name)
        # NaN and Infinity are written as Python's json writes them; a torch dtype as its name.
        text = json.dumps({"model_type": model_type, **content}, default=str)

    def load(folder: Path) -> HfRoFormerConfig:
        (folder / "config.json").write_text(text)
        return HfRoFormerConfig.from_pretrained(folder)

    return Case("json", f"config.json {text[:300]}", names, load)


def override_case(rng: random.Random) -> Case:
    """`from_pretrained(path, **overrides)` on a valid saved config: the overrides are validated with it."""
    base = pick_base(rng)
    names = rng.sample([*VALID_VALUES, *BOOLEAN_FIELDS], rng.randint(1, 2))
    overrides = {name: field_value(rng, name) for name in names}

    def load(folder: Path) -> HfRoFormerConfig:
        HfRoFormerConfig(**base).save_pretrained(folder)
        return HfRoFormerConfig.from_pretrained(folder, **overrides)

    return Case("override", f"from_pretrained(**{overrides}) of {base}", tuple(names), load)


def assignment_case(rng: random.Random) -> Case:
    """`config.field = value` after construction; errors come at the assignment or when the model is built."""
    base = pick_base(rng)
    names = rng.sample(sorted(FIELD_RULES), rng.randint(1, 2))
    values = {name: field_value(rng, name) for name in names}

    def assign(folder: Path) -> HfRoFormerConfig:
        config = HfRoFormerConfig(**base)
        for name, value in values.items():
            setattr(config, name, value)
        return config

    return Case("assignment", f"assign {values} on {base}", tuple(names), assign)


KINDS = [
    (single_field_case, 0.40),
    (rope_case, 0.25),
    (combination_case, 0.12),
    (json_case, 0.10),
    (override_case, 0.06),
    (assignment_case, 0.07),
]


def generate_cases(seed: int, count: int) -> list[Case]:
    rng = random.Random(seed)
    makers, weights = [maker for maker, _ in KINDS], [weight for _, weight in KINDS]
    return [rng.choices(makers, weights)[0](rng) for _ in range(count)]


# -- running a case --------------------------------------------------------------------------------------------------


class FuzzFailure(AssertionError):
    """A case that ended neither in a clear rejection nor in a working model."""


def check_rejection(case: Case, error: Exception, stage: str) -> str:
    """A rejection must be a `ValueError`/`TypeError` naming something the case changed."""
    message = str(error)
    if not any(name in message for name in case.names):
        raise FuzzFailure(f"{case.kind} {case.description}: {stage} error names none of {case.names}: {message}")
    return f"rejected {type(error).__name__}"


def head_for(config: HfRoFormerConfig, index: int) -> type:
    """Decoders get the causal LM head; encoders rotate through the heads that read config fields."""
    if config.is_decoder:
        return hf_roformer.HfRoFormerForCausalLM
    heads = [hf_roformer.HfRoFormerForMaskedLM, hf_roformer.HfRoFormerForSequenceClassification]
    return heads[index % len(heads)] if config.pooler_activation is None else hf_roformer.HfRoFormerModel


def model_inputs(config: HfRoFormerConfig, generator: torch.Generator) -> dict:
    """A padded batch of two sequences, long enough to pass short original lengths, with both segment types."""
    length = int(torch.randint(1, 12, (1,), generator=generator))
    input_ids = torch.randint(0, config.vocab_size, (2, length), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, (length + 1) // 2 :] = 0
    token_type_ids = torch.zeros_like(input_ids)
    if config.type_vocab_size > 1:
        token_type_ids[:, length // 2 :] = 1
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}
    if config.add_cross_attention:
        inputs["encoder_hidden_states"] = torch.randn(2, 3, config.hidden_size, generator=generator)
    return inputs


def generates(config: HfRoFormerConfig) -> bool:
    """Decoders also run a short `generate` (cross-attention decoders with the encoder states of the batch)."""
    return config.is_decoder


def all_tensors(output) -> list[torch.Tensor]:
    if isinstance(output, torch.Tensor):
        return [output]
    if isinstance(output, dict):
        output = [value for key, value in output.items() if key != CACHE_FIELD]
    if isinstance(output, (list, tuple)):
        return [tensor for item in output for tensor in all_tensors(item)]
    return []


FLOAT_FIELDS = [name for name, rule in FIELD_RULES.items() if float in rule.types]


def integers_held_for_floats(config: HfRoFormerConfig) -> str | None:
    """The first float field or real-valued rope key (after the model is built) that holds an int, else None."""
    for name in FLOAT_FIELDS:
        if is_integer(config.__dict__.get(name)):
            return f"`{name}`"
    rules = ROPE_TYPE_RULES[config.rope_parameters.get("rope_type", "default")]
    for key, rule in {**rules.required, **rules.optional}.items():
        value = config.rope_parameters.get(key)
        if rule.real and (is_integer(value) or (isinstance(value, list) and any(map(is_integer, value)))):
            return f"`rope_parameters['{key}']`"
    return None


def run_case(case: Case, index: int, folder: Path) -> str:
    """The outcome of one case ('accepted', 'rejected ValueError', 'rejected TypeError'); raise `FuzzFailure` else."""
    try:
        config = case.make(folder)
    except (ValueError, TypeError) as error:
        return check_rejection(case, error, "config")
    except Exception as error:
        raise FuzzFailure(f"{case.kind} {case.description}: config raised {type(error).__name__}: {error}") from error
    try:
        generator = torch.Generator().manual_seed(index)
        torch.manual_seed(index)
        model = head_for(config, index)(config).eval()
        inputs = model_inputs(config, generator)
        with torch.no_grad():
            output = model(**inputs)
            if generates(config) and index % 4 == 0:
                generated = model.generate(
                    **inputs, max_new_tokens=2, do_sample=False, output_scores=True, return_dict_in_generate=True
                )
                output = (output, generated.scores)
        reloaded = HfRoFormerConfig.from_dict(config.to_dict())
        # Exact for a config as built; one assigned later (transformers also assigns `from_pretrained`'s `dtype`) may
        # hold a value that construction normalizes, such as a dtype name.
        normalized = case.kind in ("assignment", "override")
        expected = HfRoFormerConfig.from_dict(reloaded.to_dict()) if normalized else config
        assert reloaded.to_dict() == expected.to_dict(), "a to_dict/from_dict round trip changed the config"
    except (ValueError, TypeError) as error:
        if case.kind == "assignment":  # rules between fields are checked, at the latest, when the model is built
            return check_rejection(case, error, "model")
        raise FuzzFailure(f"{case.kind} {case.description}: accepted, then {type(error).__name__}: {error}") from error
    except Exception as error:
        raise FuzzFailure(f"{case.kind} {case.description}: accepted, then {type(error).__name__}: {error}") from error
    if (held := integers_held_for_floats(config)) is not None:
        raise FuzzFailure(f"{case.kind} {case.description}: accepted, but {held} holds an int, not a float")
    tensors = all_tensors(output)
    if not tensors or not all(bool(tensor.isfinite().all()) for tensor in tensors if tensor.is_floating_point()):
        raise FuzzFailure(f"{case.kind} {case.description}: accepted, but the outputs are not all finite")
    return "accepted"


def run_fuzz(seed: int, count: int, folder: Path) -> tuple[Counter, list[str]]:
    """Run `count` cases; return the outcome counts (also per kind) and the failures."""
    counts: Counter = Counter()
    failures = []
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # tiny models: threads only add hand-off time, a lot of it on a loaded machine
    try:
        for index, case in enumerate(generate_cases(seed, count)):
            try:
                outcome = run_case(case, index, folder)
            except FuzzFailure as failure:
                outcome = "failure"
                failures.append(str(failure))
            counts[outcome] += 1
            counts[f"{case.kind}: {outcome}"] += 1
    finally:
        torch.set_num_threads(threads)
    return counts, failures


def test_config_fuzz(tmp_path):
    counts, failures = run_fuzz(SEED, CASES, tmp_path)
    assert not failures, f"{len(failures)} of {CASES} cases failed, e.g.:\n" + "\n".join(failures[:10])
    assert sum(counts[key] for key in ("accepted", "rejected ValueError", "rejected TypeError")) == CASES
    # Both outcomes are exercised in quantity, for every kind of case.
    assert counts["accepted"] > CASES // 5 and counts["rejected ValueError"] > CASES // 5
    assert counts["rejected TypeError"] > CASES // 20
    for maker, _ in KINDS:
        kind = maker.__name__.removesuffix("_case").replace("single_", "")
        assert counts[f"{kind}: accepted"] > 0 and counts[f"{kind}: rejected ValueError"] > 0, kind


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=int, default=1, help="multiple of the default number of cases")
    parser.add_argument("--seed", type=int, default=SEED)
    args = parser.parse_args()
    count = CASES * args.scale
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as folder:
        counts, failures = run_fuzz(args.seed, count, Path(folder))
    report = {
        "seed": args.seed,
        "cases": count,
        "seconds": round(time.perf_counter() - started, 1),
        "counts": dict(sorted(counts.items())),
        "failures": failures[:20],
        "failure_count": len(failures),
    }
    print(json.dumps(report, indent=2))
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()
