"""`fuse_qkv_projections()`: query, key and value as one product at inference. The fused model computes what the
unfused one does, saves the same files, follows its weights when they change, keeps LoRA's targets, and refuses what
it cannot join before changing anything."""

import pytest
import torch
from conftest import optimizer_steps, tiny_config

import hf_roformer


pytestmark = pytest.mark.releases("remote_code.joined_projection_hf_roformer")  # see setup.cfg


def padded_batch():
    """Two rows, the second padded, as a collator pads them."""
    input_ids = torch.randint(1, 99, (2, 11), generator=torch.Generator().manual_seed(0))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 6:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def joined_modules(model):
    return [module for module in model.modules() if getattr(module, "joined_qkv_weight", None) is not None]


def calls_of_projection_layers(model, batch) -> int:
    """How many times a forward calls the query, key and value layers themselves."""
    calls = []
    hooks = [
        module.register_forward_hook(lambda *args: calls.append(1))
        for name, module in model.named_modules()
        if name.rsplit(".", 1)[-1] in ("query", "key", "value")
    ]
    try:
        with torch.no_grad():
            model(**batch)
    finally:
        for hook in hooks:
            hook.remove()
    return len(calls)


@pytest.mark.parametrize(
    "overrides",
    [{}, {"rotary_value": True}, {"attention_type": "linear"}, {"use_bias": False}],
    ids=["softmax", "rotary_value", "linear_attention", "no_bias"],
)
def test_fused_forward_equals_the_unfused_forward(overrides):
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForMaskedLM(tiny_config(**overrides)).eval()
    batch = padded_batch()
    with torch.no_grad():
        expected = model(**batch).logits
    model.fuse_qkv_projections()
    assert len(joined_modules(model)) == model.config.num_hidden_layers
    assert calls_of_projection_layers(model, batch) == 0  # one joined product per layer instead
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).logits, expected, atol=1e-5, rtol=0)
    model.unfuse_qkv_projections()
    assert joined_modules(model) == []
    assert calls_of_projection_layers(model, batch) == 3 * model.config.num_hidden_layers


def test_fused_decoder_generates_what_the_unfused_one_does():
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True)).eval()
    prompt = torch.randint(1, 99, (2, 5), generator=torch.Generator().manual_seed(1))
    settings = dict(max_new_tokens=6, do_sample=False, pad_token_id=0)
    expected = model.generate(prompt, **settings)
    model.fuse_qkv_projections()
    torch.testing.assert_close(model.generate(prompt, **settings), expected, atol=0, rtol=0)


def test_fused_model_saves_the_same_files(tmp_path):
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForSequenceClassification(tiny_config(num_labels=3)).eval()
    model.save_pretrained(tmp_path / "unfused")
    model.fuse_qkv_projections()
    assert set(model.state_dict()) == set(hf_roformer.HfRoFormerForSequenceClassification(model.config).state_dict())
    model.save_pretrained(tmp_path / "fused")
    for name in ("model.safetensors", "config.json"):
        assert (tmp_path / "fused" / name).read_bytes() == (tmp_path / "unfused" / name).read_bytes(), name


def test_joined_weights_follow_changed_parameters():
    """An optimizer step, `load_state_dict` and a dtype cast after fusing: the fused forward keeps equal to the
    unfused forward of the weights as they are now."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config()).eval()
    reference = hf_roformer.HfRoFormerModel(tiny_config()).eval()
    batch = padded_batch()
    model.fuse_qkv_projections()

    def assert_as_unfused():
        reference.load_state_dict(model.state_dict())
        with torch.no_grad():
            expected = reference(**batch).last_hidden_state
            torch.testing.assert_close(model(**batch).last_hidden_state, expected, atol=1e-5, rtol=0)

    assert_as_unfused()
    model.train()
    optimizer_steps(lambda: model(**batch).last_hidden_state.pow(2).mean(), torch.optim.SGD(model.parameters(), 1.0), 1)
    model.eval()
    assert_as_unfused()
    other = hf_roformer.HfRoFormerModel(tiny_config()).state_dict()
    model.load_state_dict(other)
    assert_as_unfused()
    model.to(torch.float64)
    reference.to(torch.float64)
    assert_as_unfused()
    assert all(module.joined_qkv_weight.dtype == torch.float64 for module in joined_modules(model))


def test_gradients_of_a_fused_model_are_those_of_the_unfused_model():
    """With gradients recorded the three layers run: training a fused model trains its parameters exactly."""
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerForMaskedLM(tiny_config()).train()
    batch = padded_batch()

    def gradients():
        model.zero_grad(set_to_none=True)
        model(**batch, labels=batch["input_ids"]).loss.backward()
        return {name: parameter.grad.clone() for name, parameter in model.named_parameters()}

    expected = gradients()
    model.fuse_qkv_projections()
    actual = gradients()
    for name, gradient in expected.items():
        torch.testing.assert_close(actual[name], gradient, atol=0, rtol=0, msg=name)


def test_compiled_fused_forward_traces_as_one_graph():
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config()).eval()
    batch = padded_batch()
    with torch.no_grad():
        expected = model(**batch).last_hidden_state
    model.fuse_qkv_projections()
    compiled = torch.compile(model, fullgraph=True, backend="eager")
    with torch.no_grad():
        torch.testing.assert_close(compiled(**batch).last_hidden_state, expected, atol=1e-5, rtol=0)


def test_lora_on_the_query_and_value_names_trains_after_fusing():
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    base = hf_roformer.HfRoFormerForSequenceClassification(tiny_config(num_labels=2))
    unfused = hf_roformer.HfRoFormerForSequenceClassification(tiny_config(num_labels=2))
    unfused.load_state_dict(base.state_dict())
    base.fuse_qkv_projections()
    config = peft.LoraConfig(task_type=peft.TaskType.SEQ_CLS, r=4, lora_alpha=8, target_modules=["query", "value"])
    model = peft.get_peft_model(base, config)
    batch = padded_batch()
    labels = torch.tensor([0, 1])
    losses = optimizer_steps(
        lambda: model(**batch, labels=labels).loss, torch.optim.AdamW(model.parameters(), lr=1e-2), 15
    )
    assert losses[-1] < 0.5 * losses[0]
    # The adapted layers run themselves (the joined product would leave the adapters out): the fused model with its
    # adapters computes what an unfused model with the same adapters does.
    reference = peft.get_peft_model(unfused, config)
    reference.load_state_dict(model.state_dict())
    model.eval(), reference.eval()
    with torch.no_grad():
        torch.testing.assert_close(model(**batch).logits, reference(**batch).logits, atol=1e-5, rtol=0)


def test_layers_that_are_not_plain_linear_are_refused_before_anything_changes():
    peft = pytest.importorskip("peft")
    torch.manual_seed(0)
    config = peft.LoraConfig(r=4, lora_alpha=8, target_modules=["key"])
    model = peft.get_peft_model(hf_roformer.HfRoFormerModel(tiny_config()), config).base_model.model
    with pytest.raises(ValueError, match=r"encoder\.layer\.0\.attention\.self`: `key` is a Linear"):
        model.fuse_qkv_projections()
    assert joined_modules(model) == []
