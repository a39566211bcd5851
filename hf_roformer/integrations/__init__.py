"""hf_roformer with other libraries (not Hub-bound): transformers' own `roformer` checkpoints routed to hf_roformer's
classes through the Auto classes, and serving engines (vLLM's pooling runner)."""
