"""Every training command's order is written once, in `TrainingRun.run` (and a stage's in `TrainingRun.train_stage`):
no other module calls the steps that depend on their order, every command is `RunSteps` handed to the run, and the
run calls a command's steps in the documented order, the run record written before the summary and the finished
marker last."""

import ast
import importlib
import json
from pathlib import Path

import pytest
from transformers import Trainer, TrainingArguments

from hf_roformer.training.run.run_record import RUN_RECORD
from hf_roformer.training.run.run_steps import RunSteps, Training
from hf_roformer.training.run.training_run import TrainingRun


ROOT = Path(__file__).resolve().parents[1]
# The run's steps whose place in the order matters: only the run calls them.
ORDERED_STEPS = ("nothing_to_do", "begin", "finish", "finish_training", "train_phase", "after_training")


def calls_of(names: tuple[str, ...]) -> dict[str, list[str]]:
    """Where the library calls a method of one of `names` (`x.name(...)`), as `path:line` per name."""
    found: dict[str, list[str]] = {name: [] for name in names}
    for path in sorted((ROOT / "hf_roformer").rglob("*.py")):
        if path.is_symlink():
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)):
                continue
            name = node.func.attr
            if name == "open":  # the run's own `TrainingRun.open`, not a file's
                receiver = node.func.value
                name = f"{receiver.id}.open" if isinstance(receiver, ast.Name) else name
            if name in names:
                found[name].append(f"{path.relative_to(ROOT)}:{node.lineno}")
    return found


def test_only_the_run_calls_the_steps_whose_order_matters():
    outside = {
        name: [place for place in places if not place.startswith("hf_roformer/training/run/training_run.py")]
        for name, places in calls_of(ORDERED_STEPS).items()
    }
    assert {name: places for name, places in outside.items() if places} == {}
    inside = calls_of(("begin", "TrainingRun.open", "cls.open"))
    assert inside["TrainingRun.open"] == [] and len(inside["cls.open"]) == 1, inside  # opened by `TrainingRun.run`
    assert len(inside["begin"]) == 1, inside  # one run order


def test_every_training_command_is_steps_handed_to_the_run():
    from hf_roformer.training.run.finetune import FineTuning
    from hf_roformer.training.run.run_steps import StageSteps
    from hf_roformer.training.tasks.pretraining.task import Pretraining, PretrainingStage
    from hf_roformer.training.tasks.sentence_embedding.task import SentenceEmbedding

    assert all(issubclass(steps, RunSteps) for steps in (FineTuning, Pretraining, SentenceEmbedding))
    assert issubclass(PretrainingStage, StageSteps)
    for module in ("run/finetune", "tasks/pretraining/task", "tasks/sentence_embedding/task"):
        source = (ROOT / "hf_roformer" / "training" / f"{module}.py").read_text(encoding="utf-8")
        assert "TrainingRun.run(" in source, module


class RecordedSteps(RunSteps):
    """Steps that record the order the run calls them in, and what the output directory holds at each; no training
    (its one stage trains nothing, and says whether a step was trained)."""

    command = "test steps"
    checkpoints_in_output_dir = False  # its "training" is a stage of its own, so no Trainer is needed

    def __init__(self, output_dir: Path, trains: bool):
        self.output_dir, self.calls, self.arguments = output_dir, [], {"trains": trains}
        self.trains = trains

    def note(self, step: str) -> None:
        self.calls.append((step, (self.output_dir / RUN_RECORD).exists()))

    def inputs(self):
        self.note("inputs")
        return {}

    def read(self, run):
        self.note("read")

    def build(self, run, checkpoint, finished):
        self.note("build")

    def describe(self, run, checkpoint, finished):
        self.note("describe")

    def train_stages(self, run):
        self.note("train")
        return Training(None, trained=self.trains)

    def score(self, run, training):
        self.note("score")
        return {"eval_score": 1.0}, ["scores.json"]

    def write_card(self, training, metrics):
        self.note("write_card")
        path = self.output_dir / "README.md"
        path.write_text("card")
        return path

    def finished_record(self, training, metrics):
        self.note("finished_record")
        return {"command": self.command, "metrics": metrics}

    def report(self, run, training, metrics):
        self.note("report")


@pytest.mark.parametrize("trains", [True, False])
def test_the_run_calls_a_commands_steps_in_its_order(tmp_path, trains):
    output = tmp_path / "out"
    args = TrainingArguments(output_dir=str(output), use_cpu=True, report_to="none")
    steps = RecordedSteps(output, trains)
    metrics = TrainingRun.run(steps, args)
    assert metrics == {"eval_score": 1.0}
    order = [step for step, _ in steps.calls]
    trained = ["write_card", "finished_record"] if trains else []
    assert order == ["inputs", "read", "build", "describe", "train", "score", *trained, "report"]
    record_written = dict(steps.calls)
    assert not record_written["build"] and record_written["describe"]  # nothing written before the model is built
    finished = output / "finished.json"
    assert finished.exists() == trains
    if trains:
        assert json.loads(finished.read_text())["metrics"] == {"eval_score": 1.0}
        # The same command again finds the run finished: nothing is read, built or trained.
        again = RecordedSteps(output, trains)
        assert TrainingRun.run(again, args) == {"eval_score": 1.0}
        assert [step for step, _ in again.calls] == ["inputs"]


