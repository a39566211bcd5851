"""The default forward reads no device value on the host: counted on the CPU as the operators that force a
device-to-host synchronization on CUDA, against transformers' BERT with SDPA on the same inputs."""

import warnings

import pytest
import torch
import transformers
from sync_counting import count_operators

import hf_roformer
from hf_roformer.remote_code import modeling_hf_roformer
from hf_roformer.remote_code.releases_hf_roformer import output_cache


@pytest.fixture(autouse=True)
def accelerator_checks(monkeypatch):
    """Count the path tensors on an accelerator take: checks that read values on the host for CPU tensors become
    device assertions there."""
    monkeypatch.setattr(modeling_hf_roformer, "reads_values_on_host", lambda tensor: False)


SIZE = dict(
    vocab_size=99,
    hidden_size=32,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=37,
    hidden_dropout_prob=0.0,
    attention_probs_dropout_prob=0.0,
)


def models(decoder: bool):
    """hf_roformer and BERT-SDPA of the same size (causal LMs for decoding)."""
    torch.manual_seed(0)
    ours = hf_roformer.HfRoFormerConfig(**SIZE, is_decoder=decoder, attn_implementation="sdpa")
    bert = transformers.BertConfig(**SIZE, is_decoder=decoder, attn_implementation="sdpa")
    if decoder:
        return hf_roformer.HfRoFormerForCausalLM(ours).eval(), transformers.BertLMHeadModel(bert).eval()
    return hf_roformer.HfRoFormerModel(ours).eval(), transformers.BertModel(bert).eval()


def batch(padded: bool) -> dict:
    ids = torch.randint(1, 99, (2, 9), generator=torch.Generator().manual_seed(0))
    if not padded:
        return {"input_ids": ids}
    mask = torch.ones_like(ids)
    mask[1, 5:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def syncs(model, **inputs) -> dict:
    with torch.no_grad():
        return count_operators(lambda: model(**inputs))["syncs"]


@pytest.mark.parametrize("padded", [False, True], ids=["plain", "padded"])
@pytest.mark.parametrize("decoder", [False, True], ids=["encoder", "decoder"])
def test_forward_forces_no_more_syncs_than_bert(decoder, padded):
    ours, bert = models(decoder)
    ours_syncs, bert_syncs = syncs(ours, **batch(padded)), syncs(bert, **batch(padded))
    assert sum(ours_syncs.values()) <= sum(bert_syncs.values()) + 1, (ours_syncs, bert_syncs)
    # What we measured: only the reads inside transformers' mask builders, which BERT makes too.
    assert sum(ours_syncs.values()) <= sum(bert_syncs.values()), (ours_syncs, bert_syncs)


def test_decoding_step_forces_no_more_syncs_than_bert():
    ours, bert = models(decoder=True)
    prompt = batch(padded=True)
    step_mask = torch.cat([prompt["attention_mask"], torch.ones(2, 1, dtype=torch.long)], dim=1)
    counts = []
    for model in (ours, bert):
        with torch.no_grad():
            cache = output_cache(model(**prompt, use_cache=True))
        token = torch.ones(2, 1, dtype=torch.long)
        counts.append(syncs(model, input_ids=token, attention_mask=step_mask, cache=cache, use_cache=True))
    assert sum(counts[0].values()) <= sum(counts[1].values()) + 1, counts


def test_training_step_forces_no_more_syncs_than_bert():
    counts = []
    for model in models(decoder=False):
        model.train()
        inputs = batch(padded=True)
        counts.append(count_operators(lambda: model(**inputs).last_hidden_state.sum().backward())["syncs"])  # noqa: B023
    assert sum(counts[0].values()) <= sum(counts[1].values()), counts


def test_counter_sees_host_reads():
    """The counter itself: `.item()`, `bool()` and boolean indexing are counted, plain arithmetic is not."""
    values = torch.arange(4)
    counted = count_operators(lambda: (values.sum().item(), bool(values.any()), values[values > 1], values + 1))
    assert counted["syncs"] == {"aten._local_scalar_dense": 2, "aten.index": 1}, counted


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("decoder", [False, True], ids=["encoder", "decoder"])
def test_plain_forward_on_cuda_never_synchronizes(decoder):
    """On the device itself: CUDA's sync debug mode turns any synchronizing call into an error."""
    ours, _ = models(decoder)
    ours = ours.cuda()
    inputs = {key: value.cuda() for key, value in batch(padded=False).items()}
    with torch.no_grad():
        ours(**inputs)  # warm-up (lazy initializations may synchronize once)
        torch.cuda.synchronize()
        torch.cuda.set_sync_debug_mode("error")
        try:
            ours(**inputs)
        finally:
            torch.cuda.set_sync_debug_mode("default")


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("padded", [False, True], ids=["plain", "padded"])
def test_cuda_forward_synchronizes_no_more_than_bert(padded):
    """Synchronizations counted by CUDA's sync debug mode (warnings), hf_roformer against BERT-SDPA. Every warning is
    recorded ("always"): both models reach transformers' mask builders, and under the default filter a warning from
    a line that already warned (the first model's) is not shown again."""
    counts = []
    for model in models(decoder=False):
        model = model.cuda()
        inputs = {key: value.cuda() for key, value in batch(padded).items()}
        with torch.no_grad(), warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model(**inputs)
            torch.cuda.synchronize()
            caught.clear()
            torch.cuda.set_sync_debug_mode("warn")
            try:
                model(**inputs)
            finally:
                torch.cuda.set_sync_debug_mode("default")
        # Only the warnings of synchronizing calls: the first switch to the debug mode also warns that the mode is
        # a prototype ("Synchronization debug mode is a prototype feature ...").
        messages = [str(warning.message) for warning in caught]
        counts.append(sum("synchroniz" in message and "prototype" not in message for message in messages))
    assert counts[0] <= counts[1], counts
