"""Fine-tuning with the Trainer: GLUE (all 9 tasks) and CAIL2019-SCM from their published formats, metrics, resume,
DDP, bad input, and the demo."""

import json
import logging
import math
import os
import subprocess
import sys
from pathlib import Path

import huggingface_hub
import numpy as np
import pytest
import torch
from conftest import assert_uploaded_after_the_run, replace_the_hub

import hf_roformer
import hf_roformer_cli
from hf_roformer.training.run.finetune import describe_head
from hf_roformer.training.tasks.classification_metrics import glue_metrics, triplet_accuracy
from hf_roformer.training.tasks.glue.files import GLUE_TASKS
from hf_roformer.training.tasks.multiple_choice.task import multiple_choice_head
from hf_roformer.training.tasks.question_answering.task import question_answering_head
from hf_roformer.utils.errors import DataError, UsageError


pytestmark = pytest.mark.releases("training.run.training_run")  # see setup.cfg


ASCII = [chr(code) for code in range(33, 127) if not chr(code).isupper()]


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory):
    """A tiny random RoFormer with a char-level tokenizer over ASCII, saved like a pre-trained checkpoint."""
    path = tmp_path_factory.mktemp("checkpoint")
    vocab = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]", *ASCII, *("##" + c for c in ASCII if c.isalnum())]
    tokenizer = hf_roformer.HfRoFormerTokenizer({token: i for i, token in enumerate(vocab)}, word_level=False)
    torch.manual_seed(0)
    config = hf_roformer.HfRoFormerConfig(
        vocab_size=len(vocab),
        hidden_size=32,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=64,
        max_position_embeddings=64,
        hidden_dropout_prob=0.0,
        attention_probs_dropout_prob=0.0,
    )
    hf_roformer.HfRoFormerModel(config).save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


WORDS = "the a good bad movie film was is great awful fine plot actor story not very".split()


def sentence(rng, length=6):
    return " ".join(rng.choice(WORDS) for _ in range(length))


def write_tsv(path: Path, rows: list[list[str]]):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join("\t".join(row) + "\n" for row in rows), encoding="utf-8")


def make_glue(root: Path, name: str, examples: int = 24, seed: int = 0) -> Path:
    """Tiny files of one GLUE task, with the columns and headers of the published files."""
    rng = np.random.default_rng(seed)
    task = GLUE_TASKS[name]
    directory = root / task.directory

    def label():
        if task.is_regression:
            return f"{rng.uniform(0, 5):.3f}"
        return str(rng.choice(task.labels))

    mnli_cols = "index promptID pairID genre sentence1_binary_parse sentence2_binary_parse".split()
    mnli_cols += "sentence1_parse sentence2_parse sentence1 sentence2".split()
    for split, file in task.splits.items():
        test = split.startswith("test")
        n = examples if split == "train" else examples // 2
        if name == "cola":
            if test:
                rows = [["index", "sentence"]] + [[str(i), sentence(rng)] for i in range(n)]
            else:
                rows = [["gj04", label(), "", sentence(rng)] for _ in range(n)]
        elif name == "sst2":
            header = ["index", "sentence"] if test else ["sentence", "label"]
            rows = [header] + [[str(i), sentence(rng)] if test else [sentence(rng), label()] for i in range(n)]
        elif name == "mrpc":
            header = ["index" if test else "Quality", "#1 ID", "#2 ID", "#1 String", "#2 String"]
            rows = [header] + [[str(i) if test else label(), "1", "2", sentence(rng), sentence(rng)] for i in range(n)]
        elif name == "stsb":
            header = "index genre filename year old_index source1 source2 sentence1 sentence2".split()
            header += [] if test else ["score"]
            rows = [header] + [
                [str(i), "main", "f", "2012", "0", "none", "none", sentence(rng), sentence(rng)]
                + ([] if test else [label()])
                for i in range(n)
            ]
        elif name == "qqp":
            header = (
                ["id", "question1", "question2"]
                if test
                else ["id", "qid1", "qid2", "question1", "question2", "is_duplicate"]
            )
            rows = [header] + [
                [str(i), sentence(rng), sentence(rng)]
                if test
                else [str(i), "1", "2", sentence(rng), sentence(rng), label()]
                for i in range(n)
            ]
        elif name == "mnli":
            header = mnli_cols + ([] if test else (["label1", "gold_label"]))
            rows = [header] + [
                [str(i), "1", "1n", "fiction", "(", "(", "(", "(", sentence(rng), sentence(rng)]
                + ([] if test else [label(), label()])
                for i in range(n)
            ]
        else:  # qnli, rte, wnli
            first, second = ("question", "sentence") if name == "qnli" else ("sentence1", "sentence2")
            header = ["index", first, second] + ([] if test else ["label"])
            rows = [header] + [[str(i), sentence(rng), sentence(rng)] + ([] if test else [label()]) for i in range(n)]
        write_tsv(directory / file, rows)
    return root


