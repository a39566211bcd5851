"""The run every training command shares and the pieces it is made of: the order of a run (`training_run.py`,
performing the steps a command brings, `run_steps.py`), its output directory and record (`run_directory.py`,
`run_record.py`), checkpoints and resume (`checkpoints.py`, `engine_checkpoints.py`, `file_integrity.py`), FSDP and
DeepSpeed (`distributed.py`, `fsdp_groups.py`), batching by length (`batching.py`), lengths (`lengths.py`), progress
lines (`progress.py`), model cards (`cards.py`), the file formats every reader parses (`file_formats.py`), and the
fine-tuning of any `Task` (`finetune.py`, `fine_tuning_task.py`). Nothing here imports a task.
"""
