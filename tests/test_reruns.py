"""Reruns never cost the user anything: the run record lists every file a training command wrote, with its size, and
`--overwrite_output_dir` (finetune, pretrain; the demo always replaces its earlier output) removes exactly those, so a
file and a folder the user put into the output directory stay; every finished marker is checked before it is trusted,
per stage in pre-training, and a stage whose outputs are gone or cut is redone and ends equal to an uninterrupted run;
blank lines between the records of a TSV file are counted in the run summary; processes launched together that would
each train alone into one output directory are refused."""

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import assert_same_saved_weights, cli_failure, one_thread
from test_finetune import tiny_checkpoint  # noqa: F401 (a fixture)
from test_fsdp import corpus, pretrain_arguments  # noqa: F401 (a fixture)

import hf_roformer_cli
from hf_roformer.training.run.run_record import RUN_RECORD
from hf_roformer.training.tasks.pretraining.task import parse_stages, stage_directory


def put_user_files(output: Path) -> dict[str, str]:
    """A note and a folder of the user's in `output`; returns what they hold."""
    (output / "notes.txt").write_text("my notes")
    (output / "mydata").mkdir()
    (output / "mydata" / "x.csv").write_text("a,b\n1,2\n")
    return {"notes.txt": "my notes", "mydata/x.csv": "a,b\n1,2\n"}


def files_under(directory: Path) -> dict[str, int]:
    return {
        path.relative_to(directory).as_posix(): path.stat().st_size for path in directory.rglob("*") if path.is_file()
    }


def assert_record_lists_what_the_run_wrote(output: Path, user_files=()) -> dict:
    """The record lists every file in `output` but itself and the user's, each with its size now."""
    written = json.loads((output / RUN_RECORD).read_text())["written"]
    assert written == {
        name: size for name, size in files_under(output).items() if name != RUN_RECORD and name not in user_files
    }
    return written


def text_classification(checkpoint: Path, data: Path, output: Path, *extra: str) -> list[str]:
    return [
        "finetune", "text-classification", "--model_name_or_path", str(checkpoint), "--train_file",
        str(data / "train.tsv"), "--validation_file", str(data / "dev.tsv"), "--output_dir", str(output),
        "--max_seq_length", "32", "--num_train_epochs", "2", "--per_device_train_batch_size", "8",
        "--save_strategy", "steps", "--save_steps", "2", "--seed", "3", "--use_cpu", "--disable_tqdm", "true", *extra,
    ]  # fmt: skip


def write_reviews(directory: Path) -> Path:
    """A TSV training file with a blank line between its records, and a dev file."""
    directory.mkdir()
    rows = [f"good movie {i}\t1" if i % 2 else f"bad plot {i}\t0" for i in range(16)]
    lines = ["text\tlabel", *rows[:2], "", *rows[2:]]
    (directory / "train.tsv").write_text("\n".join(lines) + "\n\n")
    (directory / "dev.tsv").write_text("\n".join(["text\tlabel", *rows[:6]]) + "\n")
    return directory


def test_finetune_overwrite_keeps_the_users_files(tiny_checkpoint, tmp_path, capsys):  # noqa: F811
    data = write_reviews(tmp_path / "data")
    output = tmp_path / "out"
    hf_roformer_cli.main(text_classification(tiny_checkpoint, data, output))
    printed = capsys.readouterr().out
    assert f"{data / 'train.tsv'}: 1 blank line between records, skipped (line 4)" in printed  # the trailing one: no
    first = assert_record_lists_what_the_run_wrote(output)
    assert {"model.safetensors", "README.md", "finished.json", "checkpoint-4/optimizer.pt"} <= first.keys()
    mine = put_user_files(output)
    hf_roformer_cli.main(text_classification(tiny_checkpoint, data, output, "--learning_rate", "1e-3",
                                             "--save_steps", "3", "--overwrite_output_dir"))  # fmt: skip
    printed = capsys.readouterr().out
    assert f"replacing the earlier run in {output}: removed the " in printed
    assert "kept what it did not write: mydata, notes.txt" in printed
    assert {name: (output / name).read_text() for name in mine} == mine
    second = assert_record_lists_what_the_run_wrote(output, mine)
    assert not (output / "checkpoint-2").exists() and "checkpoint-3/optimizer.pt" in second  # the earlier run's: gone
    assert json.loads((output / RUN_RECORD).read_text())["arguments"]["learning_rate"] == 1e-3


def test_pretrain_overwrite_keeps_the_users_files(corpus, tmp_path, capsys):  # noqa: F811
    output = tmp_path / "out"
    hf_roformer_cli.main(pretrain_arguments(corpus, output, "32:4:2,64:2:2"))
    assert_record_lists_what_the_run_wrote(output)
    mine = put_user_files(output)
    (output / "stage-2-len64" / "my-plot.png").write_bytes(b"\x89PNG")  # inside a folder of the run
    hf_roformer_cli.main([*pretrain_arguments(corpus, output, "32:4:2"), "--overwrite_output_dir"])
    mine["stage-2-len64/my-plot.png"] = "\x89PNG"
    assert {name: (output / name).read_bytes().decode("latin-1") for name in mine} == mine
    assert files_under(output / "stage-2-len64") == {"my-plot.png": 4}  # all the earlier stage 2 wrote is gone
    assert "kept what it did not write: mydata, notes.txt, stage-2-len64" in capsys.readouterr().out
    assert_record_lists_what_the_run_wrote(output, mine)