def run_glue(argv: list[str]) -> dict:
    """`hf-roformer finetune glue ARGV`, returning the run's metrics."""
    return hf_roformer_cli.run(["finetune", "glue", *argv])


def run_cail(argv: list[str]) -> dict:
    """`hf-roformer finetune cail2019-scm ARGV`, returning the run's metrics."""
    return hf_roformer_cli.run(["finetune", "cail2019-scm", *argv])


def run_text_classification(argv: list[str]) -> dict:
    """`hf-roformer finetune text-classification ARGV`, returning the run's metrics."""
    return hf_roformer_cli.run(["finetune", "text-classification", *argv])


def glue_argv(checkpoint, data_dir, output_dir, task, *extra):
    return [
        "--task", task, "--model", str(checkpoint), "--data_dir", str(data_dir), "--output_dir", str(output_dir),
        "--max_length", "32", "--num_train_epochs", "1", "--per_device_train_batch_size", "8",
        "--learning_rate", "1e-3", "--use_cpu", "--disable_tqdm", "true", "--save_strategy", "no",
        "--eval_strategy", "no", *extra,
    ]  # fmt: skip


@pytest.mark.parametrize("task", sorted(GLUE_TASKS))
def test_every_glue_task_runs_end_to_end(task, tiny_checkpoint, tmp_path):
    data = make_glue(tmp_path / "glue", task)
    output = tmp_path / "out"
    metrics = run_glue(glue_argv(tiny_checkpoint, data, output, task))
    spec = GLUE_TASKS[task]
    for name in spec.metrics:
        assert f"eval_{name}" in metrics and math.isfinite(metrics[f"eval_{name}"]), name
    if task == "mnli":
        assert "eval_mismatched_accuracy" in metrics
    assert (
        json.loads((output / "eval_results.json").read_text())["eval_" + spec.metrics[0]]
        == metrics["eval_" + spec.metrics[0]]
    )
    for _split, file in spec.submission.items():
        lines = (output / file).read_text().splitlines()
        assert lines[0] == "index\tprediction"
        assert len(lines) == 1 + 12
        for line in lines[1:]:
            index, prediction = line.split("\t")
            if spec.is_regression:
                assert 0.0 <= float(prediction) <= 5.0
            else:
                assert prediction in spec.labels
    card = (output / "README.md").read_text()
    assert "model-index" in card and "glue" in card
    metadata = huggingface_hub.ModelCard.load(output / "README.md").data
    assert (metadata.library_name, metadata.pipeline_tag) == ("transformers", "text-classification")
    assert {"hf_roformer", "generated_from_trainer"} <= set(metadata.tags)
    assert metadata.base_model is None  # a local directory is no Hub id: named in the text instead
    assert f"fine-tuned version of the local checkpoint `{tiny_checkpoint}`" in card
    reloaded = hf_roformer.HfRoFormerForSequenceClassification.from_pretrained(output)
    assert reloaded.config.num_labels == (1 if spec.is_regression else len(spec.labels))
    assert hf_roformer.HfRoFormerTokenizer.from_pretrained(output).model_max_length == 64  # max_position_embeddings


def test_push_to_hub_uploads_the_model_then_its_card(tiny_checkpoint, tmp_path, monkeypatch):
    """`--push_to_hub`, the Hub replaced and transformers' Trainer pushing for real: the model pushed as it is saved
    and again once the run finished, then the card with the results."""
    calls = replace_the_hub(monkeypatch)
    data = make_glue(tmp_path / "glue", "sst2")
    output = tmp_path / "out"
    metrics = run_glue(glue_argv(tiny_checkpoint, data, output, "sst2", "--push_to_hub", "--hub_token", "hf_x"))
    assert_uploaded_after_the_run(calls, output, f"Accuracy: {round(metrics['eval_accuracy'], 4)}")
    assert "tokenizer_config.json" in calls[2][4]


