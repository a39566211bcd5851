"""Padding-free attention: a padded batch packed into one row of real tokens computes what the padded batch does."""

import pytest
import torch
from conftest import randomize_norms, tiny_config
from torch.nn import functional

import hf_roformer
from hf_roformer.remote_code import modeling_hf_roformer
from hf_roformer.remote_code.modeling_hf_roformer import unpad_batch
from hf_roformer.remote_code.releases_hf_roformer import output_cache


def padded_batch(seed: int = 0):
    """Four rows: full, right-padded, left-padded, and padded in the middle (as a concatenation of two masks can)."""
    generator = torch.Generator().manual_seed(seed)
    input_ids = torch.randint(1, 99, (4, 11), generator=generator)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 7:] = 0
    attention_mask[2, :5] = 0
    attention_mask[3, 3:6] = 0
    token_type_ids = torch.zeros_like(input_ids)
    token_type_ids[:, 6:] = 1
    return {"input_ids": input_ids, "attention_mask": attention_mask, "token_type_ids": token_type_ids}


def outputs_with(model, mode: str, inputs: dict, **kwargs):
    """Run `model` with `config.padding_free = mode`."""
    model.config.padding_free = mode
    return model(**inputs, **kwargs)


def assert_equal_on_real_tokens(padded: torch.Tensor, packed: torch.Tensor, mask: torch.Tensor, tolerance=1e-5):
    real = mask.bool()
    difference = (padded[real] - packed[real]).abs().max().item()
    assert difference <= tolerance, f"max |delta| on real tokens = {difference}"


def reference_varlen_attn(query, key, value, cu_seq_q, cu_seq_k, max_q, max_k, *, scale, window_size):
    """`torch.nn.attention.varlen.varlen_attn` written as a loop of SDPA calls, one per sequence (CPU, any dtype)."""
    assert cu_seq_q.dtype == torch.int32 and torch.equal(cu_seq_q, cu_seq_k) and max_q == max_k
    assert max_q == int((cu_seq_q[1:] - cu_seq_q[:-1]).max())
    assert window_size in ((-1, -1), (-1, 0))
    outputs = []
    for start, end in zip(cu_seq_q[:-1].tolist(), cu_seq_q[1:].tolist(), strict=True):
        q, k, v = (tensor[start:end].transpose(0, 1) for tensor in (query, key, value))
        out = functional.scaled_dot_product_attention(q, k, v, scale=scale, is_causal=window_size == (-1, 0))
        outputs.append(out.transpose(0, 1))
    return torch.cat(outputs)


def test_unpad_batch_packs_real_tokens_row_after_row_and_unpacks_exactly():
    mask = torch.tensor([[1, 1, 1, 0], [0, 1, 1, 1], [1, 0, 0, 1]])
    unpadded = unpad_batch(mask)
    assert unpadded.cu_seq_lens.tolist() == [0, 3, 6, 8] and unpadded.cu_seq_lens.dtype == torch.int32
    assert unpadded.max_length == 3
    assert unpadded.sequence_ids.tolist() == [[0, 0, 0, 1, 1, 1, 2, 2]]
    values = torch.arange(12.0).view(3, 4, 1).requires_grad_()
    packed = unpadded.pack(values)
    assert packed.squeeze(-1).tolist() == [[0.0, 1.0, 2.0, 5.0, 6.0, 7.0, 8.0, 11.0]]
    restored = unpadded.unpack(packed)
    assert torch.equal(restored, values.detach() * mask.unsqueeze(-1))
    restored.sum().backward()
    assert torch.equal(values.grad, mask.unsqueeze(-1).float())
    # a tensor broadcast over the batch (position ids of shape (1, seq)) packs like its expanded form
    positions = torch.arange(4).unsqueeze(0)
    assert unpadded.pack(positions).tolist() == [[0, 1, 2, 1, 2, 3, 0, 3]]
    assert unpad_batch(torch.ones(2, 5, dtype=torch.long)) is None


@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa", "flex_attention"])
@pytest.mark.parametrize("is_decoder", [False, True])
def test_packed_row_equals_padded_batch_on_every_backend(attn_implementation, is_decoder):
    config = tiny_config(is_decoder=is_decoder, use_cache=False, attn_implementation=attn_implementation)
    model = hf_roformer.HfRoFormerModel(config).eval()
    randomize_norms(model)
    inputs = padded_batch()
    with torch.no_grad():
        padded = outputs_with(model, "never", inputs).last_hidden_state
        packed = outputs_with(model, "always", inputs).last_hidden_state
    assert_equal_on_real_tokens(padded, packed, inputs["attention_mask"])
    assert packed[~inputs["attention_mask"].bool()].abs().max() == 0


