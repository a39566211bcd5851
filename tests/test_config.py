"""The configuration: transformers' RoFormer defaults, the v5 `rope_parameters` field, exact round trips, the
derived fields, and validation (every error a `ValueError` or `TypeError` naming the field; the fuzz is in
test_config_fuzz.py)."""

import dataclasses
import json
import re
from pathlib import Path

import pytest
import transformers
from conftest import TINY, tiny_config
from huggingface_hub.errors import StrictDataclassError

import hf_roformer
from hf_roformer.remote_code.config_rules_hf_roformer import FIELD_RULES, ROPE_TYPE_RULES


pytestmark = pytest.mark.releases("remote_code.configuration_hf_roformer")  # see setup.cfg


def test_defaults_match_transformers_roformer():
    ours = hf_roformer.HfRoFormerConfig()
    reference = transformers.RoFormerConfig()
    shared = {field.name for field in dataclasses.fields(reference)} - {"model_type", "transformers_version"}
    assert shared, "no fields compared"
    for name in sorted(shared):
        assert getattr(ours, name) == getattr(reference, name), name
    assert ours.model_type == "hf_roformer"
    assert ours.rope_parameters == {"rope_type": "default", "rope_theta": 10000.0}
    assert ours.head_dim == 64


def test_legacy_rope_theta_and_scaling_are_converted():
    config = hf_roformer.HfRoFormerConfig(rope_theta=5000.0)
    assert config.rope_parameters == {"rope_type": "default", "rope_theta": 5000.0}
    scaled = hf_roformer.HfRoFormerConfig(rope_scaling={"rope_type": "linear", "factor": 2.0})
    assert scaled.rope_parameters["rope_type"] == "linear"
    assert scaled.rope_parameters["factor"] == 2.0
    assert scaled.rope_parameters["rope_theta"] == 10000.0


def without_path(config) -> dict:
    """The config as a dict, minus where it was loaded from."""
    return {key: value for key, value in config.to_dict().items() if key != "_name_or_path"}


def test_save_and_load_round_trip(tmp_path):
    rope_parameters = {"rope_type": "default", "rope_theta": 20000.0}
    config = tiny_config(rotary_value=True, rope_parameters=rope_parameters, is_decoder=True)
    config.save_pretrained(tmp_path)
    reloaded = hf_roformer.HfRoFormerConfig.from_pretrained(tmp_path)
    assert without_path(reloaded) == without_path(config)
    via_auto = transformers.AutoConfig.from_pretrained(tmp_path)
    assert isinstance(via_auto, hf_roformer.HfRoFormerConfig)
    assert without_path(via_auto) == without_path(config)


# -- derived fields ------------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("norm_type", "dropout_first", "transform"), [("layer_norm", False, True), ("rms_norm", True, False)]
)
def test_derived_fields_follow_the_norm_type_when_absent(norm_type, dropout_first, transform):
    config = tiny_config(norm_type=norm_type, layer_norm_eps=1e-7)
    assert config.dropout_before_embeddings_norm is dropout_first
    assert config.lm_head_transform is transform
    assert config.lm_head_layer_norm_eps == 1e-7
    assert config.embedding_size == config.hidden_size


def test_explicit_derived_fields_are_kept_and_saved(tmp_path):
    config = tiny_config(
        norm_type="rms_norm",
        layer_norm_eps=1e-7,
        lm_head_layer_norm_eps=1e-12,
        lm_head_transform=True,
        dropout_before_embeddings_norm=False,
    )
    assert (config.lm_head_transform, config.dropout_before_embeddings_norm) == (True, False)
    config.save_pretrained(tmp_path)
    saved = json.loads((tmp_path / "config.json").read_text())
    assert saved["lm_head_layer_norm_eps"] == 1e-12 and saved["layer_norm_eps"] == 1e-7
    assert saved["lm_head_transform"] is True and saved["dropout_before_embeddings_norm"] is False
    assert without_path(hf_roformer.HfRoFormerConfig.from_pretrained(tmp_path)) == without_path(config)


def test_roformer_v2_config_without_the_new_fields_derives_them(tmp_path):
    """A transformers `roformer` config of RoFormer-V2 (carrying only `norm_type`) loads with the V2 layout."""
    v2 = {**TINY, "model_type": "roformer", "norm_type": "rms_norm", "use_bias": False, "layer_norm_eps": 1e-7}
    (tmp_path / "config.json").write_text(json.dumps(v2))
    config = hf_roformer.HfRoFormerConfig.from_pretrained(tmp_path)
    assert config.dropout_before_embeddings_norm is True and config.lm_head_transform is False
    assert config.lm_head_layer_norm_eps == 1e-7