def test_phases_are_what_the_command_line_asks_for():
    """All three unless some are named; `eval_strategy` (which sets `do_eval` in TrainingArguments) is no request."""
    from hf_roformer_cli import build_parser
    from hf_roformer_cli.trainer_options import requested_phases

    def phases(*argv):
        base = ["finetune", "glue", "--task_name", "sst2", "--model", "m", "--data_dir", "d", "--output_dir", "o"]
        args, _ = build_parser().parse_known_args([*base, *argv])
        return requested_phases(args)

    assert phases() == (True, True, True)
    assert phases("--eval_strategy", "epoch") == (True, True, True)
    assert phases("--do_eval") == (False, True, False)
    assert phases("--do-eval", "--do_predict", "true") == (False, True, True)
    assert phases("--do_train", "--do_eval", "false") == (True, False, False)


@pytest.mark.parametrize("task", ["text-classification", "multiple-choice", "sentence-embedding"])
def test_do_predict_without_a_test_file_is_refused_before_anything_is_read(task, tmp_path):
    output = tmp_path / "out"
    argv = ["finetune", task, "--model", str(tmp_path / "none"), "--train_file", str(tmp_path / "train.tsv"),
            "--validation_file", str(tmp_path / "dev.tsv"), "--output_dir", str(output), "--do_predict"]  # fmt: skip
    with pytest.raises(UsageError) as error:
        hf_roformer_cli.run(argv)
    assert str(error.value) == "--do_predict cannot apply: no --test_file was given, so there is nothing to predict"
    assert not output.exists()


def test_do_predict_is_left_to_the_task_where_a_directory_may_hold_a_test_split():
    from hf_roformer_cli import build_parser
    from hf_roformer_cli.trainer_options import check_phases_apply

    def check(*argv):
        args, _ = build_parser().parse_known_args(["finetune", *argv, "--model", "m", "--output_dir", "o"])
        check_phases_apply(args)

    check("glue", "--task_name", "sst2", "--data_dir", "d", "--do_predict")
    check("cail2019-scm", "--data_dir", "d", "--do_predict")
    check("text-classification", "--train_file", "t", "--validation_file", "v", "--do_predict", "false")
    with pytest.raises(UsageError, match="--do_predict cannot apply"):
        check("glue", "--task_name", "sst2", "--train_file", "t", "--validation_file", "v", "--do_predict")


def test_evaluation_only_run_writes_results_and_no_card(tiny_checkpoint, tmp_path, capsys):
    data = make_glue(tmp_path / "glue", "sst2")
    trained = run_glue(glue_argv(tiny_checkpoint, data, tmp_path / "trained", "sst2"))
    hf_roformer_cli.main(
        ["finetune", "glue", "--task_name", "sst2", "--model_name_or_path", str(tmp_path / "trained"), "--data_dir",
         str(data), "--output_dir", str(tmp_path / "evaluated"), "--max_seq_length", "32", "--use_cpu", "--do_eval"]
    )  # fmt: skip
    evaluated = json.loads((tmp_path / "evaluated" / "eval_results.json").read_text())
    assert evaluated["eval_accuracy"] == trained["eval_accuracy"]
    assert evaluated["eval_loss"] == pytest.approx(trained["eval_loss"], abs=1e-6)
    written = {path.name for path in (tmp_path / "evaluated").iterdir()}
    assert "eval_results.json" in written
    assert not written & {"README.md", "finished.json", "model.safetensors", "SST-2.tsv", "train_results.json"}
    assert "without training (--do_train not given)" in capsys.readouterr().out


def test_unknown_glue_task_is_refused_with_the_list(tmp_path, capsys):
    argv = ["--model_name_or_path", "m", "--data_dir", "d", "--output_dir", str(tmp_path / "o")]
    with pytest.raises(SystemExit) as exit_info:
        hf_roformer_cli.main(["finetune", "glue", "--task_name", "sst-2", *argv])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err == (
        "error: argument --task_name: invalid choice: 'sst-2' (choose from 'cola', 'sst2', 'mrpc', 'stsb', 'qqp', "
        "'mnli', 'qnli', 'rte', 'wnli'); did you mean 'sst2'? (`hf-roformer finetune glue --help` lists the options)\n"
    )
    with pytest.raises(SystemExit):
        hf_roformer_cli.main(["finetune", "sst2-foo", *argv])
    assert capsys.readouterr().err.startswith(
        "error: argument TASK: invalid choice: 'sst2-foo' (choose from 'glue', 'text-classification', 'cail2019-scm', "
        "'token-classification', 'question-answering', 'multiple-choice', 'sentence-embedding')"
    )
    assert not (tmp_path / "o").exists()


