"""FSDP2 through accelerate and the Trainer on 2 CPU processes (gloo), launched as users launch it: fine-tuning with
torchrun and the Trainer's `--fsdp` flags, masked-LM pre-training (tied embeddings) with `accelerate launch` and the
shipped config. Each run ends with the weights of the 1-process run with the same global batch, saves sharded
checkpoints, resumes exactly after SIGKILL, and writes an ordinary safetensors model that loads in one process. Every
head shards with its tied weights in one group."""

import json
import sys
from pathlib import Path

import pytest
import torch
from conftest import one_thread
from distributed_launch import CONFIGS, accelerate_command, failure, run, run_killed, torchrun_command
from safetensors.torch import load_file
from test_finetune import make_glue, tiny_checkpoint  # noqa: F401 (a fixture)

import hf_roformer
import hf_roformer_cli
from hf_roformer.training.run.engine_checkpoints import engine_checkpoint_problem
from hf_roformer.training.run.fsdp_groups import tied_module_groups
from hf_roformer.training.tasks.pretraining.corpus import char_vocabulary, peoples_daily_documents


pytestmark = [
    pytest.mark.skipif(sys.platform != "linux", reason="multi-process gloo runs are exercised on Linux"),
    pytest.mark.releases("training.run.distributed"),
]

TOLERANCE = 1e-5  # 2 processes against 1: the same sums in another order
SHARDED = '{"state_dict_type": "SHARDED_STATE_DICT"}'


def assert_same_weights(actual_dir: Path, expected_dir: Path, tolerance: float):
    expected, actual = load_file(expected_dir / "model.safetensors"), load_file(actual_dir / "model.safetensors")
    assert expected.keys() == actual.keys()
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], atol=tolerance, rtol=0, msg=name)


def logged_losses(output_dir: Path) -> list[float]:
    state = json.loads((output_dir / "trainer_state.json").read_text())
    return [entry["loss"] for entry in state["log_history"] if "loss" in entry]


def assert_sharded_checkpoint(checkpoint: Path):
    """The model and optimizer state saved as one distributed-checkpoint shard per process, no whole weights."""
    for name in ("pytorch_model_fsdp_0", "optimizer_0"):
        files = {path.name for path in (checkpoint / name).iterdir()}
        assert files == {".metadata", "__0_0.distcp", "__1_0.distcp"}, (name, files)
    assert not (checkpoint / "model.safetensors").exists()
    assert engine_checkpoint_problem(checkpoint) is None


def finetune_arguments(checkpoint: Path, data: Path, output: Path, batch_size: int, *extra: str) -> list[str]:
    """SST-2, 64 examples; 8 steps of 8 examples (global batch), a checkpoint every 2 steps."""
    return [
        "finetune", "glue", "--task_name", "sst2", "--model_name_or_path", str(checkpoint), "--data_dir", str(data),
        "--output_dir", str(output), "--max_seq_length", "32", "--max_steps", "8", "--learning_rate", "1e-3",
        "--per_device_train_batch_size", str(batch_size), "--save_strategy", "steps", "--save_steps", "2",
        "--eval_strategy", "no", "--logging_steps", "1", "--seed", "5", "--use_cpu", "--disable_tqdm", "true", *extra,
    ]  # fmt: skip


FSDP_FLAGS = ["--fsdp", "--fsdp_config", SHARDED]


@pytest.fixture(scope="module")
def glue(tmp_path_factory):
    return make_glue(tmp_path_factory.mktemp("glue"), "sst2", examples=64)


@pytest.fixture(scope="module")
def one_process(tiny_checkpoint, glue, tmp_path_factory):  # noqa: F811
    """The reference: 1 process, 8 examples a step."""
    output = tmp_path_factory.mktemp("one-process") / "out"
    with one_thread():
        hf_roformer_cli.main(finetune_arguments(tiny_checkpoint, glue, output, 8))
    return output


