"""Half precision and int8 inference: bf16 / fp16 models and transformers' torchao int8 quantization compute what the
fp32 model does, within the precision of their formats (the accuracy change on a trained model is measured in
`benchmarks/bench_quantization.py`)."""

import pytest
import torch
from conftest import randomize_norms, tiny_config

import hf_roformer


DEVICES = ["cpu"] + (["cuda"] if torch.cuda.is_available() else [])


def padded_batch(device):
    input_ids = torch.randint(1, 99, (3, 24), generator=torch.Generator().manual_seed(0)).to(device)
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 15:] = 0
    return {"input_ids": input_ids, "attention_mask": attention_mask}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("attn_implementation", ["eager", "sdpa"])
def test_half_precision_inference_tracks_float32(device, dtype, attn_implementation):
    torch.manual_seed(0)
    config = tiny_config(hidden_size=64, num_attention_heads=4, attn_implementation=attn_implementation)
    model = hf_roformer.HfRoFormerForMaskedLM(config).to(device).eval()
    randomize_norms(model)
    inputs = padded_batch(device)
    real = inputs["attention_mask"].bool()
    with torch.no_grad():
        expected = model(**inputs).logits[real]
        half = model.to(dtype)(**inputs).logits
    assert half.dtype == dtype
    difference = (half[real].float() - expected).abs().max().item()
    scale = expected.abs().max().item()
    assert difference <= 0.03 * scale, f"max |delta| {difference:.3g} vs logit scale {scale:.3g}"


def test_torchao_int8_quantization_through_from_pretrained(tmp_path):
    """`from_pretrained(..., quantization_config=TorchAoConfig(int8 dynamic))` quantizes every linear layer of the
    transformer; outputs stay within int8 rounding of the fp32 model's."""
    pytest.importorskip("torchao")
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig
    from transformers import TorchAoConfig

    torch.manual_seed(0)
    config = tiny_config(hidden_size=64, num_attention_heads=4, intermediate_size=128, num_labels=3)
    model = hf_roformer.HfRoFormerForSequenceClassification(config).eval()
    model.save_pretrained(tmp_path)
    quantized = hf_roformer.AutoModelForSequenceClassification.from_pretrained(
        tmp_path, quantization_config=TorchAoConfig(Int8DynamicActivationInt8WeightConfig()), device_map="cpu"
    ).eval()
    query = quantized.roformer.encoder.layer[0].attention.self.query.weight
    assert "Int8" in type(query).__name__, type(query)
    inputs = padded_batch("cpu")
    with torch.no_grad():
        expected = model(**inputs).logits
        actual = quantized(**inputs).logits
    assert (actual - expected).abs().max().item() <= 0.05 * expected.abs().max().item() + 1e-3
