"""The training tasks, one package each: its reader (with its validation, `files.py`), its task (`task.py`: its
head, metrics and prediction writer, with the modules beside it) and its declaration to the command line
(`options.toml`: its options, defaults and the function that reads its parsed options, `task.from_command_line`).
Fine-tuning runs each as a `Task` (`run/fine_tuning_task.py`) through `run/finetune.py`; sentence embedding and
pre-training bring steps of their own to the same run (`run/training_run.py`).

`registry.toml` lists the tasks `hf-roformer finetune` offers, in its order: a new task is a package here and one line
there. The command line reads the declarations as files, without importing this package.
"""