def test_derived_field_set_to_none_later_is_refused_when_a_model_is_built():
    config = tiny_config()
    config.lm_head_transform = None
    with pytest.raises(ValueError) as caught:
        hf_roformer.HfRoFormerForMaskedLM(config)
    assert str(caught.value) == (
        "`lm_head_transform` is None; it is derived from `norm_type` only when the config is built, so set a value "
        "explicitly."
    )


# -- validation: each example of issue 17, with the message it now gives ------------------------------------------

YARN = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8}
HEAD_DIM_2 = {"hidden_size": 4, "num_attention_heads": 2}
ISSUE_EXAMPLES = [
    # Strict-dataclass type errors: now a `TypeError` naming the field, the value and what is allowed.
    ({"hidden_size": "32"}, TypeError, "`hidden_size` must be an integer >= 2, got '32' (str)."),
    ({"is_decoder": 1}, TypeError, "`is_decoder` must be true or false, got 1 (int)."),
    ({"use_bias": "false"}, TypeError, "`use_bias` must be true or false, got 'false' (str)."),
    ({"return_dict": "yes"}, TypeError, "`return_dict` must be true, false or None, got 'yes' (str)."),
    # Comparisons with strings ("'<=' not supported between 'float' and 'str'").
    (
        {"hidden_dropout_prob": "0.1"},
        TypeError,
        "`hidden_dropout_prob` must be a probability in [0, 1], got '0.1' (str).",
    ),
    (
        {"rope_parameters": {**YARN, "rope_type": "llama3", "low_freq_factor": "1", "high_freq_factor": 4.0}},
        ValueError,
        "`rope_parameters['low_freq_factor']` must be a finite number > 0 for rope_type 'llama3', got '1'.",
    ),
    # Accepted, then crashed: head dim 2 with ntk / dynamic (ZeroDivisionError).
    (
        {**HEAD_DIM_2, "rope_parameters": {"rope_type": "ntk", "factor": 2.0}},
        ValueError,
        "rope_type 'ntk' needs a head dimension of at least 4 (its base is scaled by factor^(d / (d - 2))), got "
        "`hidden_size` / `num_attention_heads` = 4 / 2 = 2.",
    ),
    (
        {**HEAD_DIM_2, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}},
        ValueError,
        "rope_type 'dynamic' needs a head dimension of at least 4 (its base is scaled by factor^(d / (d - 2))), got "
        "`hidden_size` / `num_attention_heads` = 4 / 2 = 2.",
    ),
    # `proportional` with `partial_rotary_factor` outside (0, 1] (shape errors, `int(nan)`).
    *(
        (
            {"rope_parameters": {"rope_type": "proportional", "partial_rotary_factor": value}},
            ValueError,
            "`rope_parameters['partial_rotary_factor']` must be a number in (0, 1] (the fraction of feature pairs "
            f"rotated) for rope_type 'proportional', got {value}.",
        )
        for value in (1.5, 0.0, float("nan"), None)
    ),
    # Rope keys set to null (TypeError).
    (
        {"rope_parameters": {"rope_type": "linear", "factor": None}},
        ValueError,
        "`rope_parameters['factor']` is required for rope_type 'linear': a finite number >= 1.",
    ),
    (
        {"rope_parameters": {"rope_type": "default", "rope_theta": None}},
        ValueError,
        "`rope_parameters['rope_theta']` is required for rope_type 'default': a finite number > 1.",
    ),
    (
        {"rope_parameters": {**YARN, "truncate": None}},
        ValueError,
        "`rope_parameters['truncate']` must be true or false for rope_type 'yarn', got None.",
    ),
    # YaRN `beta_slow < 0` (math domain error).
    (
        {"rope_parameters": {**YARN, "beta_slow": -1.0}},
        ValueError,
        "`rope_parameters['beta_slow']` must be a number in [1e-100, 1e+100] (a count of rotations) for rope_type "
        "'yarn', got -1.0.",
    ),
    # `initializer_range < 0` or NaN (RuntimeError in `normal_`).
    ({"initializer_range": -0.1}, ValueError, "`initializer_range` must be a standard deviation in [0, 1], got -0.1."),
    (
        {"initializer_range": float("nan")},
        ValueError,
        "`initializer_range` must be a standard deviation in [0, 1], got nan.",
    ),
    # Accepted configs giving NaN outputs.
    (
        {"layer_norm_eps": float("nan")},
        ValueError,
        "`layer_norm_eps` must be a finite float >= 1.18e-38 (float32's smallest normal number), got nan.",
    ),
    (
        {"linear_attention_eps": 1e-300},
        ValueError,
        "`linear_attention_eps` must be a finite float >= 1.18e-38 (float32's smallest normal number), got 1e-300.",
    ),
    # A config the spec allowed, crashing in the forward (the bare V2 head cannot project hidden states).
    (
        {"norm_type": "rms_norm", "embedding_size": 16},
        ValueError,
        "`lm_head_transform=False` (a bare tied embedding matrix as language-modeling head, the default for "
        "`norm_type='rms_norm'`) needs `embedding_size` (16) equal to `hidden_size` (32): only the transform projects "
        "hidden states to the embedding width.",
    ),
    # The wrong field named (`hidden_size=-1` reported `embedding_size`).
    ({"hidden_size": -1}, ValueError, "`hidden_size` must be an integer >= 2, got -1."),
]