@pytest.mark.parametrize(
    "rope_parameters",
    [
        {"rope_type": "dynamic", "factor": 2.0, "original_max_position_embeddings": 6},
        {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 6},
    ],
    ids=["dynamic", "yarn"],
)
def test_packed_row_keeps_each_sequences_rope_scaling(rope_parameters):
    """Dynamic NTK uses each row's own length; YaRN its temperature: packing changes neither."""
    model = hf_roformer.HfRoFormerModel(tiny_config(rope_parameters=rope_parameters)).eval()
    inputs = padded_batch(seed=1)
    with torch.no_grad():
        padded = outputs_with(model, "never", inputs).last_hidden_state
        packed = outputs_with(model, "always", inputs).last_hidden_state
    assert_equal_on_real_tokens(padded, packed, inputs["attention_mask"])


def test_packed_training_step_has_the_padded_gradients():
    model = hf_roformer.HfRoFormerForMaskedLM(tiny_config(rotary_value=True))
    randomize_norms(model)
    inputs = padded_batch(seed=2)
    labels = inputs["input_ids"].masked_fill(inputs["attention_mask"] == 0, -100)
    gradients = {}
    for mode in ("never", "always"):
        model.zero_grad()
        outputs_with(model, mode, inputs, labels=labels).loss.backward()
        gradients[mode] = {name: parameter.grad.clone() for name, parameter in model.named_parameters()}
    for name, gradient in gradients["never"].items():
        torch.testing.assert_close(gradients["always"][name], gradient, atol=1e-5, rtol=1e-4, msg=name)


HEADS = {
    "base_with_pooler": (hf_roformer.HfRoFormerModel, {"pooler_activation": "tanh"}),
    "masked_lm": (hf_roformer.HfRoFormerForMaskedLM, {}),
    "causal_lm": (hf_roformer.HfRoFormerForCausalLM, {"is_decoder": True, "use_cache": False}),
    "sequence_cls": (hf_roformer.HfRoFormerForSequenceClassification, {}),
    "sequence_mean": (hf_roformer.HfRoFormerForSequenceClassification, {"classifier_pooling": "mean"}),
    "token": (hf_roformer.HfRoFormerForTokenClassification, {}),
    "question_answering": (hf_roformer.HfRoFormerForQuestionAnswering, {}),
    "multiple_choice": (hf_roformer.HfRoFormerForMultipleChoice, {}),
}


def head_inputs(name: str) -> dict:
    """A padded batch (and labels) for one head; multiple choice gets two questions of two choices of different
    lengths (right-padded), so the last position it reads is padding for some choices."""
    inputs = padded_batch(seed=3)
    if name == "multiple_choice":
        inputs = {key: value[:, :9].reshape(2, 2, 9) for key, value in inputs.items()}
        inputs["attention_mask"] = torch.ones_like(inputs["input_ids"])
        inputs["attention_mask"][0, 1, 6:] = 0
        inputs["attention_mask"][1, 0, 4:] = 0
        inputs["labels"] = torch.tensor([1, 0])
    elif name in ("masked_lm", "causal_lm", "token"):
        labels = inputs["input_ids"] % 2 if name == "token" else inputs["input_ids"]
        inputs["labels"] = labels.masked_fill(inputs["attention_mask"] == 0, -100)
    elif name.startswith("sequence"):
        inputs["labels"] = torch.tensor([0, 1, 1, 0])
    elif name == "question_answering":
        inputs["start_positions"], inputs["end_positions"] = torch.tensor([1, 2, 6, 1]), torch.tensor([3, 5, 8, 2])
    return inputs


@pytest.mark.parametrize("mode", ["auto", "always"])
@pytest.mark.parametrize("name", list(HEADS))
def test_every_head_gives_the_padded_result_in_every_mode(name, mode):
    """Per-token outputs equal on real tokens; pooled outputs, choice scores and losses equal exactly the padded
    ones (heads that read a padding position keep the padded layout for that batch)."""
    head, overrides = HEADS[name]
    torch.manual_seed(0)
    model = head(tiny_config(**overrides)).eval()
    randomize_norms(model)
    inputs = head_inputs(name)
    with torch.no_grad():
        padded = outputs_with(model, "never", inputs)
        tested = outputs_with(model, mode, inputs)
    mask = inputs["attention_mask"]
    for key, value in padded.items():
        if key in ("last_hidden_state",) or (key == "logits" and value.dim() == 3) or key.endswith("_logits"):
            assert_equal_on_real_tokens(value, tested[key], mask)
        else:
            torch.testing.assert_close(tested[key], value, atol=1e-5, rtol=1e-5, msg=key)


