"""Tensor parallelism through transformers' loading: `from_pretrained(..., distributed_config=DistributedConfig(
tp_size=2))` on 2 CPU processes (torchrun, gloo) splits the encoder layers by `config.base_model_tp_plan` and gives
every head the outputs of the model loaded in one process. The same call works on every supported transformers
release."""

import os
import subprocess
import sys

import pytest
import torch
from conftest import tiny_config
from transformers import DataCollatorWithFlattening, DistributedConfig

import hf_roformer


pytestmark = [  # see setup.cfg
    pytest.mark.releases("remote_code.modeling_hf_roformer", "remote_code.configuration_hf_roformer"),
]


TP_SIZE = 2
HEADS = [
    "HfRoFormerModel",
    "HfRoFormerForMaskedLM",
    "HfRoFormerForCausalLM",
    "HfRoFormerForSequenceClassification",
    "HfRoFormerForTokenClassification",
    "HfRoFormerForMultipleChoice",
    "HfRoFormerForQuestionAnswering",
]
# Architectures beyond the default one, each on the masked LM (or the causal LM for cross-attention).
VARIANTS = {
    "linear attention": ("HfRoFormerForMaskedLM", {"attention_type": "linear"}),
    "embedding_size != hidden_size": ("HfRoFormerForMaskedLM", {"embedding_size": 16}),
    "RoFormer-V2 (no biases, RMS norm)": ("HfRoFormerForMaskedLM", {"norm_type": "rms_norm", "use_bias": False}),
    "rotary values, tanh pooler": ("HfRoFormerModel", {"rotary_value": True, "pooler_activation": "tanh"}),
    "unpadded batch": ("HfRoFormerModel", {"padding_free": "always"}),
    "cross-attention": ("HfRoFormerForCausalLM", {"add_cross_attention": True}),
    "dynamic NTK decoder (keys rotated per query)": (
        "HfRoFormerForCausalLM",
        {"rope_parameters": {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 4}},
    ),
}

SCRIPT = """
import faulthandler, os, sys
import torch
from torch.distributed.tensor import DTensor
from transformers import DistributedConfig
import hf_roformer
import hf_roformer_cli

faulthandler.enable()  # a crashing rank shows where
jobs = torch.load(sys.argv[1])
outputs = {}
for job in jobs:
    model_class = getattr(hf_roformer, job["class"])
    model = model_class.from_pretrained(job["directory"], distributed_config=DistributedConfig(tp_size=2)).eval()
    sharded = sorted(name for name, parameter in model.named_parameters() if isinstance(parameter, DTensor))
    with torch.no_grad():
        output = model(**job["inputs"])
    outputs[job["name"]] = {"output": output[0], "sharded": sharded}
torch.save(outputs, os.path.join(sys.argv[2], f"rank{os.environ['RANK']}.pt"))
hf_roformer_cli.end_launched_process(0)  # as the command line ends: the processes wait, close the group, exit
"""


def perturbed(model: torch.nn.Module) -> torch.nn.Module:
    """The model with every parameter moved off its initial value (norms and biases included)."""
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.add_(torch.randn(parameter.shape, generator=generator) * 0.05)
    return model


def inputs_for(head: str, config) -> dict:
    """A padded batch of two rows (multiple choice: two questions of two choices; cross-attention: encoder states)."""
    input_ids = torch.arange(1, 19).reshape(2, 9) % 97 + 1
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 6:] = 0
    inputs = {"input_ids": input_ids, "attention_mask": attention_mask}
    if head == "HfRoFormerForMultipleChoice":
        inputs = {name: tensor[None].expand(2, -1, -1) for name, tensor in inputs.items()}
    if config.add_cross_attention:
        generator = torch.Generator().manual_seed(2)
        inputs["encoder_hidden_states"] = torch.randn(2, 5, config.hidden_size, generator=generator)
    return inputs


def packed_row_inputs() -> dict:
    """Three sequences packed into one row, declared as `DataCollatorWithFlattening` declares them."""
    features = [{"input_ids": ids} for ids in ([5, 6, 7, 8], [11, 12, 13], [21, 22, 23, 24, 25])]
    batch = DataCollatorWithFlattening(return_tensors="pt", return_flash_attn_kwargs=True)(features)
    return {name: value for name, value in batch.items() if name != "labels"}