@pytest.fixture(scope="module")
def sharded(tiny_checkpoint, glue, tmp_path_factory):  # noqa: F811
    """The same run on 2 processes of 4 examples, launched with torchrun and the Trainer's FSDP flags."""
    cwd = tmp_path_factory.mktemp("fsdp")
    arguments = finetune_arguments(tiny_checkpoint, glue, cwd / "out", 4, *FSDP_FLAGS)
    result = run(torchrun_command(arguments), cwd)
    assert result.returncode == 0, failure(result)
    return arguments, cwd / "out"


@pytest.mark.launched
def test_fsdp2_fine_tuning_equals_one_process(one_process, sharded):
    _, output = sharded
    assert_sharded_checkpoint(output / "checkpoint-8")  # sharded indeed: accelerate alone prepares DDP on CPU
    assert logged_losses(output) == pytest.approx(logged_losses(one_process), abs=TOLERANCE)
    assert_same_weights(output, one_process, TOLERANCE)


@pytest.mark.launched
def test_fsdp2_model_is_an_ordinary_checkpoint_equal_to_the_sharded_one(tiny_checkpoint, glue, sharded, tmp_path):  # noqa: F811
    """The final model loads in one process (also as remote code: its auto_map names our sources, not torch's
    wrapper class), equals the last sharded checkpoint exactly, and computes the sharded model's evaluation."""
    from torch.distributed.checkpoint.format_utils import dcp_to_torch_save

    _, output = sharded
    config = json.loads((output / "config.json").read_text())
    assert config["architectures"] == ["HfRoFormerForSequenceClassification"]
    assert config["auto_map"] == hf_roformer.remote_code.saving_hf_roformer.AUTO_MAP
    assert (output / "modeling_hf_roformer.py").exists() and not list(output.glob("_fsdp*.py"))
    dcp_to_torch_save(output / "checkpoint-8" / "pytorch_model_fsdp_0", tmp_path / "gathered.pt")
    gathered = torch.load(tmp_path / "gathered.pt", weights_only=True)["model"]
    saved = load_file(output / "model.safetensors")
    assert saved.keys() == gathered.keys()
    for name in saved:
        torch.testing.assert_close(saved[name], gathered[name], atol=0, rtol=0, msg=name)
    evaluation = tmp_path / "evaluation"
    arguments = finetune_arguments(output, glue, evaluation, 8, "--do_eval")
    with one_thread():
        one = hf_roformer_cli.run(arguments)
    sharded_eval = json.loads((output / "eval_results.json").read_text())
    assert one["eval_loss"] == pytest.approx(sharded_eval["eval_loss"], abs=1e-6)
    assert one["eval_accuracy"] == sharded_eval["eval_accuracy"]


@pytest.mark.launched
def test_fsdp2_run_killed_with_sigkill_resumes_exactly(sharded, tmp_path):
    """Killed inside the shard one process writes of a sharded checkpoint, then (having resumed from the checkpoint
    before it) inside the final save; the same command run again ends with the uninterrupted run's weights and
    losses."""
    arguments, whole = sharded
    output = tmp_path / "out"
    arguments = [str(output) if argument == str(whole) else argument for argument in arguments]
    kills = [
        ("write:checkpoint-4/optimizer_0/__1_0.distcp:truncate", 1, "checkpoint-4", "no optimizer_0/.metadata"),
        ("write:model.safetensors:truncate", 0, "checkpoint-8", None),
    ]
    for kill_at, rank, checkpoint, problem in kills:
        result = run_killed(arguments, tmp_path, kill_at, kill_root=output, kill_rank=rank)
        assert result.returncode == -9, f"not killed at {kill_at}: {failure(result)}"
        assert not (output / "finished.json").exists()
        assert (engine_checkpoint_problem(output / checkpoint) or "").startswith(problem or ""), kill_at
    result = run(torchrun_command(arguments), tmp_path)
    assert result.returncode == 0, failure(result)
    assert f"resuming from {output / 'checkpoint-8'}" in result.stdout
    assert_same_weights(output, whole, 0)
    assert logged_losses(output) == logged_losses(whole)


