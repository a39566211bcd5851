"""PEFT: LoRA on the attention projections (`query`, `key`, `value`, the names transformers' RoFormer uses) trains,
saves, reloads and merges, on every head."""

import pytest
import torch
from conftest import optimizer_steps, tiny_config

import hf_roformer


pytestmark = pytest.mark.releases("remote_code.modeling_hf_roformer")  # see setup.cfg


peft = pytest.importorskip("peft")

HEADS = {
    hf_roformer.HfRoFormerModel: peft.TaskType.FEATURE_EXTRACTION,
    hf_roformer.HfRoFormerForMaskedLM: None,
    hf_roformer.HfRoFormerForCausalLM: peft.TaskType.CAUSAL_LM,
    hf_roformer.HfRoFormerForSequenceClassification: peft.TaskType.SEQ_CLS,
    hf_roformer.HfRoFormerForTokenClassification: peft.TaskType.TOKEN_CLS,
    hf_roformer.HfRoFormerForMultipleChoice: None,
    hf_roformer.HfRoFormerForQuestionAnswering: peft.TaskType.QUESTION_ANS,
}


def lora_config(task_type=None):
    return peft.LoraConfig(
        task_type=task_type, r=4, lora_alpha=8, target_modules=["query", "key", "value"], lora_dropout=0.0
    )


def head_inputs(head):
    """A small batch for `head` (choices for multiple choice)."""
    shape = (2, 3, 7) if head is hf_roformer.HfRoFormerForMultipleChoice else (2, 7)
    input_ids = torch.randint(1, 99, shape, generator=torch.Generator().manual_seed(0))
    return {"input_ids": input_ids, "attention_mask": torch.ones_like(input_ids)}


def first_output(outputs):
    """Logits of a head, hidden states of the base model."""
    return outputs.logits if "logits" in outputs else outputs[0]


@pytest.mark.parametrize("head", list(HEADS), ids=lambda head: head.__name__)
def test_lora_wraps_every_head_and_only_adapters_train(head):
    torch.manual_seed(0)
    config = tiny_config(is_decoder=head is hf_roformer.HfRoFormerForCausalLM)
    model = peft.get_peft_model(head(config), lora_config(HEADS[head]))
    trainable = {name for name, parameter in model.named_parameters() if parameter.requires_grad}
    adapters = {name for name in trainable if "lora_" in name}
    assert len(adapters) == 2 * 3 * config.num_hidden_layers  # A and B for query, key, value in each layer
    assert all("lora_" in name or "modules_to_save" in name for name in trainable)
    inputs = head_inputs(head)
    output = first_output(model(**inputs))
    output.float().pow(2).mean().backward()
    assert all(model.get_parameter(name).grad is not None for name in adapters)


def test_lora_trains_saves_reloads_and_merges(tmp_path):
    head = hf_roformer.HfRoFormerForSequenceClassification
    torch.manual_seed(0)
    base = head(tiny_config(num_labels=2))
    base.save_pretrained(tmp_path / "base")
    model = peft.get_peft_model(base, lora_config(peft.TaskType.SEQ_CLS))
    optimizer = torch.optim.AdamW([p for p in model.parameters() if p.requires_grad], lr=1e-2)
    input_ids = torch.randint(1, 99, (8, 12), generator=torch.Generator().manual_seed(1))
    labels = torch.tensor([0, 1] * 4)
    losses = optimizer_steps(lambda: model(input_ids=input_ids, labels=labels).loss, optimizer, 10)
    assert losses[-1] < 0.5 * losses[0]
    model.eval()
    with torch.no_grad():
        trained = model(input_ids=input_ids).logits
    model.save_pretrained(tmp_path / "adapter")
    assert (tmp_path / "adapter" / "adapter_model.safetensors").exists()

    reloaded = peft.PeftModel.from_pretrained(
        hf_roformer.AutoModelForSequenceClassification.from_pretrained(tmp_path / "base"), tmp_path / "adapter"
    ).eval()
    with torch.no_grad():
        torch.testing.assert_close(reloaded(input_ids=input_ids).logits, trained)
        merged = reloaded.merge_and_unload()
        assert isinstance(merged, head) and not any("lora_" in name for name, _ in merged.named_parameters())
        torch.testing.assert_close(merged(input_ids=input_ids).logits, trained, atol=1e-5, rtol=1e-5)
    merged.save_pretrained(tmp_path / "merged")
    again = hf_roformer.AutoModelForSequenceClassification.from_pretrained(tmp_path / "merged").eval()
    with torch.no_grad():
        torch.testing.assert_close(again(input_ids=input_ids).logits, trained, atol=1e-5, rtol=1e-5)
