"""`hf-roformer finetune sentence-embedding`: pair files read in their published layouts, CoSENT and in-batch
negatives through sentence-transformers' trainer, RoFormer-Sim's pooler kept, and the saved model's vectors equal in
`SentenceTransformer` and in the plain model."""

import json
import logging
import random

import huggingface_hub
import pytest
import torch
from conftest import (
    assert_same_saved_weights,
    assert_uploaded_after_the_run,
    cli_failure,
    replace_the_hub,
    save_tiny_chinese_checkpoint,
)
from transformers import AutoTokenizer

import hf_roformer
import hf_roformer_cli
from hf_roformer.training.tasks.sentence_embedding.files import read_sentence_pairs
from hf_roformer.utils.errors import DataError, UsageError


sentence_transformers = pytest.importorskip("sentence_transformers")

FIRST = ["今天天气很好", "我喜欢吃苹果", "这部电影很好看", "北京是中国的首都", "他在上海工作", "明天会下雨吗"]
SECOND = ["今天的天气不错", "我爱吃苹果", "这电影真好看", "中国的首都是北京", "他的工作在上海", "明天下雨吗"]


def labelled_pairs(count: int, seed: int) -> list[tuple[str, str, int]]:
    rng = random.Random(seed)
    pairs = []
    for _ in range(count):
        x = rng.randrange(len(FIRST))
        y = x if rng.random() < 0.5 else rng.randrange(len(FIRST))
        pairs.append((FIRST[x], SECOND[y], int(x == y)))
    return pairs


def write_tsv(path, rows):
    path.write_text("".join("\t".join(map(str, row)) + "\n" for row in rows), encoding="utf-8")
    return path


def test_pair_files_read_in_their_published_layouts(tmp_path):
    lcqmc = read_sentence_pairs(write_tsv(tmp_path / "lcqmc.tsv", [("a", "b", 1), ("c", "d", 0)]))
    assert lcqmc.to_dict() == {"sentence1": ["a", "c"], "sentence2": ["b", "d"], "score": [1.0, 0.0]}
    stsb_rows = [
        ("index", "genre", "sentence1", "sentence2", "score"),
        (0, "main", "a", "b", 4.5),
        (1, "main", "c", "d", 0.2),
    ]
    stsb = read_sentence_pairs(write_tsv(tmp_path / "sts.tsv", stsb_rows))
    assert stsb.to_dict() == {"sentence1": ["a", "c"], "sentence2": ["b", "d"], "score": [4.5, 0.2]}
    afqmc = tmp_path / "afqmc.json"
    afqmc.write_text(
        '{"sentence1": "a", "sentence2": "b", "label": "1"}\n{"sentence1": "c", "sentence2": "d", "label": "0"}\n'
    )
    assert read_sentence_pairs(afqmc).to_dict() == lcqmc.to_dict()
    unlabelled = read_sentence_pairs(write_tsv(tmp_path / "pairs.tsv", [("a", "b"), ("c", "d")]))
    assert unlabelled.column_names == ["sentence1", "sentence2"]


@pytest.mark.parametrize(
    ("rows", "message"),
    [
        ([("a", "b", 1), ("c", "d")], r"bad.tsv:2: expected 3 fields, found 2"),
        ([("a", "b", 1), ("c", "d", "yes")], r"bad.tsv:2: the label 'yes' is not a number"),
        ([("a", "b", 1), ("c", " ", 0)], r"bad.tsv:2: empty sentence"),
    ],
)
def test_bad_pairs_name_file_and_line(rows, message, tmp_path):
    with pytest.raises(DataError, match=message):
        read_sentence_pairs(write_tsv(tmp_path / "bad.tsv", rows))


def tiny_checkpoint(path, pooler_activation=None):
    return save_tiny_chinese_checkpoint(path, pooler_activation=pooler_activation)


def command(checkpoint, train_file, validation_file, output, *extra) -> list[str]:
    """The command line of a run; without `--train_file` when `train_file` is None."""
    training = [] if train_file is None else ["--train_file", str(train_file)]
    return [
        "finetune", "sentence-embedding", "--model", str(checkpoint), *training,
        "--validation_file", str(validation_file), "--output_dir", str(output), "--max_seq_length", "32",
        "--per_device_train_batch_size", "8", "--learning_rate", "1e-3", "--use_cpu", "--disable_tqdm", "true",
        "--save_strategy", "no", *extra,
    ]  # fmt: skip


