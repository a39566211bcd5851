"""Multiple choice: the reader of C3's JSON and run_swag.py's columns (`files.py`), the task (`task.py`) and its
declaration to the command line (`options.py`).
"""
