"""The install the README gives runs the commands: in a fresh virtual environment with the base install only
(`pip install -e .`, no extras), every command's `--help` answers in under a second and every command either works
or stops with one line naming the extra it needs; with `.[training]` added, fine-tuning and pre-training run on tiny
files. The extras table the library checks is the one setup.cfg declares."""

import configparser
import importlib.metadata
import json
import os
import re
import subprocess
import time
import venv
from pathlib import Path

import pytest
import transformers

from hf_roformer.utils.extras import EXTRAS


pytestmark = pytest.mark.user_path  # see setup.cfg


ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures" / "original_checkpoints" / "bert4keras-0.11.5"
HELP_COMMANDS = [
    [], ["demo"], ["tour"], ["finetune"], ["finetune", "glue"], ["finetune", "text-classification"],
    ["finetune", "cail2019-scm"], ["finetune", "question-answering"], ["finetune", "multiple-choice"],
    ["finetune", "sentence-embedding"], ["pretrain"], ["pretrain", "mlm"], ["convert"], ["similar"], ["plot"],
]  # fmt: skip
REVIEWS = ["这家餐厅的菜很好吃", "等了一个小时才上菜", "房间干净位置方便", "质量太差用了两天就坏了"]


def distribution_closure(name: str) -> list[importlib.metadata.Distribution]:
    """`name`'s installed distribution and every one it requires (without extras), recursively."""
    seen: dict[str, importlib.metadata.Distribution] = {}
    pending = [name]
    while pending:
        current = re.split(r"[\s;<>=!~\[(]", pending.pop(), maxsplit=1)[0].lower().replace("_", "-")
        if current in seen:
            continue
        try:
            distribution = importlib.metadata.distribution(current)
        except importlib.metadata.PackageNotFoundError:
            continue  # a platform-specific requirement not installed here (e.g. CUDA wheels)
        seen[current] = distribution
        pending += [requirement for requirement in distribution.requires or [] if "extra ==" not in requirement]
    return list(seen.values())


def link_installed(distributions, directory: Path) -> None:
    """Symbolic links to the installed files of `distributions` (their top-level packages and metadata), so a new
    environment gets the very same packages without copying them (PyTorch is 700 MB)."""
    directory.mkdir(parents=True, exist_ok=True)
    for distribution in distributions:
        site = Path(distribution.locate_file(""))
        tops = {Path(file).parts[0] for file in distribution.files or [] if not str(file).startswith("..")}
        for top in tops:
            target = directory / top
            if (site / top).exists() and not target.exists() and top != "__pycache__":
                target.symlink_to(site / top)


@pytest.fixture(scope="module")
def base_environment(tmp_path_factory) -> Path:
    """A virtual environment holding the base install only: this environment's PyTorch (linked, as `pip install
    torch==...` would install it first), then `pip install -e .` with this transformers version."""
    root = tmp_path_factory.mktemp("base-install")
    environment = root / "venv"
    venv.create(environment, with_pip=True)
    site = next((environment / "lib").glob("python*/site-packages"))
    link_installed(distribution_closure("torch"), root / "torch-packages")
    (site / "torch-packages.pth").write_text(str(root / "torch-packages") + "\n")
    install(environment, f"transformers=={transformers.__version__}", "-e", str(ROOT))
    return environment


def install(environment: Path, *requirements: str) -> None:
    result = subprocess.run(
        [str(environment / "bin" / "python"), "-m", "pip", "install", "--quiet", *requirements],
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]


def hf_roformer(environment: Path, *arguments: str, cwd: Path, timeout: int = 600) -> subprocess.CompletedProcess:
    """`hf-roformer ARGUMENTS` as the environment's console script, offline."""
    env = {key: value for key, value in os.environ.items() if key not in ("PYTHONPATH", "HF_ROFORMER_SMOKE")}
    env.update(HF_HUB_OFFLINE="1", OMP_NUM_THREADS="2")
    command = [str(environment / "bin" / "hf-roformer"), *arguments]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


def tiny_files(directory: Path) -> dict[str, Path]:
    """A CSV of reviews for fine-tuning and a text file of documents for pre-training."""
    rows = "".join(f"{text},{'正面' if i % 2 == 0 else '负面'}\n" for i, text in enumerate(REVIEWS * 2))
    (directory / "train.csv").write_text("sentence,label\n" + rows, encoding="utf-8")
    (directory / "corpus.txt").write_text("\n".join(REVIEWS * 10) + "\n", encoding="utf-8")
    return {"csv": directory / "train.csv", "corpus": directory / "corpus.txt"}