def train(checkpoint, train_file, validation_file, output, *extra):
    return hf_roformer_cli.run(command(checkpoint, train_file, validation_file, output, *extra))


def test_cosent_run_saves_a_sentence_transformer_with_the_same_vectors(tmp_path):
    checkpoint = tiny_checkpoint(tmp_path / "base")
    train_file = write_tsv(tmp_path / "train.tsv", labelled_pairs(32, 0))
    validation_file = write_tsv(tmp_path / "dev.tsv", labelled_pairs(16, 1))
    test_file = write_tsv(tmp_path / "test.tsv", labelled_pairs(12, 2))
    output = tmp_path / "out"
    metrics = train(checkpoint, train_file, validation_file, output, "--test_file", str(test_file))  # every phase
    encoder = sentence_transformers.SentenceTransformer(str(output), device="cpu")
    texts = FIRST + SECOND
    vectors = encoder.encode(texts, convert_to_tensor=True)
    model = hf_roformer.HfRoFormerModel.from_pretrained(output).eval()
    encoded = AutoTokenizer.from_pretrained(output)(texts, padding=True, return_tensors="pt")
    with torch.no_grad():
        hidden = model(**encoded).last_hidden_state
    mask = encoded["attention_mask"].unsqueeze(-1).float()
    torch.testing.assert_close(vectors, (hidden * mask).sum(1) / mask.sum(1), atol=1e-5, rtol=1e-5)  # mean pooling
    pairs = read_sentence_pairs(validation_file)
    evaluator = sentence_transformers.sentence_transformer.evaluation.EmbeddingSimilarityEvaluator(
        list(pairs["sentence1"]), list(pairs["sentence2"]), list(pairs["score"]), write_csv=False
    )
    assert evaluator(encoder)["spearman_cosine"] == pytest.approx(metrics["eval_spearman_cosine"], abs=1e-6)
    base = sentence_transformers.SentenceTransformer(str(checkpoint), device="cpu").encode(
        texts, convert_to_tensor=True
    )
    assert not torch.allclose(base, vectors)  # it trained
    assert json.loads((output / "test_results.json").read_text())["test_spearman_cosine"] == pytest.approx(
        similarity(encoder, test_file), abs=1e-6
    )
    assert json.loads((output / "finished.json").read_text())["metrics"] == metrics
    assert f"{metrics['eval_spearman_cosine']:.4f}" in (output / "README.md").read_text()  # the card holds it
    assert not (output / "eval").exists()  # sentence-transformers' evaluator folder, left empty: removed


def test_the_cards_examples_are_picked_without_a_progress_bar(tmp_path, capfd):
    """sentence-transformers draws a progress bar while it picks the card's example sentences, whatever
    `--disable_tqdm` says: the run picks them without it, and the card holds them, from the validation pairs."""
    checkpoint = tiny_checkpoint(tmp_path / "base")
    train_file = write_tsv(tmp_path / "train.tsv", labelled_pairs(16, 0))
    validation_file = write_tsv(tmp_path / "dev.tsv", labelled_pairs(8, 1))
    output = tmp_path / "out"
    capfd.readouterr()
    train(checkpoint, train_file, validation_file, output)
    assert "Computing widget examples" not in capfd.readouterr().err
    examples = huggingface_hub.ModelCard.load(output / "README.md").data.to_dict()["widget"]
    validation_texts = {text for first, second, _ in labelled_pairs(8, 1) for text in (first, second)}
    assert examples and all(example["source_sentence"] in validation_texts for example in examples)


