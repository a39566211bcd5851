"""Training with transformers' Trainer (not Hub-bound): every command is a task (`tasks/`, one package each:
fine-tuning on GLUE, one's own texts, CAIL2019-SCM, named entities, questions, multiple choice; sentence vectors;
masked-LM pre-training in stages; the demo's reviews in `apps/demo.py`) performed by the one run every command shares
(`run/`: its order, output directory and reruns, run record, Trainer, Ctrl-C and resume, save, card, finished
marker)."""
