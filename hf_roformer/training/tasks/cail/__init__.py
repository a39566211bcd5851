"""CAIL2019-SCM, similar-case matching of legal documents: the reader (`files.py`), the task (`task.py`) and its
declaration to the command line (`options.py`).
"""
