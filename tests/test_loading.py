"""Loading the ways large checkpoints are loaded: accelerate device maps (with disk offload), half precision, low-memory
loading, sharded safetensors and empty-weight initialization; each load computes what the normal load does."""

import json

import pytest
import torch
from conftest import tiny_config

import hf_roformer


pytestmark = pytest.mark.releases("remote_code.modeling_hf_roformer")  # see setup.cfg


@pytest.fixture(scope="module")
def sharded(tmp_path_factory):
    """A three-layer masked-LM checkpoint saved in shards of at most 20 kB, and its reference logits."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForMaskedLM(tiny_config(num_hidden_layers=3)).eval()
    directory = tmp_path_factory.mktemp("sharded")
    model.save_pretrained(directory, max_shard_size="20KB")
    input_ids = torch.randint(1, 99, (2, 9), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        logits = model(input_ids).logits
    return directory, input_ids, logits


def logits_of(model, input_ids):
    """Logits on the CPU, the inputs sent where the weights are (accelerate's hooks move them for offloaded models)."""
    device = next((p.device for p in model.parameters() if p.device.type != "meta"), torch.device("cpu"))
    with torch.no_grad():
        return model(input_ids.to(device)).logits.float().cpu()


def same_as_saved(model) -> dict:
    """Bit-identical on the CPU, where the reference was computed; within float32 rounding on an accelerator."""
    on_cpu = all(p.device.type in ("cpu", "meta") for p in model.parameters())
    return {"atol": 0, "rtol": 0} if on_cpu else {"atol": 1e-4, "rtol": 1e-4}


def test_checkpoint_is_sharded_with_an_index(sharded):
    directory, _, _ = sharded
    index = json.loads((directory / "model.safetensors.index.json").read_text())
    shards = set(index["weight_map"].values())
    assert len(shards) > 3 and all((directory / shard).exists() for shard in shards)
    assert not (directory / "model.safetensors").exists()


@pytest.mark.parametrize(
    "load_kwargs",
    [
        {},
        {"device_map": "auto"},
        {"device_map": {"": "cpu"}},
        {"low_cpu_mem_usage": True},
    ],
    ids=["plain", "device_map_auto", "device_map_cpu", "low_cpu_mem_usage"],
)
def test_sharded_loads_equal_the_saved_model(sharded, load_kwargs):
    directory, input_ids, expected = sharded
    model = hf_roformer.AutoModelForMaskedLM.from_pretrained(directory, **load_kwargs).eval()
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight  # still tied
    torch.testing.assert_close(logits_of(model, input_ids), expected, **same_as_saved(model))


def test_disk_offload_through_a_device_map(sharded, tmp_path):
    """A memory budget too small for any layer puts the weights on disk; accelerate's hooks stream them back."""
    directory, input_ids, expected = sharded
    budgets = ["cpu"] + list(range(torch.cuda.device_count()))  # every device too small: the weights go to disk
    model = hf_roformer.AutoModelForMaskedLM.from_pretrained(
        directory, device_map="auto", max_memory=dict.fromkeys(budgets, "30KB"), offload_folder=tmp_path
    ).eval()
    assert "disk" in set(model.hf_device_map.values())
    tolerance = 1e-4 if torch.cuda.is_available() else 0  # the layers run where accelerate streams them
    torch.testing.assert_close(logits_of(model, input_ids), expected, atol=tolerance, rtol=tolerance)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_half_precision_load_with_device_map(sharded, dtype):
    directory, input_ids, expected = sharded
    model = hf_roformer.AutoModelForMaskedLM.from_pretrained(directory, device_map="auto", dtype=dtype).eval()
    assert {parameter.dtype for parameter in model.parameters()} == {dtype}
    torch.testing.assert_close(logits_of(model, input_ids), expected, atol=0.05, rtol=0.05)


def test_init_empty_weights_builds_on_the_meta_device(sharded):
    accelerate = pytest.importorskip("accelerate")
    directory, input_ids, expected = sharded
    config = hf_roformer.AutoConfig.from_pretrained(directory)
    with accelerate.init_empty_weights():
        empty = hf_roformer.AutoModelForMaskedLM.from_config(config)
    assert {parameter.device.type for parameter in empty.parameters()} == {"meta"}
    empty.tie_weights()  # the tied output embedding is not stored in the checkpoint
    filled = accelerate.load_checkpoint_and_dispatch(empty, str(directory), device_map={"": "cpu"})
    torch.testing.assert_close(logits_of(filled.eval(), input_ids), expected, atol=0, rtol=0)
