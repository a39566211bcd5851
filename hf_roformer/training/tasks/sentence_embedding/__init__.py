"""Sentence vectors with sentence-transformers' trainer: the reader of sentence pairs (`files.py`), the run's steps
(`task.py`) and its declaration to the command line (`options.py`).
"""
