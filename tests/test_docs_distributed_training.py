"""The commands of docs/distributed-training.md, run as written by `test_docs.py` (2 CPU processes, the shipped
accelerate and DeepSpeed configurations), do what the page says: every engine trains and writes an ordinary model,
FSDP2 checkpoints hold one shard per process, and the Trainer script of the last section saves its model."""

import json
import sys

import pytest
from docs_pages import run_page_as_written
from safetensors.torch import load_file

import hf_roformer


pytestmark = [
    pytest.mark.user_path,  # see setup.cfg
    pytest.mark.skipif(sys.platform != "linux", reason="multi-process gloo runs are exercised on Linux"),
]


@pytest.fixture(scope="module")
def page():
    run = run_page_as_written("distributed-training.md")
    return run


@pytest.mark.parametrize("output", ["mrpc-ddp", "mrpc-fsdp", "mlm-fsdp", "mrpc-zero3", "mlm-script"])
def test_every_engine_writes_an_ordinary_model(page, output):
    """Weights under the model's own names (no wrapper prefixes): loading finds every weight and nothing else."""
    directory = page.directory / output
    architecture = json.loads((directory / "config.json").read_text())["architectures"]
    assert architecture in (["HfRoFormerForSequenceClassification"], ["HfRoFormerForMaskedLM"])
    model_class = getattr(hf_roformer, architecture[0])
    _, loading = model_class.from_pretrained(directory, output_loading_info=True)
    assert not any(loading.values()), loading
    assert load_file(directory / "model.safetensors")


def test_fsdp_checkpoints_hold_a_shard_per_process(page):
    listed = page.output_of("ls -a mrpc-fsdp").split()
    assert {".metadata", "__0_0.distcp", "__1_0.distcp"} <= set(listed)
    for checkpoint in ("mrpc-fsdp/checkpoint-4", "mlm-fsdp/stage-1-len64/checkpoint-2"):
        for state in ("pytorch_model_fsdp_0", "optimizer_0"):
            files = {path.name for path in (page.directory / checkpoint / state).iterdir()}
            assert files == {".metadata", "__0_0.distcp", "__1_0.distcp"}, (checkpoint, state)


def test_the_trainer_script_prints_its_saved_model(page):
    assert "['model.safetensors']" in page.output_of("prepare_distributed_training(trainer)")