@pytest.mark.parametrize(("overrides", "error", "message"), ISSUE_EXAMPLES)
def test_issue_examples_give_exact_messages(overrides, error, message):
    with pytest.raises(error) as caught:
        tiny_config(**overrides)
    assert type(caught.value) is error and not isinstance(caught.value, StrictDataclassError)
    assert str(caught.value) == message


# -- issue 22: values that overflowed inside transformers' rope code or torch -----------------------------------------

OVERFLOWS = [
    # `ValueError: math domain error` in transformers' YaRN: ln(L / (2 pi beta_fast)) of 0.
    (
        {"rope_parameters": {**YARN, "beta_fast": 1e308}},
        "`rope_parameters['beta_fast']` must be a number in [1e-100, 1e+100] (a count of rotations) for rope_type "
        "'yarn', got 1e+308.",
    ),
    # `OverflowError: cannot convert float infinity to integer` (YaRN's `truncate` rounds ln(L / (2 pi beta_slow))).
    (
        {"rope_parameters": {**YARN, "beta_slow": 5e-324}},
        "`rope_parameters['beta_slow']` must be a number in [1e-100, 1e+100] (a count of rotations) for rope_type "
        "'yarn', got 5e-324.",
    ),
    # `OverflowError: int too big to convert` in torch, building the model.
    (
        {"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 10**30}},
        "`rope_parameters['original_max_position_embeddings']` must be an integer >= 1 and < 2**63 for rope_type "
        "'dynamic', got 1000000000000000000000000000000.",
    ),
    (
        {"max_position_embeddings": 2**63, "rope_parameters": {"rope_type": "dynamic", "factor": 2.0}},
        "`max_position_embeddings` must be an integer >= 1 and < 2**63, got 9223372036854775808.",
    ),
    # `OverflowError: int too large to convert to float` (a JSON integer of 400 digits, shown shortened).
    (
        {"rope_parameters": {"rope_type": "linear", "factor": 10**400}},
        "`rope_parameters['factor']` must be a finite number >= 1 for rope_type 'linear', got "
        "100000000000000000...0000000000000000000.",
    ),
    (
        {"initializer_range": 10**400},
        "`initializer_range` must be a standard deviation in [0, 1], got 100000000000000000...0000000000000000000.",
    ),
]


@pytest.mark.parametrize(("overrides", "message"), OVERFLOWS)
def test_values_that_overflow_are_refused_naming_the_key(overrides, message):
    with pytest.raises(ValueError) as caught:
        tiny_config(**overrides)
    assert type(caught.value) is ValueError and str(caught.value) == message


FLOAT_FIELDS = {
    "initializer_range": 0,
    "layer_norm_eps": 1,
    "hidden_dropout_prob": 0,
    "attention_probs_dropout_prob": 1,
    "linear_attention_eps": 1,
    "lm_head_layer_norm_eps": 1,
}
INTEGER_ROPE = {
    "rope_type": "yarn",
    "rope_theta": 10000,
    "factor": 4,
    "original_max_position_embeddings": 8,
    "beta_fast": 32,
    "beta_slow": 1,
    "mscale": 1,
    "mscale_all_dim": 0,
    "attention_factor": 1,
}


def assert_held_as_floats(config) -> None:
    for name, value in FLOAT_FIELDS.items():
        held = getattr(config, name)
        assert type(held) is float and held == value, name
    for key, value in config.rope_parameters.items():
        expected = int if key == "original_max_position_embeddings" else str if key == "rope_type" else float
        assert type(value) is expected and value == INTEGER_ROPE[key], key


def test_integers_for_float_fields_are_taken_as_floats(tmp_path):
    """JSON writers write `0` for `0.0`: construction, a config.json, overrides and assignment take them as floats."""
    assert_held_as_floats(tiny_config(**FLOAT_FIELDS, rope_parameters=dict(INTEGER_ROPE)))
    (tmp_path / "config.json").write_text(
        json.dumps({**TINY, "model_type": "hf_roformer", **FLOAT_FIELDS, "rope_parameters": INTEGER_ROPE})
    )
    assert_held_as_floats(hf_roformer.HfRoFormerConfig.from_pretrained(tmp_path))
    tiny_config().save_pretrained(tmp_path / "saved")
    overridden = hf_roformer.HfRoFormerConfig.from_pretrained(
        tmp_path / "saved", **FLOAT_FIELDS, rope_parameters=dict(INTEGER_ROPE)
    )
    assert_held_as_floats(overridden)
    config = tiny_config(rope_parameters=dict(INTEGER_ROPE))
    for name, value in FLOAT_FIELDS.items():
        setattr(config, name, value)
    assert_held_as_floats(config)
    saved = json.loads(config.to_json_string())
    assert saved["initializer_range"] == 0.0 and isinstance(saved["initializer_range"], float)


def test_rope_integers_edited_in_place_are_floats_once_the_model_is_built():
    config = tiny_config()
    config.rope_parameters.update(rope_type="linear", factor=2)
    hf_roformer.HfRoFormerModel(config)
    assert config.rope_parameters == {"rope_type": "linear", "rope_theta": 10000.0, "factor": 2.0}
    assert type(config.rope_parameters["factor"]) is float


@pytest.mark.parametrize("value", [True, "0.02", "0"])
def test_booleans_and_strings_stay_refused_for_float_fields(value):
    with pytest.raises(TypeError) as caught:
        tiny_config(initializer_range=value)
    assert str(caught.value) == (
        f"`initializer_range` must be a standard deviation in [0, 1], got {value!r} ({type(value).__name__})."
    )
    config = tiny_config()
    with pytest.raises(TypeError):
        config.layer_norm_eps = value
    assert config.layer_norm_eps == 1e-12
    with pytest.raises(ValueError) as caught:
        tiny_config(rope_parameters={"rope_type": "linear", "factor": value})
    assert str(caught.value) == (
        f"`rope_parameters['factor']` must be a finite number >= 1 for rope_type 'linear', got {value!r}."
    )


def test_assignment_checks_the_field_at_once():
    config = tiny_config()
    with pytest.raises(ValueError) as caught:
        config.hidden_dropout_prob = 1.5
    assert str(caught.value) == "`hidden_dropout_prob` must be a probability in [0, 1], got 1.5."
    assert config.hidden_dropout_prob == 0.0


def test_rules_between_fields_are_checked_when_the_model_is_built():
    """`config.num_attention_heads = 3` ended in `RuntimeError: shape '[1, 7, -1, 5]' is invalid` in the forward."""
    config = tiny_config()
    config.num_attention_heads = 3  # alone it is a valid value; other fields may still change
    message = "`hidden_size` (32) must be a multiple of `num_attention_heads` (3)."
    with pytest.raises(ValueError) as caught:
        hf_roformer.HfRoFormerModel(config)
    assert str(caught.value) == message
    with pytest.raises(ValueError) as caught:
        config.validate()
    assert type(caught.value) is ValueError and str(caught.value) == message
    config.hidden_size = 30  # coupled fields change one at a time
    assert hf_roformer.HfRoFormerModel(config).config.head_dim == 10


def test_rope_parameters_edited_in_place_are_checked_when_the_model_is_built():
    config = tiny_config()
    config.rope_parameters.update(rope_type="linear", factor=0.5)
    with pytest.raises(ValueError) as caught:
        hf_roformer.HfRoFormerModel(config)
    message = "`rope_parameters['factor']` must be a finite number >= 1 for rope_type 'linear', got 0.5."
    assert str(caught.value) == message


def test_from_pretrained_overrides_are_validated_together(tmp_path):
    hf_roformer.HfRoFormerModel(tiny_config()).save_pretrained(tmp_path)
    message = "`hidden_size` (32) must be a multiple of `num_attention_heads` (3)."
    for load in (hf_roformer.HfRoFormerConfig.from_pretrained, hf_roformer.HfRoFormerModel.from_pretrained):
        with pytest.raises(ValueError) as caught:
            load(tmp_path, num_attention_heads=3)
        assert str(caught.value) == message
    # Valid together although each alone would not be.
    config = hf_roformer.HfRoFormerConfig.from_pretrained(tmp_path, hidden_size=30, num_attention_heads=3)
    assert (config.hidden_size, config.num_attention_heads, config.embedding_size) == (30, 3, 32)
    config, unused = hf_roformer.HfRoFormerConfig.from_pretrained(
        tmp_path, num_hidden_layers=1, foo=2, return_unused_kwargs=True
    )
    assert config.num_hidden_layers == 1 and unused == {"foo": 2}


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[1, 2]", "{path} must hold a JSON object of configuration fields, got [1, 2] (list)."),
        ('"hf_roformer"', "{path} must hold a JSON object of configuration fields, got 'hf_roformer' (str)."),
        (
            "{bad",
            "{path} is not valid JSON: Expecting property name enclosed in double quotes: line 1 column 2 (char 1).",
        ),
        (
            '{"model_type": "hf_roformer", "head_dim": 3}',
            "`head_dim` is derived as `hidden_size` / `num_attention_heads` = 768 / 12; got 3. Remove it or change "
            "those fields.",
        ),
    ],
)
def test_config_json_that_is_not_a_config(tmp_path, text, message):
    """A `config.json` holding a list ended in `AttributeError: 'list' object has no attribute 'get'`."""
    (tmp_path / "config.json").write_text(text)
    for load in (hf_roformer.HfRoFormerConfig.from_pretrained, hf_roformer.HfRoFormerForMaskedLM.from_pretrained):
        with pytest.raises(ValueError) as caught:
            load(tmp_path)
        assert str(caught.value) == message.replace("{path}", str(tmp_path / "config.json"))


