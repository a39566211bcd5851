"""The training tasks, one package each: its reader (with its validation), its head, its metrics, its prediction
writer (`task.py` and the modules beside it), and its declaration to the command line (`options.py`: its options,
defaults and loader). Fine-tuning runs each as a `Task` (`run/fine_tuning_task.py`) through `run/finetune.py`;
sentence embedding and pre-training bring steps of their own to the same run (`run/training_run.py`).

`FINE_TUNING_TASKS` lists the packages `hf-roformer finetune` offers, in its order: a new task is a package here and
one line there. Importing this package, or a task's `options.py`, imports no torch: the command line reads the
declarations to parse.
"""

import importlib


FINE_TUNING_TASKS = (
    "glue",
    "text_classification",
    "cail",
    "token_classification",
    "question_answering",
    "multiple_choice",
    "sentence_embedding",
)


def task_declarations() -> list:
    """Every task's `TaskDeclaration` (`tasks/<task>/options.py`), in `FINE_TUNING_TASKS`' order."""
    return [importlib.import_module(f"{__name__}.{package}.options").TASK for package in FINE_TUNING_TASKS]


__all__ = ["FINE_TUNING_TASKS", "task_declarations"]