# Masked-LM pre-training: the decoder is tied to the word embeddings and its bias to the head's.


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    """People's Daily text files and a tiny masked LM without dropout over its characters."""
    root = tmp_path_factory.mktemp("corpus")
    documents = peoples_daily_documents()
    (root / "train.txt").write_text("\n".join(documents[:300]) + "\n", encoding="utf-8")
    (root / "valid.txt").write_text("\n".join(documents[-40:]) + "\n", encoding="utf-8")
    vocabulary = char_vocabulary(documents[:300], 2, with_ascii=True)
    tokenizer = hf_roformer.HfRoFormerTokenizer(vocabulary, word_level=False)
    torch.manual_seed(0)
    config = hf_roformer.HfRoFormerConfig(
        vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=64,
        max_position_embeddings=32, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0,
        pad_token_id=tokenizer.pad_token_id,
    )  # fmt: skip
    hf_roformer.HfRoFormerForMaskedLM(config).save_pretrained(root / "mlm")
    tokenizer.save_pretrained(root / "mlm")
    return root


def pretrain_arguments(corpus: Path, output: Path, stages: str) -> list[str]:
    return [
        "pretrain", "mlm", "--model", str(corpus / "mlm"), "--stages", stages, "--train_files",
        str(corpus / "train.txt"), "--validation_files", str(corpus / "valid.txt"), "--eval_steps", "2",
        "--save_steps", "2", "--logging_steps", "1", "--seed", "3", "--use_cpu", "--disable_tqdm", "true",
        "--output_dir", str(output),
    ]  # fmt: skip


@pytest.mark.launched
def test_fsdp2_pretraining_with_tied_embeddings_equals_one_process(corpus, tmp_path):
    """`accelerate launch` with the shipped FSDP2 config: two stages, 8 blocks a step (4 per process), end with the
    1-process weights; the embeddings stay tied to the decoder (one FSDP group) and the checkpoints are sharded."""
    with one_thread():
        hf_roformer_cli.main(pretrain_arguments(corpus, tmp_path / "one", "32:8:4,64:4:2"))
    arguments = pretrain_arguments(corpus, tmp_path / "fsdp", "32:4:4,64:2:2")
    result = run(accelerate_command(CONFIGS / "accelerate" / "fsdp2.yaml", arguments), tmp_path)
    assert result.returncode == 0, failure(result)
    assert_sharded_checkpoint(tmp_path / "fsdp" / "stage-1-len32" / "checkpoint-4")
    assert_same_weights(tmp_path / "fsdp", tmp_path / "one", TOLERANCE)
    assert "returned a view tensor" not in result.stderr
    assert "cls.predictions.decoder.weight" not in load_file(tmp_path / "fsdp" / "model.safetensors")
    model = hf_roformer.HfRoFormerForMaskedLM.from_pretrained(tmp_path / "fsdp")
    assert model.get_output_embeddings().weight is model.get_input_embeddings().weight


# Every head, in every layout of its weights, shards with each set of tied modules in one group.

HEADS = [
    "HfRoFormerModel", "HfRoFormerForMaskedLM", "HfRoFormerForCausalLM", "HfRoFormerForSequenceClassification",
    "HfRoFormerForTokenClassification", "HfRoFormerForMultipleChoice", "HfRoFormerForQuestionAnswering",
]  # fmt: skip
LAYOUTS = {
    "base": {},
    "embeddings_project": {"embedding_size": 16},
    "v2": {"norm_type": "rms_norm", "use_bias": False},
    "untied": {"tie_word_embeddings": False},
}


def head_model(head: str, layout: str) -> torch.nn.Module:
    torch.manual_seed(0)
    config = hf_roformer.HfRoFormerConfig(
        vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48,
        hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0, is_decoder=head.endswith("CausalLM"),
        **LAYOUTS[layout],
    )  # fmt: skip
    return getattr(hf_roformer, head)(config)


