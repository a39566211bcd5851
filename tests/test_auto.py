"""Auto classes: registration, save/reload through every head, and remote-code loading without the package."""

import json
import os

import pytest
import torch
import transformers
from conftest import run_without_the_package, tiny_config

import hf_roformer
from hf_roformer.modeling_hf_roformer import AUTO_MAP


AUTO_HEADS = {auto_class.__name__: model_class for auto_class, model_class in hf_roformer.AUTO_MODEL_CLASSES.items()}
HUB_FILES = {
    "configuration_hf_roformer.py",
    "modeling_hf_roformer.py",
    "rotary_hf_roformer.py",
    "rope_scaling_hf_roformer.py",
    "rotary_kernels_hf_roformer.py",
    "linear_attention_hf_roformer.py",
    "blockwise_attention_hf_roformer.py",
}


def build(auto_name: str):
    """A tiny random model of the head an Auto class maps to."""
    torch.manual_seed(0)
    config = tiny_config(is_decoder=auto_name == "AutoModelForCausalLM", num_labels=3)
    return AUTO_HEADS[auto_name](config).eval()


def sample_inputs(auto_name: str) -> dict:
    """Deterministic inputs of the right shape for a head (multiple choice takes a choices dimension)."""
    input_ids = torch.arange(1, 19).reshape(2, 9) % 97 + 1
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 7:] = 0
    if auto_name == "AutoModelForMultipleChoice":
        return {
            "input_ids": input_ids[None].expand(2, -1, -1),
            "attention_mask": attention_mask[None].expand(2, -1, -1),
        }
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def first_output(output) -> torch.Tensor:
    """The main tensor of a model output (hidden states, logits or start logits)."""
    return output[0]


def test_registration():
    assert transformers.CONFIG_MAPPING["hf_roformer"] is hf_roformer.HfRoFormerConfig
    assert transformers.AutoConfig.for_model("hf_roformer").__class__ is hf_roformer.HfRoFormerConfig
    for auto_name, model_class in AUTO_HEADS.items():
        auto_class = getattr(transformers, auto_name)
        assert auto_class._model_mapping[hf_roformer.HfRoFormerConfig] is model_class
        assert isinstance(auto_class.from_config(tiny_config()), model_class)
    # transformers' own RoFormer is untouched
    assert transformers.CONFIG_MAPPING["roformer"] is transformers.RoFormerConfig


@pytest.mark.parametrize("auto_name", sorted(AUTO_HEADS))
def test_save_and_reload_through_auto_class(auto_name, tmp_path):
    model = build(auto_name)
    model.save_pretrained(tmp_path)
    saved_config = json.loads((tmp_path / "config.json").read_text())
    assert saved_config["model_type"] == "hf_roformer"
    assert saved_config["auto_map"] == AUTO_MAP
    assert HUB_FILES <= set(os.listdir(tmp_path))
    reloaded = getattr(transformers, auto_name).from_pretrained(tmp_path).eval()
    assert type(reloaded) is type(model)
    inputs = sample_inputs(auto_name)
    with torch.no_grad():
        assert torch.equal(first_output(reloaded(**inputs)), first_output(model(**inputs)))


REMOTE_SCRIPT = """
import torch
import transformers

for job in torch.load(sys.argv[1]):
    auto_class = getattr(transformers, job["auto_name"])
    model = auto_class.from_pretrained(job["checkpoint"], trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
    with torch.no_grad():
        torch.save({"class": type(model).__name__, "output": model(**job["inputs"])[0]}, job["output"])
"""


def test_remote_code_load_without_the_package(tmp_path):
    """Every head loads with `trust_remote_code=True` in a Python that cannot import hf_roformer, bit-exact."""
    jobs, expected = [], {}
    for auto_name in sorted(AUTO_HEADS):
        model = build(auto_name)
        checkpoint = tmp_path / auto_name
        model.save_pretrained(checkpoint)
        inputs = sample_inputs(auto_name)
        jobs.append(
            {
                "auto_name": auto_name,
                "checkpoint": str(checkpoint),
                "inputs": inputs,
                "output": str(checkpoint / "out.pt"),
            }
        )
        with torch.no_grad():
            expected[auto_name] = (type(model).__name__, first_output(model(**inputs)))
    torch.save(jobs, tmp_path / "jobs.pt")
    run_without_the_package(tmp_path, REMOTE_SCRIPT, tmp_path / "jobs.pt", timeout=600)
    for auto_name, (class_name, output) in expected.items():
        remote = torch.load(tmp_path / auto_name / "out.pt")
        assert remote["class"] == class_name, auto_name
        assert torch.equal(remote["output"], output), auto_name