def test_in_batch_negatives_keep_roformer_sims_pooler(tmp_path):
    checkpoint = tiny_checkpoint(tmp_path / "sim", pooler_activation="linear")
    assert (checkpoint / "modules.json").exists()
    train_file = write_tsv(tmp_path / "pairs.tsv", list(zip(FIRST, SECOND, strict=True)))
    validation_file = write_tsv(tmp_path / "dev.tsv", labelled_pairs(12, 1))
    output = tmp_path / "out"
    train(checkpoint, train_file, validation_file, output, "--per_device_train_batch_size", "3")
    modules = json.loads((output / "modules.json").read_text())
    assert [module["type"] for module in modules] == [json.loads((checkpoint / "modules.json").read_text())[0]["type"]]
    vectors = sentence_transformers.SentenceTransformer(str(output), device="cpu").encode(FIRST, convert_to_tensor=True)
    model = hf_roformer.HfRoFormerModel.from_pretrained(output).eval()
    with torch.no_grad():
        pooled = model(**AutoTokenizer.from_pretrained(output)(FIRST, padding=True, return_tensors="pt")).pooler_output
    torch.testing.assert_close(vectors, pooled, atol=1e-5, rtol=1e-5)
    trained = hf_roformer.HfRoFormerModel.from_pretrained(output).pooler.dense.weight
    assert not torch.equal(trained, hf_roformer.HfRoFormerModel.from_pretrained(checkpoint).pooler.dense.weight)


def test_a_loss_that_does_not_fit_the_file_is_refused_before_writing(tmp_path):
    checkpoint = tiny_checkpoint(tmp_path / "base")
    train_file = write_tsv(tmp_path / "pairs.tsv", list(zip(FIRST, SECOND, strict=True)))
    validation_file = write_tsv(tmp_path / "dev.tsv", labelled_pairs(8, 1))
    output = tmp_path / "out"
    with pytest.raises(UsageError, match="--loss cosent does not fit the training file, which has no labels"):
        train(checkpoint, train_file, validation_file, output, "--loss", "cosent")
    assert not output.exists()


def test_evaluation_only_run_scores_the_given_model_as_it_is(tmp_path, caplog):
    """`--do_eval` alone scores the model it is given (a RoFormer-Sim's own sentence vectors), writes only
    `eval_results.json`, and leaves the model untouched."""
    checkpoint = tiny_checkpoint(tmp_path / "sim", pooler_activation="linear")
    weights = (checkpoint / "model.safetensors").read_bytes()
    train_file = write_tsv(tmp_path / "train.tsv", labelled_pairs(32, 0))
    validation_file = write_tsv(tmp_path / "dev.tsv", labelled_pairs(16, 1))
    output = tmp_path / "evaluated"
    caplog.set_level(logging.INFO, logger="hf_roformer")
    metrics = train(checkpoint, train_file, validation_file, output, "--do_eval")
    encoder = sentence_transformers.SentenceTransformer(str(checkpoint), device="cpu")
    expected = similarity(encoder, validation_file)
    written = json.loads((output / "eval_results.json").read_text())
    assert written["eval_spearman_cosine"] == pytest.approx(expected, abs=1e-6)
    assert metrics["eval_spearman_cosine"] == written["eval_spearman_cosine"]
    assert (checkpoint / "model.safetensors").read_bytes() == weights
    names = {path.name for path in output.iterdir()}
    assert not names & {"model.safetensors", "modules.json", "README.md", "finished.json", "train_results.json"}
    assert "test_results.json" not in names
    assert "without training (--do_train not given)" in caplog.text


def test_scoring_a_model_needs_no_training_file(tmp_path):
    """`--do_eval` and `--do_predict` without `--train_file` score the model as it is: the scores
    `SentenceTransformer` gives, and no model written."""
    checkpoint = tiny_checkpoint(tmp_path / "sim", pooler_activation="linear")
    validation_file = write_tsv(tmp_path / "dev.tsv", labelled_pairs(16, 1))
    test_file = write_tsv(tmp_path / "test.tsv", labelled_pairs(12, 2))
    output = tmp_path / "scored"
    arguments = command(checkpoint, None, validation_file, output, "--test_file", str(test_file), "--do_eval")
    metrics = hf_roformer_cli.run([*arguments, "--do_predict"])
    encoder = sentence_transformers.SentenceTransformer(str(checkpoint), device="cpu")
    assert metrics["eval_spearman_cosine"] == pytest.approx(similarity(encoder, validation_file), abs=1e-6)
    assert metrics["test_spearman_cosine"] == pytest.approx(similarity(encoder, test_file), abs=1e-6)
    names = {path.name for path in output.iterdir()}
    assert {"eval_results.json", "test_results.json"} <= names
    assert not names & {"model.safetensors", "modules.json", "README.md", "finished.json", "eval"}