def test_no_split_modules_leave_the_embeddings_to_fsdp_and_tied_groups_are_found():
    """accelerate shards the input embeddings in a group of their own (or with the tied output projection): a module
    named in `_no_split_modules` must not contain them. Tied modules are grouped with the head owning the bias."""
    assert hf_roformer.HfRoFormerModel._no_split_modules == ["HfRoFormerLayer"]
    names = {}
    for head in HEADS:
        for layout in LAYOUTS:
            model = head_model(head, layout)
            modules = {module: name for name, module in model.named_modules()}
            names[head, layout] = [[modules[module] for module in group] for group in tied_module_groups(model)]
    lm_head = ["roformer.embeddings.word_embeddings", "cls.predictions", "cls.predictions.decoder"]
    for head in ("HfRoFormerForMaskedLM", "HfRoFormerForCausalLM"):
        assert names[head, "base"] == names[head, "embeddings_project"] == [lm_head]
        assert names[head, "v2"] == [["roformer.embeddings.word_embeddings", "cls.predictions.decoder"]]  # no bias
        assert names[head, "untied"] == []  # tie_word_embeddings=False unties the bias too
    assert all(not groups for (head, _), groups in names.items() if "LM" not in head)


EVERY_HEAD_SCRIPT = """
import sys, torch, warnings
import hf_roformer_cli
from accelerate import Accelerator
from accelerate.utils import FullyShardedDataParallelPlugin
sys.path.insert(0, sys.argv[1])
from test_fsdp import HEADS, LAYOUTS, head_model
from hf_roformer.training.run.distributed import switch_to_fsdp
from hf_roformer.training.run.fsdp_groups import shard_with_tied_groups, tied_module_groups

# an output of a sharded module that is a view: FSDP2 warns that an in-place op on it would skip its hooks
warnings.filterwarnings("error", message="FSDP2-wrapped module .* returned a view tensor")
plugin = FullyShardedDataParallelPlugin(fsdp_version=2, auto_wrap_policy="transformer_based_wrap")
accelerator = Accelerator(cpu=True, fsdp_plugin=plugin)
switch_to_fsdp(accelerator, plugin)
ids = torch.randint(5, 40, (2, 7), generator=torch.Generator().manual_seed(1))
worst = 0.0
for head in HEADS:
    for layout in LAYOUTS:
        inputs = ids[:, None].expand(2, 3, 7) if head.endswith("MultipleChoice") else ids
        reference = head_model(head, layout)
        expected = reference(input_ids=inputs)[0]
        expected.square().sum().backward()
        model = head_model(head, layout)
        if tied_module_groups(model):
            shard_with_tied_groups(model, accelerator)
        model, _ = accelerator.prepare(model, torch.optim.SGD(model.parameters(), lr=0.1))
        actual = model(input_ids=inputs)[0]
        actual.square().sum().backward()
        worst = max(worst, (actual - expected).abs().max().item())
        unsharded = dict(reference.named_parameters())
        assert unsharded.keys() == dict(model.named_parameters()).keys(), (head, layout)
        for name, parameter in model.named_parameters():
            assert (parameter.grad is None) == (unsharded[name].grad is None), (head, layout, name)
            if parameter.grad is not None:
                worst = max(worst, (parameter.grad.full_tensor() - unsharded[name].grad).abs().max().item())
        accelerator._models.clear()
        accelerator._optimizers.clear()
print(f"worst difference {worst:.3g}")
assert worst < 1e-5, worst
hf_roformer_cli.end_launched_process(0)  # as the command line ends: the processes wait, close the group, exit
"""


@pytest.mark.launched
def test_every_head_shards_and_computes_the_unsharded_logits_and_gradients(tmp_path):
    """Every head and layout on 2 processes (gloo): the logits and gradients of one process, and no output of a sharded
    module is a view (FSDP2's warning is an error in the script)."""
    script = tmp_path / "every_head.py"
    script.write_text(EVERY_HEAD_SCRIPT)
    result = run(torchrun_command([str(Path(__file__).parent)], script=script), tmp_path)
    assert result.returncode == 0, failure(result)
    assert "worst difference" in result.stdout
