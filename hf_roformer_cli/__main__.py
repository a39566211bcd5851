"""`python -m hf_roformer_cli ...` (and `torchrun -m hf_roformer_cli ...`, `accelerate launch -m hf_roformer_cli ...`):
the `hf-roformer` command."""

from hf_roformer_cli import main


main()