@pytest.mark.parametrize("phases", [[], ["--do_train"]])
def test_training_without_a_training_file_is_refused_before_writing(phases, tmp_path):
    checkpoint = tiny_checkpoint(tmp_path / "base")
    validation_file = write_tsv(tmp_path / "dev.tsv", labelled_pairs(8, 1))
    output = tmp_path / "out"
    expected = (
        "--train_file is needed to train; to score the model as it is, pass --do_eval (or --do_predict with "
        "--test_file) without --do_train"
    )
    with pytest.raises(UsageError) as raised:
        hf_roformer_cli.run(command(checkpoint, None, validation_file, output, *phases))
    assert str(raised.value) == expected
    assert not output.exists()


def test_training_without_do_eval_writes_no_evaluation(tmp_path):
    checkpoint = tiny_checkpoint(tmp_path / "base")
    train_file = write_tsv(tmp_path / "train.tsv", labelled_pairs(16, 0))
    validation_file = write_tsv(tmp_path / "dev.tsv", labelled_pairs(8, 1))
    test_file = write_tsv(tmp_path / "test.tsv", labelled_pairs(8, 2))
    output = tmp_path / "out"
    metrics = train(checkpoint, train_file, validation_file, output, "--test_file", str(test_file), "--do_train")
    assert metrics == {}
    names = {path.name for path in output.iterdir()}
    assert {"model.safetensors", "modules.json", "train_results.json", "finished.json"} <= names
    assert not names & {"eval_results.json", "test_results.json"}
    assert json.loads((output / "finished.json").read_text())["metrics"] == {}


def test_do_predict_scores_the_test_pairs_only(tmp_path):
    checkpoint = tiny_checkpoint(tmp_path / "sim", pooler_activation="linear")
    train_file = write_tsv(tmp_path / "train.tsv", labelled_pairs(16, 0))
    validation_file = write_tsv(tmp_path / "dev.tsv", labelled_pairs(8, 1))
    test_file = write_tsv(tmp_path / "test.tsv", labelled_pairs(12, 2))
    output = tmp_path / "predicted"
    metrics = train(checkpoint, train_file, validation_file, output, "--test_file", str(test_file), "--do_predict")
    encoder = sentence_transformers.SentenceTransformer(str(checkpoint), device="cpu")
    written = json.loads((output / "test_results.json").read_text())
    assert written["test_spearman_cosine"] == pytest.approx(similarity(encoder, test_file), abs=1e-6)
    assert set(metrics) == set(written)
    names = {path.name for path in output.iterdir()}
    assert not names & {"eval_results.json", "model.safetensors", "README.md", "finished.json"}


# -- reruns and resuming: the rules of every fine-tuning task --------------------------------------------------------


def test_push_to_hub_checks_the_hub_before_reading_and_uploads_the_model_and_its_card(tmp_path, monkeypatch):
    """`--push_to_hub` as for every fine-tuning task: offline, refused before anything is read or written; with the
    Hub replaced (transformers' Trainer and sentence-transformers pushing for real), the trained model and then its
    card, holding the scores, go to the repository."""
    from huggingface_hub import constants

    checkpoint = tiny_checkpoint(tmp_path / "base")
    train_file = write_tsv(tmp_path / "train.tsv", labelled_pairs(16, 0))
    validation_file = write_tsv(tmp_path / "dev.tsv", labelled_pairs(8, 1))
    output = tmp_path / "out"
    monkeypatch.setattr(constants, "HF_HUB_OFFLINE", True)
    with pytest.raises(UsageError) as raised:
        train(checkpoint, train_file, validation_file, output, "--push_to_hub")
    assert str(raised.value) == (
        "--push_to_hub: HF_HUB_OFFLINE is set, so nothing can be uploaded; unset it or drop --push_to_hub"
    )
    assert not output.exists()

    calls = replace_the_hub(monkeypatch)
    metrics = train(checkpoint, train_file, validation_file, output, "--push_to_hub", "--hub_token", "hf_x")
    assert_uploaded_after_the_run(calls, output, f"{metrics['eval_spearman_cosine']:.4f}")
    assert "modules.json" in calls[2][4]  # a sentence-transformers model


