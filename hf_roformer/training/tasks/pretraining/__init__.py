"""Masked-LM pre-training in stages (`hf-roformer pretrain mlm`): the corpus (`corpus.py`), packing into blocks
(`packing.py`), Chinese whole-word masking (`whole_word_masking.py`), the BERT baselines (`baselines.py`) and the
run's steps (`task.py`).
"""