def test_run_glue_names_and_the_short_aliases_mean_the_same():
    from hf_roformer_cli import build_parser

    long = ["--model_name_or_path", "m", "--task_name", "rte", "--max_seq_length", "64", "--output_dir", "o",
            "--data_dir", "d"]  # fmt: skip
    short = ["--model", "m", "--task", "rte", "--max-length", "64", "--output-dir", "o", "--data-dir", "d"]
    first, second = (build_parser().parse_known_args(["finetune", "glue", *argv]) for argv in (long, short))
    assert vars(first[0]) == vars(second[0]) and first[0].max_seq_length == 64 and first[0].output_dir == "o"


def test_card_links_only_hub_bases():
    from hf_roformer.training.run.cards import describe_base, hub_base_model

    assert hub_base_model("junnyu/roformer_chinese_base") == "junnyu/roformer_chinese_base"
    assert hub_base_model("shipped:roformer-zh-char-small") is None
    assert hub_base_model(str(hf_roformer.pretrained_checkpoint())) is None
    assert "[junnyu/roformer_chinese_base](https://huggingface.co/junnyu" in describe_base(
        "junnyu/roformer_chinese_base"
    )
    assert "shipped with hf_roformer" in describe_base("shipped:roformer-zh-char-small")


def test_glue_from_explicit_task_files(tiny_checkpoint, tmp_path):
    data = make_glue(tmp_path / "glue", "rte")
    files = ["--train_file", str(data / "RTE" / "train.tsv"), "--validation_file", str(data / "RTE" / "dev.tsv")]
    argv = glue_argv(tiny_checkpoint, data, tmp_path / "out", "rte", *files)
    argv[argv.index("--data_dir") : argv.index("--data_dir") + 2] = []
    metrics = run_glue(argv)
    assert "eval_accuracy" in metrics and not (tmp_path / "out" / "RTE.tsv").exists()  # no test file given


def test_text_classification_regression_from_json_lines(tiny_checkpoint, tmp_path):
    rng = np.random.default_rng(0)
    for name, count in (("train.jsonl", 24), ("dev.jsonl", 8), ("test.jsonl", 6)):
        records = [{"text": sentence(rng), "score": float(rng.uniform(0, 1))} for _ in range(count)]
        (tmp_path / name).write_text("".join(json.dumps(record) + "\n" for record in records))
    metrics = run_text_classification(
        ["--model_name_or_path", str(tiny_checkpoint), "--train_file", str(tmp_path / "train.jsonl"),
         "--validation_file", str(tmp_path / "dev.jsonl"), "--test_file", str(tmp_path / "test.jsonl"),
         "--label_column_name", "score", "--output_dir", str(tmp_path / "out"), "--max_seq_length", "32",
         "--num_train_epochs", "1", "--per_device_train_batch_size", "8", "--use_cpu", "--disable_tqdm", "true"]
    )  # fmt: skip
    assert {"eval_pearson", "eval_spearmanr", "eval_mse", "test_mse"} <= metrics.keys()
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert len(config["id2label"]) == 1 and config["problem_type"] == "regression"
    lines = (tmp_path / "out" / "test_predictions.tsv").read_text().splitlines()
    assert (
        lines[0] == "index\tprediction"
        and len(lines) == 7
        and all(math.isfinite(float(line.split("\t")[1])) for line in lines[1:])
    )


