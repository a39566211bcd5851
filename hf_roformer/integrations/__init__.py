"""hf_roformer with other libraries (not Hub-bound): transformers' own `roformer` checkpoints routed to hf_roformer's
classes through the Auto classes, serving engines (vLLM's pooling runner), and checked export (ONNX, `torch.export`)."""