def finetune_command(files: dict, output: str) -> list[str]:
    return ["finetune", "text-classification", "--model_name_or_path", "shipped:roformer-zh-char-small",
            "--train_file", str(files["csv"]), "--validation_file", str(files["csv"]), "--output_dir", output,
            "--max_seq_length", "32", "--max_steps", "2", "--per_device_train_batch_size", "4"]  # fmt: skip


def pretrain_command(files: dict, output: str) -> list[str]:
    return ["pretrain", "mlm", "--train_files", str(files["corpus"]), "--validation_size", "4", "--output_dir",
            output, "--stages", "32:4:2", "--hidden_size", "32", "--num_hidden_layers", "1",
            "--num_attention_heads", "2", "--intermediate_size", "64", "--eval_steps", "2"]  # fmt: skip


def test_every_help_answers_at_once_in_the_base_install(base_environment, tmp_path):
    for command in HELP_COMMANDS:
        start = time.perf_counter()
        result = hf_roformer(base_environment, *command, "--help", cwd=tmp_path)
        seconds = time.perf_counter() - start
        assert result.returncode == 0 and result.stderr == "", (command, result.stderr)
        assert result.stdout.startswith("usage: hf-roformer"), command
        assert seconds < 1.0, f"`hf-roformer {' '.join(command)} --help` took {seconds:.2f} s"


def test_every_command_works_or_names_its_extra_in_the_base_install(base_environment, tmp_path):
    files = tiny_files(tmp_path)
    training = (
        '{} needs the `training` extra (missing: accelerate, datasets, scikit-learn, scipy, jieba, seqeval): '
        'pip install "hf_roformer[training]"'
    )
    stops = {
        "`hf-roformer demo`": (["demo"], "demo", "accelerate, datasets, scikit-learn, scipy, snownlp"),
        "`hf-roformer plot`": (["plot", "decay", "--output", "decay.png"], "plot", "matplotlib"),
    }
    for feature, (command, extra, missing) in stops.items():
        result = hf_roformer(base_environment, *command, cwd=tmp_path)
        install_line = f'pip install "hf_roformer[{extra}]"'
        expected = f"error: {feature} needs the `{extra}` extra (missing: {missing}): {install_line}\n"
        assert (result.returncode, result.stderr) == (1, expected), result.stderr[-2000:]
    for command in (finetune_command(files, "reviews"), pretrain_command(files, "tiny-mlm")):
        result = hf_roformer(base_environment, *command, cwd=tmp_path)
        feature = f"`hf-roformer {' '.join(command[:2])}`"
        assert (result.returncode, result.stderr) == (1, f"error: {training.format(feature)}\n"), result.stderr
    assert not (tmp_path / "reviews").exists() and not (tmp_path / "tiny-mlm").exists()

    converted = hf_roformer(base_environment, "convert", str(FIXTURES / "sim"), "sim", "--family", "sim", cwd=tmp_path)
    assert converted.returncode == 0 and converted.stderr == "", converted.stderr[-2000:]
    assert json.loads(converted.stdout)["family"] == "sim"
    similar = hf_roformer(base_environment, "similar", "今天天气很好", "-n", "3", "--model_name_or_path", "sim",
                          "--seed", "0", cwd=tmp_path)  # fmt: skip
    assert similar.returncode == 0 and similar.stderr == "", similar.stderr[-2000:]
    assert similar.stdout.splitlines()[0] == "今天天气很好"
    tour = hf_roformer(base_environment, "tour", cwd=tmp_path)
    assert tour.returncode == 0 and tour.stderr == "", tour.stderr[-2000:]
    assert "same generation: True" in tour.stdout


def test_the_training_extra_runs_fine_tuning_and_pre_training(base_environment, tmp_path):
    install(base_environment, "-e", f"{ROOT}[training]")
    files = tiny_files(tmp_path)
    for command, output in ((finetune_command(files, "reviews"), "reviews"), (pretrain_command(files, "mlm"), "mlm")):
        result = hf_roformer(base_environment, *command, cwd=tmp_path)
        assert result.returncode == 0 and result.stderr == "", result.stderr[-3000:]
        assert (tmp_path / output / "finished.json").exists() and (tmp_path / output / "model.safetensors").exists()


def test_the_extras_checked_are_the_extras_declared():
    """`hf_roformer.utils.extras.EXTRAS` (what commands check) lists exactly the distributions of setup.cfg's
    extras of the same name."""
    parser = configparser.ConfigParser()
    parser.read(ROOT / "setup.cfg")
    declared = parser["options.extras_require"]
    for extra, packages in EXTRAS.items():
        names = {re.split(r"[<>=!~;\s\[]", line.strip(), maxsplit=1)[0] for line in declared[extra].splitlines()}
        assert {distribution for _, distribution in packages} == names - {""}, extra
