"""Shared fixtures: tiny configurations and inputs, so every test builds its models in milliseconds."""

import contextlib
import functools
import logging
import math
import os
import shutil
import sys
import tempfile
from pathlib import Path

import torch


# Without a GPU, Triton kernels are exercised through Triton's interpreter (it must be chosen before they are defined).
if not torch.cuda.is_available():
    os.environ.setdefault("TRITON_INTERPRET", "1")
# DeepSpeed compiles its CPU communication kernel at first use into torch's extension cache, keyed by the Python
# version only: one cache per environment, so that the test environments of two transformers versions do not
# rebuild it in turn (45 s of CPU each time).
EXTENSIONS = os.path.join(os.path.expanduser("~"), ".cache", "torch_extensions")
os.environ.setdefault("TORCH_EXTENSIONS_DIR", os.path.join(EXTENSIONS, sys.prefix.strip(os.sep).replace(os.sep, "_")))

import pytest  # noqa: E402
import transformers  # noqa: E402

import hf_roformer  # noqa: E402


# Under pytest-xdist (`make test` runs two workers on the two cores) each worker computes on one thread, and so do the
# processes it starts: two workers of two threads each would oversubscribe the cores. One worker's single-threaded
# work (starting interpreters, importing, tokenizing) then overlaps the other's computing.
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if XDIST_WORKER:
    os.environ["OMP_NUM_THREADS"] = "1"
    torch.set_num_threads(1)

# The test files that take longest on 2 cores, longest first: they are handed to the workers first, so that the two
# finish at about the same time. Any other file follows in collection order.
LONGEST_FIRST = (
    "tests/test_docs_reading_comprehension.py",
    "tests/test_docs_fine_tuning.py",
    "tests/test_docs_long_documents.py",
    "tests/test_docs_distributed_training.py",
    "tests/test_docs.py",
    "tests/test_docs_ner.py",
    "tests/test_deepspeed.py",
    "tests/test_install.py",
    "tests/test_cli.py",
    "tests/test_resume.py",
    "tests/test_fsdp.py",
    "tests/test_packing.py",
    "tests/test_training.py",
    "tests/test_attention.py",
    "tests/test_export.py",
    "tests/test_finetune.py",
    "tests/test_reruns.py",
    "tests/test_docs_pre_training.py",
    "tests/test_docs_serving.py",
    "tests/test_vllm_server.py",
    "tests/test_vllm_sentence_encoders.py",
    "tests/test_vllm_classifiers.py",
    "tests/test_padding_free.py",
    "tests/test_pretrained_checkpoint.py",
    "tests/test_config_fuzz.py",
)


def pytest_configure(config):
    """The processes tests start (torchrun, `accelerate launch`, vLLM servers, documented commands) keep their
    temporary files (torch elastic's log folders, vLLM's IPC sockets and distributed-setup files, about 170 a run)
    in one folder removed when the session ends, not in the system's temporary folder, which this process keeps
    (pytest's `tmp_path` among others)."""
    tempfile.gettempdir()  # fixed for this process before TMPDIR changes for its children
    children = tempfile.mkdtemp(prefix="hf-roformer-tests-")
    os.environ["TMPDIR"] = children
    config.add_cleanup(functools.partial(shutil.rmtree, children, ignore_errors=True))


def pytest_collection_modifyitems(config, items):
    """The longest test files first (`LONGEST_FIRST`), each file's tests in their order: `make test` hands whole files
    to its two pytest-xdist workers (`--dist loadfile`: a module-scoped fixture is made once) in this order."""
    rank = {path: index for index, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.location[0], len(rank)))


# The libraries' logging as this process starts, before any test: the state every test starts from.
LOGGING_AT_START = (
    transformers.logging.get_verbosity(),
    transformers.utils.logging.is_progress_bar_enabled(),
    logging.getLogger("hf_roformer").level,
    logging.getLogger("hf_roformer").propagate,
    tuple(logging.getLogger("hf_roformer").handlers),
)


def reset_library_logging() -> None:
    """transformers' verbosity and progress bars and hf_roformer's logger as they were when this process started."""
    verbosity, progress_bar, level, propagate, handlers = LOGGING_AT_START
    transformers.logging.set_verbosity(verbosity)
    (transformers.logging.enable_progress_bar if progress_bar else transformers.logging.disable_progress_bar)()
    package = logging.getLogger("hf_roformer")
    package.setLevel(level)
    package.propagate = propagate
    package.handlers[:] = handlers


@pytest.fixture(autouse=True)
def library_logging_reset():
    """Every test starts, and leaves, with the libraries' logging as the process started: a command run in this process
    (in a test or in a module's fixture) quiets transformers and points hf_roformer's logger at the streams of that
    moment, and no test's outcome may depend on which ran before it in the same worker."""
    reset_library_logging()
    yield
    reset_library_logging()