@pytest.fixture(scope="module")
def ended_inside_an_epoch(tmp_path_factory):
    """(the command of a run whose training ends inside an epoch, 3 steps of 4 (32 pairs in batches of 8), with a
    checkpoint at its last step; that run's output directory, done in one go)."""
    root = tmp_path_factory.mktemp("sentence-resume")
    checkpoint = tiny_checkpoint(root / "base")
    train_file = write_tsv(root / "train.tsv", labelled_pairs(32, 0))
    validation_file = write_tsv(root / "dev.tsv", labelled_pairs(16, 1))
    test_file = write_tsv(root / "test.tsv", labelled_pairs(12, 2))

    def run_command(output, *extra):
        return command(
            checkpoint, train_file, validation_file, output, "--test_file", str(test_file), "--max_steps", "3",
            "--save_strategy", "steps", "--save_steps", "3", *extra,
        )  # fmt: skip

    whole = root / "whole"
    hf_roformer_cli.run(run_command(whole))
    return run_command, whole


def assert_same_model_and_scores(output, whole):
    """`output` holds the model of the run done in one go, with its scores, finished at 3 of 3 steps."""
    state = json.loads((output / "trainer_state.json").read_text())
    assert (state["global_step"], state["max_steps"]) == (3, 3)
    assert_same_saved_weights(whole, output)
    for results in ("eval_results.json", "test_results.json"):
        scores = [json.loads((directory / results).read_text()) for directory in (whole, output)]
        assert scores[1] == scores[0], results
    assert json.loads((output / "finished.json").read_text())["global_step"] == 3
    score = json.loads((output / "eval_results.json").read_text())["eval_spearman_cosine"]
    assert f"{score:.4f}" in (output / "README.md").read_text()  # the card holds it


def test_a_finished_run_is_not_redone(ended_inside_an_epoch, capsys):
    run_command, whole = ended_inside_an_epoch
    hf_roformer_cli.main(run_command(whole))
    lines = capsys.readouterr().out.splitlines()
    assert (
        f"{whole} holds this run, finished, with the same arguments: nothing to do (--overwrite_output_dir runs it "
        "again)"
    ) in lines, lines
    assert not any(line.startswith("step ") for line in lines), lines


def test_resuming_a_new_output_directory_from_the_last_step_trains_no_step(ended_inside_an_epoch, tmp_path, capsys):
    """--resume_from_checkpoint naming the checkpoint of a finished training's last step, with a new output directory:
    the line every fine-tuning task says; no step is trained (the trainer would run a step 4 of 3), and the outputs
    are that checkpoint's model and the scores of the run done in one go."""
    run_command, whole = ended_inside_an_epoch
    final, fresh = whole / "checkpoint-3", tmp_path / "fresh"
    hf_roformer_cli.main(run_command(fresh, "--resume_from_checkpoint", str(final)))
    lines = capsys.readouterr().out.splitlines()
    assert (
        f"--resume_from_checkpoint {final}: the checkpoint holds the finished training (3 of 3 steps); evaluating "
        f"and predicting with its model ({final}), without training again"
    ) in lines, lines
    assert not any(line.startswith("step ") for line in lines), lines
    assert_same_model_and_scores(fresh, whole)


def test_resuming_from_a_checkpoint_compares_its_step_with_this_runs_steps(ended_inside_an_epoch, tmp_path, capsys):
    """A checkpoint at step 3 resumed by a run of 4 steps trains exactly step 4; by a run of 2 steps, it is refused
    in one line naming it, before anything is written."""
    run_command, whole = ended_inside_an_epoch
    final, longer, shorter = whole / "checkpoint-3", tmp_path / "longer", tmp_path / "shorter"
    hf_roformer_cli.main(run_command(longer, "--max_steps", "4", "--resume_from_checkpoint", str(final)))
    steps = [line.split()[1] for line in capsys.readouterr().out.splitlines() if line.startswith("step ")]
    assert steps == ["4/4"]
    state = json.loads((longer / "trainer_state.json").read_text())
    assert (state["global_step"], state["max_steps"]) == (4, 4)
    argv = run_command(shorter, "--max_steps", "2", "--resume_from_checkpoint", str(final))
    assert cli_failure(capsys, argv) == (
        f"error: --resume_from_checkpoint {final}: the checkpoint has trained 3 steps, more than the 2 of this run; "
        "resume from an earlier checkpoint, or train for 3 steps or more\n"
    )
    assert not shorter.exists() or not any(shorter.iterdir())


