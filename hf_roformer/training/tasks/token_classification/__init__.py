"""Named entities: the reader of CoNLL, run_ner JSON lines and CLUENER files (`files.py`), tag schemes (`tags.py`),
windows and word alignment (`alignment.py`), entity metrics (`metrics.py`), People's Daily's entities
(`peoples_daily.py`), the task (`task.py`) and its declaration to the command line (`options.py`).
"""