TINY = dict(
    vocab_size=99,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=37,
    max_position_embeddings=64,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def tiny_config(**overrides) -> hf_roformer.HfRoFormerConfig:
    """A two-layer RoFormer config (head dim 8) with dropout off, so outputs are deterministic."""
    return hf_roformer.HfRoFormerConfig(**{**TINY, **overrides})


def tiny_reference_config(**overrides) -> transformers.RoFormerConfig:
    """The same hyper-parameters as `tiny_config`, for transformers' own RoFormer."""
    return transformers.RoFormerConfig(**{**TINY, **overrides})


def optimizer_steps(loss_of_batch, optimizer: torch.optim.Optimizer, steps: int) -> list[float]:
    """`steps` optimizer steps on the loss that `loss_of_batch()` computes (a fixed batch, a model in training mode):
    the losses, first to last, for tests that check a model learns."""
    losses = []
    for _ in range(steps):
        loss = loss_of_batch()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
        losses.append(loss.item())
    return losses


def save_tiny_chinese_checkpoint(path, **overrides):
    """A seeded tiny `HfRoFormerModel` (hidden 32, 2 layers, feed-forward 64, dropout off) with the shipped checkpoint's
    Chinese character tokenizer, saved in `path`: what the fine-tuning tests of the tasks start from."""
    tokenizer = transformers.AutoTokenizer.from_pretrained(str(hf_roformer.pretrained_checkpoint()))
    torch.manual_seed(0)
    config = tiny_config(vocab_size=tokenizer.vocab_size, intermediate_size=64, **overrides)
    hf_roformer.HfRoFormerModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture
def batch():
    """Two sequences of length 9 with mixed segment ids; the second is right-padded after 6 tokens."""
    generator = torch.Generator().manual_seed(0)
    input_ids = torch.randint(1, TINY["vocab_size"], (2, 9), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 6:] = 0
    input_ids[1, 6:] = 0
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, 4:] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def randomize_norms(model: torch.nn.Module, seed: int = 0) -> None:
    """Give layer norms and biases random values, so tests are not blind to a missing or swapped bias/gain."""
    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            if "LayerNorm" in name or name.endswith("bias"):
                parameter.copy_(torch.randn(parameter.shape, generator=generator) * 0.1 + ("weight" in name))


def rotation_matrix(angles: torch.Tensor) -> torch.Tensor:
    """R_{Theta,m} of paper eq. 15 written out: a block-diagonal float64 matrix rotating pair i by `angles[i]`."""
    dim = 2 * angles.numel()
    matrix = torch.zeros(dim, dim, dtype=torch.float64)
    for i, angle in enumerate(angles.tolist()):
        matrix[2 * i : 2 * i + 2, 2 * i : 2 * i + 2] = torch.tensor(
            [[math.cos(angle), -math.sin(angle)], [math.sin(angle), math.cos(angle)]], dtype=torch.float64
        )
    return matrix


def greedy_with_logits(model, input_ids: torch.Tensor, steps: int, **kwargs):
    """Greedy `generate` with the cache: the sequences and the logits of every step `(batch, steps, vocab)`."""
    output = model.generate(
        input_ids,
        max_new_tokens=steps,
        min_new_tokens=steps,
        do_sample=False,
        use_cache=True,
        return_dict_in_generate=True,
        output_logits=True,
        pad_token_id=0,
        **kwargs,
    )
    return output.sequences, torch.stack(output.logits, dim=1)


def assert_cached_generation_exact(model, prompt: torch.Tensor, steps: int, tolerance: float = 1e-5) -> None:
    """Every step of cached greedy decoding has the logits of a forward without cache over the same tokens, and picks
    their argmax."""
    sequences, cached_logits = greedy_with_logits(model, prompt, steps)
    start = prompt.shape[1]
    with torch.no_grad():
        for step in range(steps):
            recomputed = model(sequences[:, : start + step], use_cache=False).logits[:, -1]
            difference = (cached_logits[:, step] - recomputed).abs().max().item()
            assert difference <= tolerance, f"step {step}: max |delta logits| = {difference}"
            assert torch.equal(sequences[:, start + step], recomputed.argmax(-1))


