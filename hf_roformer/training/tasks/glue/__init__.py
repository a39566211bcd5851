"""GLUE from its published TSV files (or a `datasets` copy): the reader (`files.py`), the task (`task.py`) and its
declaration to the command line (`options.py`).
"""
