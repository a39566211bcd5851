"""The commands of docs/fine-tuning.md and docs/pre-training.md run as written, the way a user runs them (the console
script in a fresh process, in a directory holding the data files the page names), and do what the page says: the
GLUE command trains, evaluates, predicts and saves a model that `pipeline("text-classification")` loads, alone and
under `torchrun`; `finetune text-classification` reads a Chinese CSV and a JSON-lines file."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from huggingface_hub import ModelCard
from test_finetune import make_glue


ROOT = Path(__file__).resolve().parents[1]
PAGES = [ROOT / "docs" / "fine-tuning.md", ROOT / "docs" / "pre-training.md"]
SKIP = re.compile(r"<!-- docs-test: skip \((.+)\) -->")

REVIEWS = [
    ("这家餐厅的菜很好吃，服务也周到", "正面"),
    ("等了一个小时才上菜，太失望了", "负面"),
    ("房间干净，位置方便，下次还来", "正面"),
    ("质量太差，用了两天就坏了", "负面"),
    ("物流很快，包装完好，推荐", "正面"),
    ("客服态度恶劣，再也不买了", "负面"),
]


def code_blocks(page: Path) -> list[tuple[str, str, str | None]]:
    """(language, code, skip reason or None) of every fenced block of `page`."""
    blocks, skip = [], None
    lines = page.read_text(encoding="utf-8").splitlines()
    index = 0
    while index < len(lines):
        line = lines[index]
        match = SKIP.fullmatch(line.strip())
        if match:
            skip = match.group(1)
        elif line.startswith("```"):
            language, body = line[3:].strip(), []
            index += 1
            while not lines[index].startswith("```"):
                body.append(lines[index])
                index += 1
            blocks.append((language, "\n".join(body) + "\n", skip))
            skip = None
        elif line.strip():
            skip = None
        index += 1
    return blocks


def runnable(page: Path, contains: str) -> tuple[str, str]:
    """The one runnable block of `page` that contains `contains`."""
    found = [(language, code) for language, code, skip in code_blocks(page) if skip is None and contains in code]
    assert len(found) == 1, f"{page.name}: {len(found)} runnable blocks contain {contains!r}"
    return found[0]


def write_data(directory: Path) -> None:
    """The files the pages name: glue_data/MRPC, train/dev/test.csv, train/dev.jsonl, cail/, corpus.txt."""
    make_glue(directory / "glue_data", "mrpc", examples=24)
    rows = "".join(f"{text},{label}\n" for text, label in REVIEWS)
    for name in ("train.csv", "dev.csv", "test.csv"):
        (directory / name).write_text("sentence,label\n" + rows, encoding="utf-8")
    for name in ("train.jsonl", "dev.jsonl"):
        lines = [json.dumps({"text": text, "label": label}, ensure_ascii=False) for text, label in REVIEWS]
        (directory / name).write_text("\n".join(lines) + "\n", encoding="utf-8")
    (directory / "cail").mkdir()
    for split in ("train", "valid", "test"):
        records = [{"A": "原告诉称被告欠款", "B": "被告拖欠货款", "C": "双方离婚纠纷", "label": "B"}] * 3
        records += [{"A": "原告要求离婚", "B": "借款合同纠纷", "C": "夫妻感情破裂", "label": "C"}] * 3
        text = "\n".join(json.dumps(record, ensure_ascii=False) for record in records) + "\n"
        (directory / "cail" / f"{split}.json").write_text(text, encoding="utf-8")
    from hf_roformer.training.corpus import peoples_daily_documents

    (directory / "corpus.txt").write_text("\n".join(peoples_daily_documents()[:200]) + "\n", encoding="utf-8")


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    directory = tmp_path_factory.mktemp("docs")
    write_data(directory)
    shims = directory / ".bin"
    shims.mkdir()
    script = shims / "hf-roformer"  # the console script, importing this checkout's code
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m hf_roformer_cli "$@"\n')
    script.chmod(0o755)
    return directory


def run_block(language: str, code: str, cwd: Path) -> subprocess.CompletedProcess:
    """Run a bash or python block as written, in `cwd`."""
    bin_dirs = [str(cwd / ".bin"), str(Path(sys.executable).parent)]
    env = {**os.environ, "PATH": os.pathsep.join([*bin_dirs, os.environ["PATH"]]), "HF_HUB_OFFLINE": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])
    command = ["bash", "-euo", "pipefail", "-c", code] if language == "bash" else [sys.executable, "-c", code]
    result = subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, f"{language} block failed:\n{code}\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    return result


def assert_fine_tuned(output: Path, predictions: str) -> None:
    """Trained (steps done, weights saved), evaluated, predicted, with a card that claims no Hub base."""
    state = json.loads((output / "trainer_state.json").read_text())
    assert state["global_step"] > 0 and (output / "model.safetensors").exists()
    assert "eval_accuracy" in json.loads((output / "eval_results.json").read_text())
    lines = (output / predictions).read_text().splitlines()
    assert lines[0] == "index\tprediction" and len(lines) > 1
    card = ModelCard.load(output / "README.md")
    assert card.data.base_model is None and "`shipped:roformer-zh-char-small`" in card.text
    assert "trained from scratch" not in card.text
    assert (output / "finished.json").exists()


def test_glue_command_as_documented(workdir):
    page = PAGES[0]
    run_block(*runnable(page, "--output_dir mrpc-roformer"), workdir)
    output = workdir / "mrpc-roformer"
    assert_fine_tuned(output, "MRPC.tsv")
    assert json.loads((output / "tokenizer_config.json").read_text())["model_max_length"] == 512
    printed = run_block(*runnable(page, 'pipeline("text-classification", model="mrpc-roformer")'), workdir).stdout
    assert re.search(r"'label': '[01]', 'score': 0\.\d+", printed), printed


@pytest.mark.skipif(sys.platform != "linux", reason="torchrun with gloo is exercised on Linux")
def test_glue_command_under_torchrun_as_documented(workdir):
    run_block(*runnable(PAGES[0], "torchrun --nproc_per_node 2"), workdir)
    assert_fine_tuned(workdir / "mrpc-ddp", "MRPC.tsv")


def test_text_classification_on_a_chinese_csv_as_documented(workdir):
    run_block(*runnable(PAGES[0], "--train_file train.csv"), workdir)
    output = workdir / "reviews-roformer"
    assert_fine_tuned(output, "test_predictions.tsv")
    config = json.loads((output / "config.json").read_text())
    assert config["id2label"] == {"0": "正面", "1": "负面"}
    assert {line.split("\t")[1] for line in (output / "test_predictions.tsv").read_text().splitlines()[1:]} <= {
        "正面",
        "负面",
    }


def test_text_classification_on_json_lines_as_documented(workdir):
    run_block(*runnable(PAGES[0], "--train_file train.jsonl"), workdir)
    output = workdir / "reviews-jsonl"
    state = json.loads((output / "trainer_state.json").read_text())
    assert state["global_step"] > 0 and "eval_f1" in json.loads((output / "eval_results.json").read_text())


def test_cail_command_as_documented(workdir):
    run_block(*runnable(PAGES[0], "finetune cail2019-scm"), workdir)
    output = workdir / "cail-roformer"
    card = ModelCard.load(output / "README.md")
    results = card.data.eval_results
    assert results and results[0].metric_type == "triplet_accuracy" and 0.0 <= results[0].metric_value <= 1.0
    assert len((output / "test_predictions.json").read_text().splitlines()) == 6


def test_pre_training_page_as_documented(workdir):
    run_block(*runnable(PAGES[1], "--train_files corpus.txt"), workdir)
    assert json.loads((workdir / "zh-char-tiny" / "tokenizer_config.json").read_text())["model_max_length"] == 32
    printed = run_block(*runnable(PAGES[1], 'pipeline("fill-mask"'), workdir).stdout
    assert printed.strip().startswith("[") and len(eval(printed)) == 5  # five completions


def test_every_block_runs_or_states_why_not():
    tested = {
        PAGES[0]: ["--output_dir mrpc-roformer", 'model="mrpc-roformer"', "torchrun", "train.csv", "train.jsonl",
                   "finetune cail2019-scm"],
        PAGES[1]: ["--train_files corpus.txt", 'pipeline("fill-mask"'],
    }  # fmt: skip
    for page, markers in tested.items():
        for language, code, skip in code_blocks(page):
            if language not in ("bash", "python"):
                continue
            assert skip or any(marker in code for marker in markers), f"{page.name}: untested block\n{code}"