def assert_left_padded_generation_matches(model, prompts: list[torch.Tensor], steps: int) -> None:
    """Greedy generation from a left-padded batch produces, row by row, what each prompt produces alone."""
    width = max(len(prompt) for prompt in prompts)
    input_ids = torch.zeros(len(prompts), width, dtype=torch.long)
    attention_mask = torch.zeros(len(prompts), width, dtype=torch.long)
    for row, prompt in enumerate(prompts):
        input_ids[row, width - len(prompt) :] = prompt
        attention_mask[row, width - len(prompt) :] = 1
    batched, _ = greedy_with_logits(model, input_ids, steps, attention_mask=attention_mask)
    for row, prompt in enumerate(prompts):
        alone, _ = greedy_with_logits(model, prompt[None], steps)
        assert batched[row, width:].tolist() == alone[0, len(prompt) :].tolist()


def run_without_the_package(tmp_path, body: str, *args, timeout: int = 300) -> None:
    """Run the Python source `body` with `args` in a fresh interpreter that cannot import hf_roformer (offline, its
    own remote-code module cache, working directory `tmp_path`); fail with its stderr if it fails."""
    from hf_roformer.utils.isolation import run_without_the_package as run

    result = run(tmp_path, body, *args, timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]


def cli_failure(capsys, argv: list[str], status: int = 1) -> str:
    """Run `hf-roformer ARGV` in this process, expecting it to stop with exit `status`; returns what it printed on
    stderr (the output captured before it is discarded)."""
    import hf_roformer_cli

    capsys.readouterr()
    with pytest.raises(SystemExit) as stopped:
        hf_roformer_cli.main(argv)
    assert stopped.value.code == status, capsys.readouterr()
    return capsys.readouterr().err


def assert_same_saved_weights(expected_directory, actual_directory) -> None:
    """The `model.safetensors` of both directories hold the same tensors, bit for bit (a resumed or rerun training
    against the run done in one go)."""
    from safetensors.torch import load_file

    expected = load_file(Path(expected_directory) / "model.safetensors")
    actual = load_file(Path(actual_directory) / "model.safetensors")
    assert expected.keys() == actual.keys()
    for name, tensor in expected.items():
        torch.testing.assert_close(actual[name], tensor, rtol=0, atol=0, msg=name)


@contextlib.contextmanager
def one_thread():
    """Run in this process on one thread, as the child processes the tests launch do (`OMP_NUM_THREADS=1`): the
    references they are compared with make the same sums."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(threads)


def replace_the_hub(monkeypatch) -> list[tuple]:
    """The Hub replaced where a training command reaches it (online, reachable, no stored token), for the rest of
    the test (`monkeypatch` undoes it): its reach check, the `create_repo` and `upload_folder` of transformers'
    Trainer, and the card's `upload_file`. Returns the calls as they come: `("create_repo", name)`,
    `("upload_folder", repo_id, commit_message, token, names of the folder's files)` and `("upload_file", repo_id,
    path_in_repo, token, text)`."""
    import types

    import huggingface_hub
    import transformers.trainer
    from huggingface_hub import constants

    from hf_roformer.training.run import cards

    calls = []

    class Hub:
        def create_repo(self, name, **kwargs):
            calls.append(("create_repo", name))
            return types.SimpleNamespace(repo_id=f"someone/{name}")

        def upload_folder(self, repo_id, folder_path, commit_message, token, **kwargs):
            names = {path.name for path in Path(folder_path).iterdir()}
            calls.append(("upload_folder", repo_id, commit_message, token, names))

    def upload_file(path_or_fileobj, path_in_repo, repo_id, token, commit_message):
        calls.append(("upload_file", repo_id, path_in_repo, token, Path(path_or_fileobj).read_text(encoding="utf-8")))

    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
    monkeypatch.setattr(huggingface_hub, "get_token", lambda: None)
    monkeypatch.setattr("hf_roformer.pretrained.sources.hub_unreachable_reason", lambda repo, token: None)
    monkeypatch.setattr(transformers.trainer, "hf_api", lambda: Hub())
    monkeypatch.setattr(cards.huggingface_hub, "upload_file", upload_file)
    return calls


def assert_uploaded_after_the_run(calls: list[tuple], output: Path, score: str) -> None:
    """What `--push_to_hub --hub_token hf_x` sent to `replace_the_hub` for a run into `output` (the repository named
    after it): the Trainer's own push as the model was saved, the run's once it finished (remote code and markers
    included), then the card, holding `score`."""
    repository = f"someone/{output.name}"
    assert [call[:2] for call in calls] == [("create_repo", output.name), *[("upload_folder", repository)] * 2,
                                            ("upload_file", repository)]  # fmt: skip
    saved, final, card = calls[1], calls[2], calls[3]
    assert saved[2:4] == ("Model save", "hf_x")
    assert final[2:4] == ("End of training", "hf_x")
    assert {"model.safetensors", "modeling_hf_roformer.py", "finished.json"} <= final[4]
    assert card[2:] == ("README.md", "hf_x", (output / "README.md").read_text(encoding="utf-8"))
    assert score in card[4]
