"""Packed rows in transformers' convention: `DataCollatorWithFlattening` packs sequences into one row and the caller
declares where each starts (`cu_seq_lens_q/k` + `max_length_q/k`, or `seq_idx`); every sequence is then processed as
if it were alone. Positions alone never declare packing: they are rotation angles."""

import pytest
import torch
from conftest import tiny_config
from transformers import AttentionInterface, DataCollatorWithFlattening
from transformers.integrations.sdpa_attention import sdpa_attention_forward
from transformers.masking_utils import AttentionMaskInterface, sdpa_mask

import hf_roformer
from hf_roformer.remote_code.modeling_hf_roformer import packed_row_sequences, split_packed_row_boundaries


SEQUENCES = [[5, 6, 7, 8, 9], [11, 12, 13], [21, 22, 23, 24, 25, 26, 27]]
DECLARATIONS = {
    "flash_attn_kwargs": {"return_flash_attn_kwargs": True},
    "seq_idx": {"return_seq_idx": True},
}
TOKEN_HEADS = [
    hf_roformer.HfRoFormerModel,
    hf_roformer.HfRoFormerForMaskedLM,
    hf_roformer.HfRoFormerForCausalLM,
    hf_roformer.HfRoFormerForTokenClassification,
    hf_roformer.HfRoFormerForQuestionAnswering,
]


def packed_batch(declaration: str = "flash_attn_kwargs") -> dict:
    """The three sequences packed by `DataCollatorWithFlattening`, declared the given way."""
    features = [{"input_ids": sequence} for sequence in SEQUENCES]
    return DataCollatorWithFlattening(return_tensors="pt", **DECLARATIONS[declaration])(features)


def model_inputs(batch: dict) -> dict:
    """What a Trainer passes to the model from the collated batch, without labels."""
    return {key: value for key, value in batch.items() if key != "labels"}


def split_packed(tensor):
    """Per-sequence slices of a packed (1, total, ...) output."""
    pieces, start = [], 0
    for sequence in SEQUENCES:
        pieces.append(tensor[0, start : start + len(sequence)])
        start += len(sequence)
    return pieces


def token_outputs(output) -> list[torch.Tensor]:
    """Every per-token tensor a head returns."""
    names = ("last_hidden_state", "logits", "start_logits", "end_logits")
    return [getattr(output, name) for name in names if getattr(output, name, None) is not None]


def assert_packed_row_equals_each_sequence_alone(model, declaration: str = "flash_attn_kwargs"):
    """The packed row's per-token outputs, split back into its sequences, equal each sequence run alone."""
    with torch.no_grad():
        packed = token_outputs(model(**model_inputs(packed_batch(declaration))))
        for index, sequence in enumerate(SEQUENCES):
            alone = token_outputs(model(input_ids=torch.tensor([sequence])))
            for packed_tensor, alone_tensor in zip(packed, alone, strict=True):
                piece = split_packed(packed_tensor)[index]
                torch.testing.assert_close(piece, alone_tensor[0], atol=1e-5, rtol=0)


@pytest.mark.parametrize("declaration", list(DECLARATIONS))
@pytest.mark.parametrize("backend", ["eager", "sdpa", "flex_attention"])
@pytest.mark.parametrize("is_decoder", [False, True])
def test_packed_row_equals_each_sequence_alone(declaration, backend, is_decoder):
    torch.manual_seed(0)
    config = tiny_config(is_decoder=is_decoder, use_cache=False, attn_implementation=backend)
    model = hf_roformer.HfRoFormerModel(config).eval()
    assert packed_batch()["position_ids"][0].tolist() == [0, 1, 2, 3, 4, 0, 1, 2, 0, 1, 2, 3, 4, 5, 6]
    assert_packed_row_equals_each_sequence_alone(model, declaration)


@pytest.mark.parametrize("head", TOKEN_HEADS, ids=lambda head: head.__name__)
@pytest.mark.parametrize("is_decoder", [False, True])
def test_every_token_head_gives_each_sequences_result(head, is_decoder):
    torch.manual_seed(0)
    model = head(tiny_config(is_decoder=is_decoder, use_cache=False)).eval()
    assert_packed_row_equals_each_sequence_alone(model)