def test_glue_metric_values_on_known_predictions():
    labels = np.array([1, 1, 0, 0, 1, 0])
    predictions = np.array([1, 0, 0, 0, 1, 1])
    # tp=2, fn=1, fp=1, tn=2
    scores = glue_metrics(("accuracy", "f1", "matthews_correlation"), predictions, labels)
    assert scores["accuracy"] == pytest.approx(4 / 6)
    assert scores["f1"] == pytest.approx(2 * 2 / (2 * 2 + 1 + 1))
    assert scores["matthews_correlation"] == pytest.approx((2 * 2 - 1 * 1) / math.sqrt(3 * 3 * 3 * 3))
    x = np.array([1.0, 2.0, 3.0, 4.0])
    y = np.array([1.0, 3.0, 2.0, 5.0])
    scores = glue_metrics(("pearson", "spearmanr"), x, y)
    mean_x, mean_y = x.mean(), y.mean()
    pearson = ((x - mean_x) * (y - mean_y)).sum() / math.sqrt(((x - mean_x) ** 2).sum() * ((y - mean_y) ** 2).sum())
    assert scores["pearson"] == pytest.approx(pearson)
    assert scores["spearmanr"] == pytest.approx(1 - 6 * (0 + 1 + 1 + 0) / (4 * (16 - 1)))


def test_triplet_accuracy_on_hand_made_scores():
    scores = np.array([0.9, 0.1, 0.2, 0.8, 0.5, 0.5, 0.3, 0.4])  # (AB, AC) per triplet
    assert triplet_accuracy(scores, ["B", "C", "B", "B"]) == pytest.approx(2 / 4)
    assert triplet_accuracy(scores.reshape(-1, 1), ["B", "C", "C", "C"]) == pytest.approx(3 / 4)
    with pytest.raises(ValueError):
        triplet_accuracy(scores, ["B"])


