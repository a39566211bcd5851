"""One's own labelled texts (CSV, TSV, JSON, JSON lines): the reader (`files.py`), the task (`task.py`) and its
declaration to the command line (`options.py`).
"""
