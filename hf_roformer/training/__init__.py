"""Fine-tuning with transformers' Trainer: GLUE, CAIL2019-SCM and the sentiment demo (not Hub-bound)."""