def test_keys_naming_methods_are_refused():
    with pytest.raises(ValueError) as caught:
        tiny_config(to_dict=1)
    assert str(caught.value) == "`to_dict` is not a configuration field: it names a method or read-only property."
    assert tiny_config(head_dim=8).head_dim == 8  # the derived value itself is accepted


def test_strict_dataclass_errors_never_escape():
    """huggingface_hub's strict-dataclass errors subclass neither ValueError nor TypeError; none comes out."""
    config = tiny_config()
    for name, value in [("return_dict", 3), ("problem_type", "ranking"), ("id2label", {"x": "a"})]:
        with pytest.raises((ValueError, TypeError)) as caught:
            setattr(config, name, value)
        assert not isinstance(caught.value, StrictDataclassError) and f"`{name}`" in str(caught.value)
    config.vocab_size, config.pad_token_id = 4, 5
    with pytest.raises(ValueError) as caught:
        config.validate()
    assert type(caught.value) is ValueError and str(caught.value) == "`pad_token_id` (5) must lie in [0, vocab_size=4)."


def test_every_field_has_a_rule():
    fields = {field.name for field in dataclasses.fields(hf_roformer.HfRoFormerConfig)}
    assert fields <= set(FIELD_RULES), sorted(fields - set(FIELD_RULES))


# -- docs/configuration.md ---------------------------------------------------------------------------------------

DOCS = Path(__file__).parent.parent / "docs" / "configuration.md"


def test_configuration_page_states_every_rule():
    """Every field, with what its errors say is allowed, word for word; so for every rope key."""
    text = DOCS.read_text()
    missing = [name for name, rule in FIELD_RULES.items() if f"`{name}`" not in text or rule.allowed not in text]
    for rope_type, rules in ROPE_TYPE_RULES.items():
        keys = {**rules.required, **rules.optional}
        missing += [
            f"{rope_type}.{key}" for key, rule in keys.items() if f"`{key}`" not in text or rule.allowed not in text
        ]
    assert not missing, missing


def test_configuration_page_code_runs(tmp_path, monkeypatch):
    blocks = re.findall(r"```python\n(.*?)```", DOCS.read_text(), flags=re.S)
    assert len(blocks) >= 3
    monkeypatch.chdir(tmp_path)
    for block in blocks:
        exec(compile(block, str(DOCS), "exec"), {})
