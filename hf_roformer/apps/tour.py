"""A one-minute tour of hf_roformer on CPU: exact loading of transformers' RoFormer checkpoints, inputs past the
trained length, causal generation with a cache, and a saved model loaded as remote code by a process that cannot
import hf_roformer. Run with `hf-roformer tour`."""

import json
import tempfile
import time
from pathlib import Path

import huggingface_hub
import torch
import transformers

from ..remote_code.configuration_hf_roformer import HfRoFormerConfig
from ..remote_code.modeling_hf_roformer import HfRoFormerForCausalLM, HfRoFormerForMaskedLM
from ..utils.isolation import run_without_the_package


TEXT = "RoFormer encodes positions by rotating queries and keys. "
PARITY_TOLERANCE = 1e-6  # what tests/test_parity.py requires of every head against transformers' RoFormer
# Run by a fresh interpreter that cannot import hf_roformer: load the saved model as remote code and generate.
REMOTE_GENERATION = """
import json, sys, torch, transformers
model = transformers.AutoModelForCausalLM.from_pretrained(sys.argv[1], trust_remote_code=True).eval()
prompt = torch.tensor(json.loads(sys.argv[2]))
generated = model.generate(prompt, max_new_tokens=int(sys.argv[3]), do_sample=False, pad_token_id=0)
print(json.dumps({"class": f"{type(model).__module__}.{type(model).__name__}", "tokens": generated.tolist()}))
"""


def _small_config(**overrides) -> dict:
    return dict(
        vocab_size=128,
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=256,
        max_position_embeddings=512,
        **overrides,
    )


def show_checkpoint_parity(workdir: Path) -> None:
    """Save a transformers RoFormer, load it with AutoModel-style classes of ours, compare outputs."""
    torch.manual_seed(0)
    reference = transformers.RoFormerForMaskedLM(transformers.RoFormerConfig(**_small_config())).eval()
    reference.save_pretrained(workdir / "transformers_roformer")
    ours = HfRoFormerForMaskedLM.from_pretrained(workdir / "transformers_roformer").eval()
    input_ids = torch.randint(1, 128, (2, 64))
    with torch.no_grad():
        difference = (ours(input_ids).logits - reference(input_ids).logits).abs().max().item()
    print(
        f"[1] transformers' RoFormer checkpoint loaded into HfRoFormerForMaskedLM: max |logit diff| {difference:.1e} "
        f"(the tests require at most {PARITY_TOLERANCE:.0e})"
    )

    long_ids = torch.randint(1, 128, (1, 8192))
    try:
        with torch.no_grad():
            reference(long_ids)
        reference_result = "ran"
    except (IndexError, RuntimeError) as error:
        reference_result = f"fails ({type(error).__name__})"
    start = time.perf_counter()
    with torch.no_grad():
        logits = ours(long_ids).logits
    print(
        f"[2] 8192 tokens (trained length 512): transformers' RoFormer {reference_result}; "
        f"hf_roformer ran in {time.perf_counter() - start:.2f} s, output {tuple(logits.shape)}"
    )


def show_generation(workdir: Path) -> None:
    """Teach a tiny causal RoFormer one sentence, then generate it back with the KV cache."""
    torch.manual_seed(0)
    model = HfRoFormerForCausalLM(HfRoFormerConfig(**_small_config(is_decoder=True))).train()
    ids = torch.tensor([[min(ord(character), 127) for character in TEXT * 3]])
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    start = time.perf_counter()
    for _ in range(150):
        loss = model(ids, labels=ids).loss
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()
    model.eval()
    prompt = ids[:, :12]
    generated = model.generate(prompt, max_new_tokens=len(TEXT), do_sample=False, pad_token_id=0)
    text = "".join(chr(token) for token in generated[0].tolist())
    seconds = time.perf_counter() - start
    print(f"[3] causal LM trained 150 steps ({seconds:.1f} s, loss {loss.item():.3f}); greedy generate:")
    print(f"    {text!r}")

    model.save_pretrained(workdir / "causal_lm")
    config = json.loads((workdir / "causal_lm" / "config.json").read_text())
    code_files = sorted(path.name for path in (workdir / "causal_lm").glob("*.py"))
    print(f"[4] saved with an auto_map of {len(config['auto_map'])} Auto classes and the code files {code_files}")
    result = run_without_the_package(
        workdir, REMOTE_GENERATION, workdir / "causal_lm", json.dumps(prompt.tolist()), len(TEXT)
    )
    if result.returncode != 0:
        raise RuntimeError(f"the remote-code process failed:\n{result.stderr[-2000:]}")
    remote = json.loads(result.stdout.strip().splitlines()[-1])
    print(
        f"    loaded with trust_remote_code=True by a process that cannot import hf_roformer, as {remote['class']}; "
        f"same generation: {remote['tokens'] == generated.tolist()}"
    )


def run_tour() -> None:
    """Run every step of the tour in a temporary directory."""
    torch.set_num_threads(min(torch.get_num_threads(), 2))
    transformers.logging.set_verbosity_error()
    transformers.logging.disable_progress_bar()
    huggingface_hub.utils.disable_progress_bars()
    with tempfile.TemporaryDirectory() as directory:
        workdir = Path(directory)
        show_checkpoint_parity(workdir)
        show_generation(workdir)