def test_a_run_counted_in_epochs_finds_its_last_step_in_its_final_checkpoint(tmp_path, capsys):
    """One epoch of 30 pairs in batches of 8 is 4 steps (the last batch short), as the trainer counts them: its final
    checkpoint is the finished training, so resuming a new output directory from it trains no step."""
    checkpoint = tiny_checkpoint(tmp_path / "base")
    train_file = write_tsv(tmp_path / "train.tsv", labelled_pairs(30, 0))
    validation_file = write_tsv(tmp_path / "dev.tsv", labelled_pairs(8, 1))

    def run_command(output, *extra):
        return command(checkpoint, train_file, validation_file, output, "--save_strategy", "epoch", *extra)

    hf_roformer_cli.run(run_command(tmp_path / "whole"))
    final, fresh = tmp_path / "whole" / "checkpoint-4", tmp_path / "fresh"
    hf_roformer_cli.main(run_command(fresh, "--resume_from_checkpoint", str(final)))
    lines = capsys.readouterr().out.splitlines()
    assert (
        f"--resume_from_checkpoint {final}: the checkpoint holds the finished training (4 of 4 steps); evaluating "
        f"with its model ({final}), without training again"
    ) in lines, lines
    state = json.loads((fresh / "trainer_state.json").read_text())
    assert (state["global_step"], state["max_steps"]) == (4, 4)


@pytest.mark.parametrize("lost", [(), ("trained.json", "model.safetensors")], ids=["outputs-whole", "save-cut"])
def test_ctrl_c_in_scoring_says_training_is_done_and_the_rerun_only_scores(
    lost, ended_inside_an_epoch, tmp_path, capsys, monkeypatch
):
    """Ctrl-C while the validation pairs are scored: one line naming the complete outputs; the rerun trains no step
    and ends with the uninterrupted run's model and scores, also when the stop came before the training outputs were
    vouched for (then from the final checkpoint)."""
    run_command, whole = ended_inside_an_epoch
    interrupted = tmp_path / "interrupted"

    def ctrl_c(self, *args, **kwargs):
        raise KeyboardInterrupt

    with monkeypatch.context() as patched:
        patched.setattr(sentence_transformers.SentenceTransformerTrainer, "evaluate", ctrl_c)
        assert cli_failure(capsys, run_command(interrupted), status=130).splitlines()[-1] == (
            f"interrupted after training finished (3 of 3 steps); complete in {interrupted}/: model, tokenizer, "
            "train_results.json, trainer_state.json; run the same command again to do the rest with this model, "
            "without training again"
        )
    assert not (interrupted / "finished.json").exists() and not (interrupted / "eval_results.json").exists()
    for name in lost:
        (interrupted / name).unlink()
    hf_roformer_cli.main(run_command(interrupted))
    lines = capsys.readouterr().out.splitlines()
    source = interrupted / "checkpoint-3" if lost else interrupted
    assert (
        f"training finished in an earlier run (3 steps): evaluating and predicting with its model ({source}), "
        "without training again"
    ) in lines, lines
    assert not any(line.startswith("step ") for line in lines), lines
    assert_same_model_and_scores(interrupted, whole)


def similarity(encoder, pairs_file) -> float:
    """Spearman's correlation of `encoder`'s cosine similarities on the scored pairs of `pairs_file`."""
    pairs = read_sentence_pairs(pairs_file)
    evaluator = sentence_transformers.sentence_transformer.evaluation.EmbeddingSimilarityEvaluator(
        list(pairs["sentence1"]), list(pairs["sentence2"]), list(pairs["score"]), write_csv=False
    )
    return evaluator(encoder)["spearman_cosine"]