def test_sdpa_packed_row_goes_through_the_varlen_kernel(monkeypatch):
    """With a variable-length kernel the packed row carries no mask, only sequence boundaries; the kernel (here its
    CPU reference) must then compute the padded result, bidirectional and causal."""
    calls = []

    def recording_varlen(*args, **kwargs):
        calls.append(args[3])
        return reference_varlen_attn(*args, **kwargs)

    monkeypatch.setattr(modeling_hf_roformer, "varlen_attn", recording_varlen)
    monkeypatch.setattr(modeling_hf_roformer, "varlen_kernel_applies", lambda *args: True)
    for is_decoder in (False, True):
        rope = {"rope_type": "yarn", "factor": 2.0, "original_max_position_embeddings": 8}
        model = hf_roformer.HfRoFormerModel(tiny_config(is_decoder=is_decoder, rope_parameters=rope)).eval()
        inputs = padded_batch(seed=4)
        calls.clear()
        with torch.no_grad():
            packed = outputs_with(model, "always", inputs, use_cache=False).last_hidden_state
            padded = outputs_with(model, "never", inputs, use_cache=False).last_hidden_state
        assert len(calls) == model.config.num_hidden_layers
        assert calls[0].tolist() == [0, 11, 18, 24, 32]
        assert_equal_on_real_tokens(padded, packed, inputs["attention_mask"])


def test_packed_row_input_goes_through_the_varlen_kernel(monkeypatch):
    """A row that already packs sequences (`DataCollatorWithFlattening` with its flash-attention kwargs) is attended
    per sequence by the variable-length kernel where one runs, with the result of the same sequences padded."""
    calls = []

    def recording_varlen(*args, **kwargs):
        calls.append(args[3])
        return reference_varlen_attn(*args, **kwargs)

    monkeypatch.setattr(modeling_hf_roformer, "varlen_attn", recording_varlen)
    monkeypatch.setattr(modeling_hf_roformer, "varlen_kernel_applies", lambda *args: True)
    lengths = [5, 9, 3]
    generator = torch.Generator().manual_seed(6)
    sequences = [torch.randint(1, 99, (length,), generator=generator) for length in lengths]
    packed_ids = torch.cat(sequences)[None]
    packed_positions = torch.cat([torch.arange(length) for length in lengths])[None]
    cu_seq_lens = torch.tensor([0, 5, 14, 17], dtype=torch.int32)
    boundaries = {"cu_seq_lens_q": cu_seq_lens, "cu_seq_lens_k": cu_seq_lens, "max_length_q": 9, "max_length_k": 9}
    padded_ids = torch.nn.utils.rnn.pad_sequence(sequences, batch_first=True)
    padded_mask = (torch.arange(max(lengths))[None] < torch.tensor(lengths)[:, None]).long()
    for is_decoder in (False, True):
        model = hf_roformer.HfRoFormerModel(tiny_config(is_decoder=is_decoder)).eval()
        model.config.padding_free = "never"
        calls.clear()
        with torch.no_grad():
            packed = model(
                input_ids=packed_ids, position_ids=packed_positions, use_cache=False, **boundaries
            ).last_hidden_state
            padded = model(input_ids=padded_ids, attention_mask=padded_mask, use_cache=False).last_hidden_state
        assert len(calls) == model.config.num_hidden_layers
        assert calls[0].tolist() == [0, 5, 14, 17]
        torch.testing.assert_close(packed[0], padded[padded_mask.bool()], atol=1e-5, rtol=1e-5)


def test_auto_keeps_the_padded_batch_where_no_varlen_kernel_runs(monkeypatch):
    """On CPU (no variable-length kernel) `auto` must not pay for packing; `always` packs."""
    packs = []
    monkeypatch.setattr(
        modeling_hf_roformer, "unpad_batch", lambda mask, *args: packs.append(mask) or unpad_batch(mask, *args)
    )
    model = hf_roformer.HfRoFormerModel(tiny_config()).eval()
    inputs = padded_batch()
    with torch.no_grad():
        outputs_with(model, "auto", inputs)
        assert packs == []
        outputs_with(model, "always", inputs)
        assert len(packs) == 1


def test_forwards_that_need_padded_shapes_keep_them():
    """Requested hidden states / attentions and decoding with a cache stay padded, and are still right."""
    config = tiny_config(attn_implementation="eager", is_decoder=True)
    model = hf_roformer.HfRoFormerForCausalLM(config).eval()
    inputs = padded_batch(seed=5)
    inputs.pop("token_type_ids")
    with torch.no_grad():
        requested = {"output_hidden_states": True, "output_attentions": True, "use_cache": False}
        reference = outputs_with(model, "never", inputs, **requested)
        forced = outputs_with(model, "always", inputs, **requested)
        cached = outputs_with(model, "always", inputs, use_cache=True)
    assert [tuple(state.shape) for state in forced.hidden_states] == [(4, 11, 32)] * 3
    assert tuple(forced.attentions[0].shape) == (4, 4, 11, 11)
    for left, right in zip(reference.hidden_states, forced.hidden_states, strict=True):
        torch.testing.assert_close(left, right)
    torch.testing.assert_close(cached.logits, reference.logits)
    assert output_cache(cached).get_seq_length() == 11