def test_a_trainer_built_before_the_run_record_is_refused(tmp_path):
    output = tmp_path / "out"
    args = TrainingArguments(output_dir=str(output), use_cpu=True, report_to="none")
    run = TrainingRun.open("test steps", {}, args, {})
    with pytest.raises(RuntimeError, match="before begin"):
        run.trainer(Trainer, model=None)


# -- every task one package, declared to the command line --------------------------------------------------------------

TASKS = ROOT / "hf_roformer" / "training" / "tasks"


def test_every_task_is_a_package_declaring_its_reader_options_defaults_and_loader():
    import tomllib

    from hf_roformer_cli.task_declarations import task_declarations

    registered = tomllib.loads((TASKS / "registry.toml").read_text(encoding="utf-8"))["fine_tuning_tasks"]
    declarations = task_declarations()
    assert [declaration.name for declaration in declarations] == [
        "glue", "text-classification", "cail2019-scm", "token-classification", "question-answering",
        "multiple-choice", "sentence-embedding",
    ]  # fmt: skip
    for package, declaration in zip(registered, declarations, strict=True):
        folder = TASKS / package
        assert {"__init__.py", "files.py", "task.py"} <= {path.name for path in folder.glob("*.py")}, package
        assert (folder / "options.toml").is_file(), package
        reader = ast.parse((folder / "files.py").read_text(encoding="utf-8"))
        functions = [node.name for node in reader.body if isinstance(node, ast.FunctionDef)]
        assert [name for name in functions if name.startswith("read")], f"{package}/files.py defines no reader"
        assert declaration.options and declaration.summary and declaration.usage, package
        assert {"num_train_epochs", "learning_rate", "per_device_train_batch_size"} <= set(declaration.defaults)
        module, _, function = declaration.loader.partition(":")
        assert (module, function) == (f"hf_roformer.training.tasks.{package}.task", "from_command_line")
        assert callable(getattr(importlib.import_module(module), function)), declaration.loader


def declared_value(declared) -> tuple[str, object]:
    """A value for a declared option, as typed and as parsed."""
    if declared.flag:
        return "true", True
    if declared.choices:
        return declared.choices[-1], declared.choices[-1]
    if declared.type in ("int", "positive_int", "non_negative_int"):
        return "3", 3
    if declared.type == "float":
        return "0.5", 0.5
    return "some/value", "some/value"


def test_the_command_line_offers_each_declared_task_with_its_declared_options():
    import hf_roformer_cli
    from hf_roformer_cli.task_declarations import task_declarations

    parser = hf_roformer_cli.build_parser()
    for declaration in task_declarations():
        required = [f"--{declared.name}={declared_value(declared)[0]}" for declared in declaration.options
                    if declared.required]  # fmt: skip
        if declaration.runs == "fine_tune":
            required.append("--model_name_or_path=model")
        for declared in declaration.options:
            typed, parsed = declared_value(declared)
            dashed = f"--{declared.name.replace('_', '-')}"
            argv = ["finetune", declaration.name, "--output_dir=out", *required, dashed, typed]
            args, passed_through = parser.parse_known_args(argv)
            assert getattr(args, declared.name) == parsed and passed_through == [], (declaration.name, declared.name)
            assert args._declaration == declaration
            assert args._defaults == declaration.defaults


def test_a_task_starting_from_another_tasks_defaults_changes_only_its_own():
    from hf_roformer_cli.task_declarations import task_declarations

    declarations = {declaration.name: declaration for declaration in task_declarations()}
    glue, questions = declarations["glue"].defaults, declarations["question-answering"].defaults
    assert questions == {**glue, "learning_rate": 3e-5, "per_device_train_batch_size": 12, "max_seq_length": 384}
    assert declarations["multiple-choice"].defaults == glue == declarations["text-classification"].defaults


def test_the_glue_names_the_command_line_offers_are_the_readers():
    from hf_roformer.training.tasks.glue.files import GLUE_TASKS
    from hf_roformer_cli.task_declarations import task_declarations

    glue = next(declaration for declaration in task_declarations() if declaration.name == "glue")
    task_name = next(declared for declared in glue.options if declared.name == "task_name")
    assert set(task_name.choices) == set(GLUE_TASKS)


def test_a_malformed_declaration_is_refused_naming_its_file_and_key(tmp_path):
    from hf_roformer_cli.task_declarations import DeclarationError, read_declaration

    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "options.toml").write_text(
        'name = "x"\nsummary = "s"\ndetails = "d"\nusage = "u"\nloader = "m:f"\n[[options]]\nname = "a"\n'
        'help = "h"\ntype = "integer"\n'
    )
    with pytest.raises(DeclarationError, match=r"broken/options.toml: option 'a': type 'integer' is not one of"):
        read_declaration(tmp_path, "broken", {})


def test_the_run_never_imports_a_task():
    from test_layout import import_graph

    upward = {
        name: sorted(target for target in targets if target.startswith("hf_roformer.training.tasks"))
        for name, targets in import_graph().items()
        if name.startswith("hf_roformer.training.run")
    }
    assert {name: targets for name, targets in upward.items() if targets} == {}