@pytest.mark.parametrize("declaration", list(DECLARATIONS))
@pytest.mark.parametrize("is_decoder", [False, True])
@pytest.mark.parametrize("rope_type", ["dynamic", "longrope"])
def test_length_dependent_rope_uses_each_sequences_length(declaration, is_decoder, rope_type):
    """Encoders give each packed sequence its own length; decoders give each query its own prefix and keys of its
    own sequence only (original length 4, so the longer sequences are scaled)."""
    torch.manual_seed(0)
    rope = {"rope_type": rope_type, "factor": 2.0, "original_max_position_embeddings": 4}
    if rope_type == "longrope":
        rope.update(short_factor=[1.0, 1.2, 1.5, 2.0], long_factor=[1.0, 2.0, 3.0, 4.0])
    model = hf_roformer.HfRoFormerForCausalLM(
        tiny_config(rope_parameters=rope, is_decoder=is_decoder, use_cache=False)
    ).eval()
    assert_packed_row_equals_each_sequence_alone(model, declaration)


def test_packed_causal_lm_loss_equals_the_padded_batch_loss():
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True, use_cache=False)).eval()
    batch = packed_batch()
    width = max(map(len, SEQUENCES))
    input_ids = torch.zeros(len(SEQUENCES), width, dtype=torch.long)
    labels = torch.full_like(input_ids, -100)
    for row, sequence in enumerate(SEQUENCES):
        input_ids[row, : len(sequence)] = torch.tensor(sequence)
        labels[row, : len(sequence)] = torch.tensor(sequence)
    with torch.no_grad():
        packed = model(**batch).loss
        padded = model(input_ids=input_ids, attention_mask=(labels != -100).long(), labels=labels).loss
    torch.testing.assert_close(packed, padded, atol=1e-6, rtol=0)


def test_restarting_positions_alone_are_one_sequence():
    """Without a declaration the row is one sequence whatever its positions: every token attends to every other."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config()).eval()
    batch = packed_batch()
    with torch.no_grad():
        row = model(input_ids=batch["input_ids"], position_ids=batch["position_ids"]).last_hidden_state
        first_alone = model(input_ids=torch.tensor([SEQUENCES[0]])).last_hidden_state
    assert (split_packed(row)[0] - first_alone[0]).abs().max() > 1e-2


@pytest.mark.parametrize(
    "head, message",
    [
        (hf_roformer.HfRoFormerForSequenceClassification, "reads one vector per row"),
        (hf_roformer.HfRoFormerForMultipleChoice, "reads one vector per row"),
    ],
)
def test_heads_pooling_one_vector_per_row_refuse_packed_rows(head, message):
    model = head(tiny_config()).eval()
    batch = model_inputs(packed_batch())
    if head is hf_roformer.HfRoFormerForMultipleChoice:
        choices = ("input_ids", "position_ids")
        batch = {key: value.unsqueeze(1) if key in choices else value for key, value in batch.items()}
    with pytest.raises(ValueError, match=message):
        model(**batch)


@pytest.mark.parametrize(
    "extra, message",
    [
        ({"attention_mask": "ones"}, "cannot be combined with an attention_mask"),
        ({"batch_of_two": True}, "got a batch of 2 rows"),
    ],
)
def test_packed_rows_refuse_what_they_cannot_mean(extra, message):
    model = hf_roformer.HfRoFormerModel(tiny_config()).eval()
    batch = model_inputs(packed_batch())
    if "attention_mask" in extra:
        batch["attention_mask"] = torch.ones_like(batch["input_ids"])
    if "batch_of_two" in extra:
        batch["input_ids"] = batch["input_ids"].expand(2, -1)
    with pytest.raises(ValueError, match=message):
        model(**batch)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("is_decoder", [False, True])
def test_declared_packed_row_on_cuda_runs_the_varlen_kernel(is_decoder, monkeypatch):
    """bf16 on CUDA: the declared row goes through `varlen_attn` (counted) and equals each sequence alone."""
    from hf_roformer.remote_code import modeling_hf_roformer

    if modeling_hf_roformer.varlen_attn is None:
        pytest.skip("torch has no varlen_attn (needs >= 2.10)")
    calls = []
    kernel = modeling_hf_roformer.varlen_attn
    monkeypatch.setattr(modeling_hf_roformer, "varlen_attn", lambda *a, **k: calls.append(1) or kernel(*a, **k))
    torch.manual_seed(0)
    config = tiny_config(hidden_size=256, num_attention_heads=4, is_decoder=is_decoder, use_cache=False)
    model = hf_roformer.HfRoFormerModel(config).to("cuda", torch.bfloat16).eval()
    batch = {k: v.cuda() if isinstance(v, torch.Tensor) else v for k, v in model_inputs(packed_batch()).items()}
    with torch.no_grad():
        packed = model(**batch).last_hidden_state.float()
        assert len(calls) == config.num_hidden_layers
        for index, sequence in enumerate(SEQUENCES):
            alone = model(input_ids=torch.tensor([sequence], device="cuda")).last_hidden_state.float()
            torch.testing.assert_close(split_packed(packed)[index], alone[0], atol=2e-2, rtol=0)


BOUNDARY_KEYS = ("cu_seq_lens_q", "cu_seq_lens_k", "max_length_q", "max_length_k")
RECORDING_BACKEND = "hf_roformer_recording_sdpa"


def test_the_layout_reads_the_callers_keyword_arguments_without_changing_them():
    """The forward's layout takes the sequence boundaries out of what the layers receive (every other argument, as
    the very object given) and leaves the caller's dictionary as it was."""
    batch = packed_batch()
    engine_state = object()
    given = {key: batch[key] for key in BOUNDARY_KEYS} | {"engine_state": engine_state}
    before = dict(given)
    boundaries, layer_kwargs = split_packed_row_boundaries(given)
    assert list(given) == list(before) and all(given[key] is before[key] for key in before)
    assert list(layer_kwargs) == ["engine_state"] and layer_kwargs["engine_state"] is engine_state
    assert list(boundaries) == list(BOUNDARY_KEYS)
    hidden_states = torch.zeros(1, batch["input_ids"].shape[1], 8)
    sequence_ids, varlen_kwargs = packed_row_sequences(boundaries, hidden_states, varlen_kernel_runs=False)
    assert varlen_kwargs == {}  # the boundaries become a block-diagonal mask on this CPU
    cu_seq_lens = batch["cu_seq_lens_q"].tolist()
    lengths = [end - start for start, end in zip(cu_seq_lens[:-1], cu_seq_lens[1:], strict=True)]
    expected = [index for index, length in enumerate(lengths) for _ in range(length)]
    assert sequence_ids.tolist() == [expected]


