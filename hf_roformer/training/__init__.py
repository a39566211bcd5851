"""Training with transformers' Trainer (not Hub-bound): fine-tuning (`finetune.py`, a task per module in `tasks/`: GLUE,
one's own text files, CAIL2019-SCM; the demo's reviews in `apps/demo.py`) and masked-LM pre-training in stages
(`pretrain.py`), all on one run skeleton (`training_run.py`: output directory and reruns, run record, Trainer, Ctrl-C
and resume, save, card, finished marker)."""