def test_padding_free_mode_is_validated_and_saved(tmp_path):
    with pytest.raises(ValueError, match="padding_free"):
        tiny_config(padding_free="sometimes")
    tiny_config(padding_free="never").save_pretrained(tmp_path)
    assert hf_roformer.HfRoFormerConfig.from_pretrained(tmp_path).padding_free == "never"


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("attn_implementation", ["sdpa", "flash_attention_2"])
def test_padding_free_on_cuda_equals_padded(dtype, attn_implementation, monkeypatch):
    """On the GPU, unpadding runs the variable-length kernel in half precision (it really runs); fp32 goes through the
    block mask."""
    if attn_implementation == "flash_attention_2":
        pytest.importorskip("flash_attn")
        if dtype == torch.float32:
            pytest.skip("flash-attn runs in half precision only")
    if attn_implementation == "sdpa" and dtype == torch.bfloat16 and modeling_hf_roformer.varlen_attn is None:
        pytest.skip("torch has no varlen_attn (needs >= 2.10)")
    config = tiny_config(hidden_size=256, num_attention_heads=4, attn_implementation=attn_implementation)
    model = hf_roformer.HfRoFormerModel(config).to("cuda", dtype).eval()
    inputs = {key: value.cuda() for key, value in padded_batch().items()}
    mode = "always"
    varlen_calls = []
    if attn_implementation == "sdpa" and modeling_hf_roformer.varlen_attn is not None:
        kernel = modeling_hf_roformer.varlen_attn
        monkeypatch.setattr(
            modeling_hf_roformer, "varlen_attn", lambda *a, **k: varlen_calls.append(1) or kernel(*a, **k)
        )
    with torch.no_grad():
        padded = outputs_with(model, "never", inputs).last_hidden_state.float()
        assert not varlen_calls
        packed = outputs_with(model, mode, inputs).last_hidden_state.float()
    if attn_implementation == "sdpa":
        assert len(varlen_calls) == (config.num_hidden_layers if dtype == torch.bfloat16 else 0)
    assert_equal_on_real_tokens(padded, packed, inputs["attention_mask"], 2e-2 if dtype == torch.bfloat16 else 1e-5)


@pytest.mark.parametrize(
    "length, real_lengths, unpads",
    [
        (2048, [2048, 1200, 600, 2048], True),  # long rows, 72% real: the variable-length kernel pays
        (2048, [2048, 2000, 2048, 2048], True),  # long rows, 99% real: flash instead of masked SDPA still pays
        (2048, [2048] * 4, False),  # no padding: nothing to unpad
        (1024, [1024, 200, 100, 1024], False),  # 4 x 1,024 positions: host-bound, not measured to pay
        (512, [512, 100] * 24, True),  # 48 x 512 positions, 60% real: enough work for unpadding to pay
        (512, [512, 400] * 24, False),  # ... but 89% real: too little padding to save
    ],
)
def test_auto_unpads_only_where_it_measured_faster(monkeypatch, length, real_lengths, unpads):
    """`auto` decides from the batch's shape (no host read) and then, for rows under 2,048 tokens, the real-token
    fraction (the one read)."""
    calls = []

    def recording_varlen(*args, **kwargs):
        calls.append(args[3])
        return reference_varlen_attn(*args, **kwargs)

    monkeypatch.setattr(modeling_hf_roformer, "varlen_attn", recording_varlen)
    monkeypatch.setattr(modeling_hf_roformer, "varlen_kernel_applies", lambda *args: True)
    model = hf_roformer.HfRoFormerModel(tiny_config(num_hidden_layers=1)).eval()
    input_ids = torch.randint(1, 99, (len(real_lengths), length), generator=torch.Generator().manual_seed(0))
    attention_mask = (torch.arange(length)[None] < torch.tensor(real_lengths)[:, None]).long()
    with torch.no_grad():
        auto = outputs_with(model, "auto", {"input_ids": input_ids, "attention_mask": attention_mask})
        padded = outputs_with(model, "never", {"input_ids": input_ids, "attention_mask": attention_mask})
    assert bool(calls) == unpads
    assert_equal_on_real_tokens(padded.last_hidden_state, auto.last_hidden_state, attention_mask)
