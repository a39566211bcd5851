"""The configuration: transformers' RoFormer defaults, the v5 `rope_parameters` field, and exact round trips."""

import dataclasses

import transformers
from conftest import tiny_config

import hf_roformer


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