def build_jobs(directory) -> tuple[list[dict], dict]:
    """Save every head and variant; return the jobs for the tensor-parallel run and the one-process outputs."""
    cases = {head: (head, {}) for head in HEADS} | VARIANTS
    jobs, expected = [], {}
    for name, (head, overrides) in cases.items():
        torch.manual_seed(0)
        config = tiny_config(
            is_decoder=head == "HfRoFormerForCausalLM", num_labels=3, num_attention_heads=4, **overrides
        )
        model = perturbed(getattr(hf_roformer, head)(config)).eval()
        model.save_pretrained(directory / str(len(jobs)))
        inputs = inputs_for(head, config)
        with torch.no_grad():
            expected[name] = model(**inputs)[0]
        jobs.append({"name": name, "class": head, "directory": str(directory / str(len(jobs))), "inputs": inputs})
        if name == "HfRoFormerModel":
            packed = packed_row_inputs()
            with torch.no_grad():
                expected["packed row"] = model(**packed)[0]
            jobs.append({"name": "packed row", "class": head, "directory": jobs[-1]["directory"], "inputs": packed})
    return jobs, expected


@pytest.mark.skipif(sys.platform != "linux", reason="torchrun with gloo is exercised on Linux")
@pytest.mark.launched
def test_tensor_parallel_loading_gives_every_heads_outputs(tmp_path):
    jobs, expected = build_jobs(tmp_path / "models")
    torch.save(jobs, tmp_path / "jobs.pt")
    (tmp_path / "tp.py").write_text(SCRIPT)
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", str(TP_SIZE),
        str(tmp_path / "tp.py"), str(tmp_path / "jobs.pt"), str(tmp_path),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    assert result.returncode == 0, "\n".join(
        line for line in result.stderr.splitlines() if "Loading weights" not in line and "_pytree" not in line
    )[-6000:]
    ranks = [torch.load(tmp_path / f"rank{rank}.pt") for rank in range(TP_SIZE)]
    assert set(ranks[0]) == set(expected)
    for name, reference in expected.items():
        sharded = ranks[0][name]["sharded"]
        # every layer's query/key/value, feed-forward expansion and both output projections are split
        layers = 2
        projections = {"attention.self.query", "attention.self.key", "attention.self.value"}
        projections |= {"attention.output.dense", "intermediate.dense", "output.dense"}
        if name == "cross-attention":
            projections |= {"crossattention.self.query", "crossattention.self.key", "crossattention.self.value"}
            projections |= {"crossattention.output.dense"}
        split = {parameter.rsplit(".", 1)[0].split("layer.", 1)[1] for parameter in sharded}
        assert split == {f"{layer}.{projection}" for layer in range(layers) for projection in projections}, name
        for rank in ranks:
            torch.testing.assert_close(rank[name]["output"], reference, atol=1e-5, rtol=0, msg=name)


def test_a_tensor_parallel_size_must_keep_attention_heads_whole():
    model = hf_roformer.HfRoFormerModel(tiny_config(num_attention_heads=4))
    message = (
        r"Tensor parallelism gives each rank whole attention heads: `tp_size` 3 must divide `num_attention_heads` 4; "
        r"use a tp_size among \[2, 4\]\."
    )
    with pytest.raises(ValueError, match=message):
        hf_roformer.HfRoFormerModel.maybe_distribute_model(model, DistributedConfig(tp_size=3), None)


def test_the_plan_names_modules_every_model_has():
    """The config's plan is the split of the layers every RoFormer has; cross-attention adds its own rules."""
    plan = hf_roformer.HfRoFormerConfig.base_model_tp_plan
    for overrides in ({}, {"attention_type": "linear"}, {"norm_type": "rms_norm", "use_bias": False}):
        model = hf_roformer.HfRoFormerModel(tiny_config(**overrides))
        modules = {name.replace(".0.", ".*.").replace(".1.", ".*.") for name, _ in model.named_modules()}
        assert set(plan) <= modules
        assert model.tp_plan.items() >= plan.items()
    decoder = hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True, add_cross_attention=True))
    assert "roformer.encoder.layer.*.crossattention.self.query" in decoder.tp_plan
    assert "encoder.layer.*.crossattention.self.query" not in hf_roformer.HfRoFormerConfig.base_model_tp_plan
