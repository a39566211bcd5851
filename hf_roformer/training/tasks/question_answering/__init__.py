"""Extractive question answering: the reader of SQuAD-format JSON and JSON lines (`files.py`), CMRC2018's and SQuAD's
metrics (`metrics.py`), answers from the logits and their files (`predictions.py`), the task (`task.py`) and its
declaration to the command line (`options.py`).
"""