def test_demo_replaces_only_its_own_files(tmp_path):
    from hf_roformer.apps.demo import run_demo

    output = tmp_path / "demo"
    run_demo(str(output), epochs=0.05, max_train_examples=64, test_size=32, progress_bar=False)
    assert_record_lists_what_the_run_wrote(output)
    mine = put_user_files(output)
    run_demo(str(output), epochs=0.05, max_train_examples=64, test_size=32, progress_bar=False, from_scratch=True)
    assert {name: (output / name).read_text() for name in mine} == mine
    assert_record_lists_what_the_run_wrote(output, mine)


STAGES = "32:4:4,64:2:4"


@pytest.fixture(scope="module")
def finished_pretraining(corpus, tmp_path_factory):  # noqa: F811
    """A finished two-stage pre-training run (checkpoints every 2 steps), done in one go."""
    output = tmp_path_factory.mktemp("pretrained") / "out"
    with one_thread():
        hf_roformer_cli.main(pretrain_arguments(corpus, output, STAGES))
    return output


def truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize(
    ("stage", "damage"),
    [
        (0, lambda final: (final / "model.safetensors").unlink()),
        (0, lambda final: shutil.rmtree(final)),
        (1, lambda final: truncate(final / "model.safetensors")),
        (1, lambda final: (final / "model.safetensors").unlink()),
    ],
    ids=["stage-1-weights-removed", "stage-1-final-removed", "stage-2-weights-truncated", "stage-2-weights-removed"],
)
def test_a_stage_whose_outputs_are_damaged_is_redone(stage, damage, corpus, finished_pretraining, tmp_path, capsys):  # noqa: F811
    """After a finished run, a stage's final weights removed or cut (and the run's own weights removed): the rerun
    says the stage's marker no longer holds, redoes that stage, and ends with the uninterrupted run's weights and
    metrics."""
    output = tmp_path / "out"
    shutil.copytree(finished_pretraining, output)
    directory = stage_directory(output, stage, parse_stages(STAGES)[stage])
    damage(directory / "final")
    (output / "model.safetensors").unlink()
    capsys.readouterr()
    with one_thread():
        hf_roformer_cli.main(pretrain_arguments(corpus, output, STAGES))
    captured = capsys.readouterr()
    assert f"warning: {directory / 'finished.json'} no longer holds (final/" in captured.err
    assert captured.err.count("no longer holds") == 2  # the stage's marker and the run's
    assert f"stage {stage + 1}: " in captured.out and f"resuming from {directory / 'checkpoint-4'}" in captured.out
    assert_same_saved_weights(finished_pretraining, output)
    for marker in (Path("finished.json"), directory.relative_to(output) / "finished.json"):
        expected, actual = (json.loads((run / marker).read_text())["metrics"] for run in (finished_pretraining, output))
        assert (actual["eval_loss"], actual["eval_accuracy"]) == (expected["eval_loss"], expected["eval_accuracy"])


@pytest.mark.skipif(sys.platform != "linux", reason="torchrun with gloo is exercised on Linux")
@pytest.mark.launched
def test_processes_that_would_train_alone_are_refused(tiny_checkpoint, tmp_path):  # noqa: F811
    """`torchrun --nproc_per_node 2` without `--use_cpu` on a machine without a GPU: accelerate would run each process
    alone, both writing the output directory; refused in one line before anything is written."""
    if torch.cuda.is_available():
        pytest.skip("with GPUs the processes train together")
    data = write_reviews(tmp_path / "data")
    argv = text_classification(tiny_checkpoint, data, tmp_path / "out")
    argv.remove("--use_cpu")
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", "-m",
               "hf_roformer_cli", *argv]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONPATH": str(Path(__file__).resolve().parents[1])}
    result = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env, cwd=tmp_path)
    assert result.returncode != 0
    line = (
        f"error: 2 processes were launched (WORLD_SIZE=2), but each would train alone and all would write "
        f"{tmp_path / 'out'}; without a GPU, pass --use_cpu so that they train together (gloo)"
    )
    assert line + "\n" in result.stderr
    # torchrun's closing report, printed last, shows each rank's line (the root cause's at the very end)
    report = result.stderr.rstrip().splitlines()
    assert report[-1].startswith("=====") and report[-2] == f"  traceback : {line}", result.stderr[-3000:]
    assert result.stderr.count(f"  traceback : {line}") == 2
    assert not (tmp_path / "out").exists()


def test_a_users_file_with_an_output_name_is_never_replaced(tiny_checkpoint, tmp_path, capsys):  # noqa: F811
    data = write_reviews(tmp_path / "data")
    (data / "test.tsv").write_text("text\ngood movie\nbad plot\n")
    output = tmp_path / "out"
    hf_roformer_cli.main(text_classification(tiny_checkpoint, data, output, "--num_train_epochs", "1"))
    (output / "test_predictions.tsv").write_text("my own predictions")
    capsys.readouterr()
    rerun = text_classification(tiny_checkpoint, data, output, "--num_train_epochs", "1")
    message = cli_failure(capsys, [*rerun, "--overwrite_output_dir", "--test_file", str(data / "test.tsv")])
    assert message.strip().splitlines()[-1] == (
        f"error: {output / 'test_predictions.tsv'}: already there and not written by `hf-roformer finetune "
        f"text-classification` (the run record {RUN_RECORD} does not list it), so this run will not replace it; move "
        "it elsewhere, or give another --output_dir"
    )
    assert (output / "test_predictions.tsv").read_text() == "my own predictions"
    assert "test_predictions.tsv" not in json.loads((output / RUN_RECORD).read_text())["written"]
    assert not [path.name for path in output.iterdir() if path.name.startswith(".writing-")]