@pytest.fixture
def recorded_attention_calls():
    """SDPA under a backend name of its own that records each call's module and keyword arguments, as an engine
    plugging its attention into transformers' attention interface sees them."""
    calls = []

    def recording_sdpa(module, query, key, value, attention_mask, **kwargs):
        calls.append((type(module).__name__, module.layer_idx, kwargs))
        return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)

    AttentionInterface.register(RECORDING_BACKEND, recording_sdpa)
    AttentionMaskInterface.register(RECORDING_BACKEND, sdpa_mask)
    return calls


@pytest.mark.parametrize("layout", ["padded rows with cross-attention", "packed row"])
def test_extra_keyword_arguments_reach_every_layers_attention(recorded_attention_calls, layout):
    """An argument the caller adds (a serving engine's per-batch state) reaches the attention function of every
    layer, self- and cross-attention, as the very object passed, and changes nothing else."""
    torch.manual_seed(0)
    cross = layout != "packed row"
    config = tiny_config(is_decoder=True, add_cross_attention=cross, use_cache=False)
    model = hf_roformer.HfRoFormerModel(config).eval()
    if cross:
        inputs = {
            "input_ids": torch.tensor([[5, 6, 7, 8], [11, 12, 0, 0]]),
            "attention_mask": torch.tensor([[1] * 4, [1, 1, 0, 0]]),
            "encoder_hidden_states": torch.randn(2, 3, config.hidden_size),
        }
    else:
        inputs = model_inputs(packed_batch())
    engine_state = object()
    with torch.no_grad():
        expected = model(**inputs).last_hidden_state
        model.set_attn_implementation(RECORDING_BACKEND)
        output = model(**inputs, engine_state=engine_state).last_hidden_state
    torch.testing.assert_close(output, expected, atol=1e-6, rtol=0)
    modules = ("HfRoFormerSelfAttention", "HfRoFormerCrossAttention") if cross else ("HfRoFormerSelfAttention",)
    calls = [(name, layer) for name, layer, kwargs in recorded_attention_calls]
    assert calls == [(name, layer) for layer in range(config.num_hidden_layers) for name in modules]
    for _, _, kwargs in recorded_attention_calls:
        assert kwargs["engine_state"] is engine_state
        assert not set(BOUNDARY_KEYS) & set(kwargs)  # the boundaries became a mask on this CPU