def write_cail(directory: Path, triplets: int = 6, length: int = 1500, seed: int = 0):
    rng = np.random.default_rng(seed)
    directory.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):
        with open(directory / f"{split}.json", "w", encoding="utf-8") as handle:
            for _ in range(triplets):
                record = {key: sentence(rng, length // 5) for key in "ABC"}
                record["label"] = str(rng.choice(["B", "C"]))
                handle.write(json.dumps(record) + "\n")


def test_cail_runs_at_1024_tokens_with_rope_scaling(tiny_checkpoint, tmp_path):
    write_cail(tmp_path / "cail")
    output = tmp_path / "out"
    rope = json.dumps({"rope_type": "ntk", "factor": 16.0})
    metrics = run_cail(
        [
            "--data_dir", str(tmp_path / "cail"), "--model", str(tiny_checkpoint), "--output_dir", str(output),
            "--max_length", "1024", "--rope_parameters", rope, "--num_train_epochs", "1", "--use_cpu",
            "--disable_tqdm", "true", "--per_device_eval_batch_size", "4",
        ]
    )  # fmt: skip
    assert 0.0 <= metrics["eval_triplet_accuracy"] <= 1.0
    assert 0.0 <= metrics["test_triplet_accuracy"] <= 1.0
    results = huggingface_hub.ModelCard.load(output / "README.md").data.eval_results
    assert results and results[0].metric_value == pytest.approx(metrics["eval_triplet_accuracy"])
    saved = hf_roformer.HfRoFormerForSequenceClassification.from_pretrained(output)
    assert saved.config.rope_parameters["rope_type"] == "ntk"
    assert saved.config.classifier_pooling == "mean" and saved.config.num_labels == 1
    predictions = (output / "test_predictions.json").read_text().splitlines()
    assert len(predictions) == 6 and all(json.loads(line)["label"] in ("B", "C") for line in predictions)
    tokenizer = hf_roformer.HfRoFormerTokenizer.from_pretrained(output)
    record = json.loads((tmp_path / "cail" / "train.json").read_text().splitlines()[0])
    assert len(tokenizer(record["A"], record["B"], truncation=True, max_length=1024)["input_ids"]) == 1024


def final_weights(directory: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(directory / "model.safetensors")


def test_resumed_run_equals_uninterrupted_run(tiny_checkpoint, tmp_path):
    """Resuming from the checkpoint written at step 4 of an 8-step run (what an interruption leaves behind) ends with
    the uninterrupted run's metrics and weights."""
    import shutil

    data = make_glue(tmp_path / "glue", "sst2", examples=64)
    common = ["--save_strategy", "steps", "--save_steps", "4", "--max_steps", "8", "--seed", "3"]
    whole = run_glue(glue_argv(tiny_checkpoint, data, tmp_path / "whole", "sst2", *common))
    interrupted = tmp_path / "interrupted"
    interrupted.mkdir()
    shutil.copytree(tmp_path / "whole" / "checkpoint-4", interrupted / "checkpoint-4")
    shutil.copy(tmp_path / "whole" / "hf_roformer_run.json", interrupted)  # the record a run writes first
    resumed = run_glue(
        glue_argv(
            tiny_checkpoint,
            data,
            interrupted,
            "sst2",
            *common,
            "--resume_from_checkpoint",
            str(interrupted / "checkpoint-4"),
        )
    )
    assert resumed["eval_accuracy"] == whole["eval_accuracy"]
    assert resumed["eval_loss"] == pytest.approx(whole["eval_loss"], abs=1e-6)
    expected, actual = final_weights(tmp_path / "whole"), final_weights(interrupted)
    assert expected.keys() == actual.keys()
    for name in expected:
        torch.testing.assert_close(actual[name], expected[name], atol=1e-6, rtol=0, msg=name)


DDP_SCRIPT = """
import sys
import hf_roformer_cli
hf_roformer_cli.main(["finetune", "glue", *sys.argv[1:]])
"""


def logged_losses(output_dir: Path) -> list[float]:
    state = json.loads((output_dir / "trainer_state.json").read_text())
    return [entry["loss"] for entry in state["log_history"] if "loss" in entry]


@pytest.mark.skipif(sys.platform != "linux", reason="torchrun with gloo is exercised on Linux")
@pytest.mark.launched
def test_torchrun_two_processes_matches_one_process(tiny_checkpoint, tmp_path):
    data = make_glue(tmp_path / "glue", "sst2", examples=64)
    steps = ["--max_steps", "4", "--logging_steps", "1", "--seed", "5", "--dataloader_num_workers", "0"]
    single = tmp_path / "single"
    run_glue(glue_argv(tiny_checkpoint, data, single, "sst2", *steps, "--per_device_train_batch_size", "8"))
    script = tmp_path / "ddp.py"
    script.write_text(DDP_SCRIPT)
    command = [
        sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2", str(script),
        *glue_argv(tiny_checkpoint, data, tmp_path / "ddp", "sst2", *steps, "--per_device_train_batch_size", "4",
                   "--ddp_backend", "gloo"),
    ]  # fmt: skip
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    result = subprocess.run(command, capture_output=True, text=True, timeout=600, env=env)
    assert result.returncode == 0, result.stderr[-4000:]
    ddp_losses, single_losses = logged_losses(tmp_path / "ddp"), logged_losses(single)
    assert len(ddp_losses) == len(single_losses) == 4
    np.testing.assert_allclose(ddp_losses, single_losses, atol=1e-4, rtol=0)


@pytest.mark.parametrize(
    ("corrupt", "message"),
    [
        (lambda lines: lines[:3] + [lines[3] + "\textra"] + lines[4:], r"SST-2/train.tsv:4: expected 2"),
        (lambda lines: ["sentence\tgrade"] + lines[1:], r"SST-2/train.tsv:1: missing column\(s\) \['label'\]"),
        (
            lambda lines: lines[:5] + ["nice movie\tpositive"] + lines[6:],
            r"SST-2/train.tsv:6: unknown label 'positive'",
        ),
        (lambda lines: lines[:1], r"SST-2/train.tsv: the split 'train' has no examples"),
    ],
)
def test_bad_glue_data_names_file_and_line(corrupt, message, tiny_checkpoint, tmp_path):
    data = make_glue(tmp_path / "glue", "sst2")
    train = data / "SST-2" / "train.tsv"
    train.write_text("\n".join(corrupt(train.read_text().splitlines())) + "\n")
    output = tmp_path / "out"
    with pytest.raises(DataError, match=message):
        run_glue(glue_argv(tiny_checkpoint, data, output, "sst2"))
    assert not output.exists()


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{not json", r"valid.json:2: not valid JSON"),
        ('{"A": "a", "B": "b", "label": "B"}', r"valid.json:2: missing key\(s\) \['C'\]"),
        ('{"A": "a", "B": "b", "C": "c", "label": "D"}', r"valid.json:2: unknown label 'D'"),
    ],
)
def test_bad_cail_data_names_file_and_line(line, message, tiny_checkpoint, tmp_path):
    write_cail(tmp_path / "cail", triplets=2, length=20)
    valid = tmp_path / "cail" / "valid.json"
    valid.write_text(valid.read_text().splitlines()[0] + "\n" + line + "\n")
    output = tmp_path / "out"
    with pytest.raises(DataError, match=message):
        run_cail(["--data_dir", str(tmp_path / "cail"), "--model", str(tiny_checkpoint), "--output_dir", str(output)])
    assert not output.exists()


def test_glue_from_a_saved_datasets_directory(tiny_checkpoint, tmp_path):
    """The `datasets` GLUE schema (label ids by the hub's names) read through `--dataset_dir`."""
    import datasets

    features = datasets.Features(
        {
            "premise": datasets.Value("string"),
            "hypothesis": datasets.Value("string"),
            "label": datasets.ClassLabel(names=["entailment", "neutral", "contradiction"]),
            "idx": datasets.Value("int32"),
        }
    )
    rng = np.random.default_rng(0)

    def split(n, labelled=True):
        return datasets.Dataset.from_dict(
            {
                "premise": [sentence(rng) for _ in range(n)],
                "hypothesis": [sentence(rng) for _ in range(n)],
                "label": [int(rng.integers(3)) if labelled else -1 for _ in range(n)],
                "idx": list(range(n)),
            },
            features=features,
        )

    splits = {"train": split(16), "validation_matched": split(8), "validation_mismatched": split(8)}
    splits |= {"test_matched": split(4, False), "test_mismatched": split(4, False)}
    datasets.DatasetDict(splits).save_to_disk(tmp_path / "mnli")
    argv = glue_argv(tiny_checkpoint, tmp_path / "x", tmp_path / "out", "mnli")
    argv[argv.index("--data_dir") : argv.index("--data_dir") + 2] = ["--dataset_dir", str(tmp_path / "mnli")]
    metrics = run_glue(argv)
    assert "eval_accuracy" in metrics and "eval_mismatched_accuracy" in metrics
    assert len((tmp_path / "out" / "MNLI-mm.tsv").read_text().splitlines()) == 5


@pytest.mark.parametrize("from_scratch", [False, True], ids=["pretrained", "scratch"])
def test_demo_flow_on_a_small_sample(tmp_path, capsys, from_scratch):
    from hf_roformer.apps.demo import run_demo

    metrics = run_demo(
        str(tmp_path / "demo"), epochs=0.25, max_train_examples=600, test_size=200, from_scratch=from_scratch
    )
    output = capsys.readouterr().out
    expected = "model: random weights" if from_scratch else "model: pre-trained roformer-zh-char-small (embeddings"
    assert expected in output
    assert "held-out accuracy" in output and "saved model, tokenizer and model card" in output
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0
    assert (tmp_path / "demo" / "README.md").exists() and (tmp_path / "demo" / "vocab.txt").exists()
    card = huggingface_hub.ModelCard.load(tmp_path / "demo" / "README.md")
    assert card.data.pipeline_tag == "text-classification" and card.data.base_model is None
    assert f"**{metrics['eval_accuracy']:.2%}**" in card.text and card.data.eval_results[0].metric_type == "accuracy"
    if from_scratch:
        assert "trained from randomly initialized weights" in card.text and "fine-tuned" not in card.text
    else:
        assert "fine-tuned version of `roformer-zh-char-small`" in card.text and "from scratch" not in card.text
    assert output.count("  positive ") + output.count("  negative ") == 3
    tokenizer = hf_roformer.HfRoFormerTokenizer.from_pretrained(tmp_path / "demo")
    assert tokenizer.model_max_length == 512  # the checkpoint's trained length


def test_demo_starts_from_the_shipped_weights(monkeypatch, tmp_path):
    """The pre-trained start loads the shipped embeddings and first layers exactly; only the head is new."""
    from transformers import AutoModelForMaskedLM

    from hf_roformer.apps import demo

    loaded = {}

    def fake_trainer(model, **kwargs):
        loaded["model"] = model
        raise KeyboardInterrupt  # stop before training

    monkeypatch.setattr(demo, "Trainer", fake_trainer)
    with pytest.raises(KeyboardInterrupt):
        demo.run_demo(str(tmp_path / "demo"), max_train_examples=50, test_size=20)
    shipped = AutoModelForMaskedLM.from_pretrained(hf_roformer.pretrained_checkpoint()).roformer.state_dict()
    actual = loaded["model"].roformer.state_dict()
    assert len(loaded["model"].roformer.encoder.layer) == demo.DEMO_LAYERS
    assert any(name.startswith("encoder.layer.1.") for name in actual)
    for name, tensor in actual.items():
        torch.testing.assert_close(tensor, shipped[name], rtol=0, atol=0, msg=name)


@pytest.mark.slow
def test_full_demo_reaches_85_percent_and_beats_training_from_scratch(tmp_path):
    from hf_roformer.apps.demo import run_demo

    pretrained = run_demo(str(tmp_path / "pretrained"))["eval_accuracy"]
    scratch = run_demo(str(tmp_path / "scratch"), from_scratch=True)["eval_accuracy"]
    # Measured when the recipe was chosen: see docs/fine-tuning.md.
    assert pretrained >= 0.85 and pretrained > scratch, (pretrained, scratch)


def test_saved_trained_length_is_the_longest_training_input(tiny_checkpoint, tmp_path, capsys):
    """`--max_seq_length 100000` on texts of about 100 tokens: the config and the tokenizer carry the longest
    tokenized training input, and the rope-scaling note computes its factor from the longest input."""
    rng = np.random.default_rng(0)
    texts = {split: [sentence(rng, int(rng.integers(20, 40))) for _ in range(8)] for split in ("train", "dev")}
    for split, rows in texts.items():
        (tmp_path / f"{split}.csv").write_text("text,label\n" + "".join(f"{t},{i % 2}\n" for i, t in enumerate(rows)))
    tokenizer = hf_roformer.HfRoFormerTokenizer.from_pretrained(tiny_checkpoint)
    longest = {split: max(len(tokenizer(text)["input_ids"]) for text in rows) for split, rows in texts.items()}
    assert 64 < longest["train"] != longest["dev"]
    output = tmp_path / "out"
    hf_roformer_cli.main(
        ["finetune", "text-classification", "--model", str(tiny_checkpoint), "--train_file",
         str(tmp_path / "train.csv"), "--validation_file", str(tmp_path / "dev.csv"), "--output_dir", str(output),
         "--max_seq_length", "100000", "--max_steps", "1", "--use_cpu", "--disable_tqdm", "true", "--save_strategy",
         "no", "--eval_strategy", "no", "--do_train"]
    )  # fmt: skip
    assert json.loads((output / "config.json").read_text())["max_position_embeddings"] == longest["train"]
    assert json.loads((output / "tokenizer_config.json").read_text())["model_max_length"] == longest["train"]
    reach, factor = max(longest.values()), -(-max(longest.values()) // 64)
    assert (
        f"note: inputs up to {reach} tokens: 16 of 16 texts are longer than the 64 tokens the checkpoint was trained "
        f"at. RoPE has no position table, so the model runs at any length, but distances past 64 are new to it; rope "
        f"scaling maps them into the trained range, e.g. --rope_parameters '{{\"rope_type\": \"ntk\", \"factor\": "
        f"{factor}.0}}'"
    ) in capsys.readouterr().out


@pytest.mark.parametrize(
    ("head", "model_class", "outputs"),
    [
        (
            multiple_choice_head,
            hf_roformer.HfRoFormerForMultipleChoice,
            ("one score a choice", ", read at its first token ([CLS]; summary_type 'first')"),
        ),
        (question_answering_head, hf_roformer.HfRoFormerForQuestionAnswering, ("a start and an end score a token", "")),
    ],
    ids=["multiple-choice", "question-answering"],
)
def test_heads_that_score_choices_or_spans_are_described_by_what_they_give(head, model_class, outputs):
    """A multiple-choice or span head has no labels: the start of a run says what it gives, not the config's default
    `num_labels` ("2 labels" for a 4-choice task)."""
    from conftest import tiny_config

    head = head()
    model = model_class(tiny_config())
    prefix = head.weight_prefixes[0]
    outputs, new_head_note = outputs
    new = {"missing_keys": [f"{prefix}weight", f"{prefix}bias"], "unexpected_keys": ["cls.predictions.bias"]}
    assert describe_head(model, new, head) == [
        (logging.INFO, f"new {head.name} head: {outputs}{new_head_note}; the checkpoint's masked-LM head goes unused")
    ]
    assert describe_head(model, {}, head) == [(logging.INFO, f"{head.name} head from the checkpoint: {outputs}")]
