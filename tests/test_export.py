"""Export: `torch.export` and the ONNX (dynamo) exporter with dynamic batch and sequence axes; the exported graphs
compute what the eager model does, also past `max_position_embeddings` (RoPE has no table to run out of)."""

import pytest
import torch
from conftest import tiny_config

import hf_roformer


class LogitsOnly(torch.nn.Module):
    """The model with plain tensor inputs and one tensor output, the interface an exported graph has."""

    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, input_ids, attention_mask):
        outputs = self.model(input_ids=input_ids, attention_mask=attention_mask)
        return outputs.logits if hasattr(outputs, "logits") else outputs.last_hidden_state


def padded_inputs(batch: int, length: int, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Random ids with the first row right-padded to half its length."""
    input_ids = torch.randint(1, 99, (batch, length), generator=torch.Generator().manual_seed(seed))
    attention_mask = torch.ones_like(input_ids)
    attention_mask[0, length // 2 :] = 0
    return input_ids, attention_mask


def dynamic_shapes():
    batch, sequence = torch.export.Dim("batch", max=64), torch.export.Dim("sequence", max=4096)
    return {"input_ids": {0: batch, 1: sequence}, "attention_mask": {0: batch, 1: sequence}}


# max_position_embeddings is 16: the longest check runs at 2.5x the trained length
SHAPES = [(2, 10), (3, 40), (1, 5)]


@pytest.mark.parametrize(
    "head, rope_parameters",
    [
        (hf_roformer.HfRoFormerModel, None),
        (hf_roformer.HfRoFormerForMaskedLM, None),
        (
            hf_roformer.HfRoFormerForMaskedLM,
            {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 16},
        ),
        (hf_roformer.HfRoFormerForMaskedLM, {"rope_type": "dynamic", "factor": 2.0}),
    ],
    ids=["encoder", "masked_lm", "masked_lm_yarn", "masked_lm_dynamic"],
)
def test_onnx_export_runs_in_onnxruntime_with_dynamic_axes(head, rope_parameters, tmp_path):
    pytest.importorskip("onnxscript")
    onnxruntime = pytest.importorskip("onnxruntime")
    torch.manual_seed(0)
    extra = {"rope_parameters": rope_parameters} if rope_parameters else {}
    model = head(tiny_config(max_position_embeddings=16, **extra)).eval()
    program = torch.onnx.export(
        LogitsOnly(model), padded_inputs(2, 10), dynamo=True, dynamic_shapes=dynamic_shapes(), verbose=False
    )
    program.save(str(tmp_path / "model.onnx"))
    session = onnxruntime.InferenceSession(str(tmp_path / "model.onnx"), providers=["CPUExecutionProvider"])
    for batch, length in SHAPES:
        input_ids, attention_mask = padded_inputs(batch, length, seed=length)
        (exported,) = session.run(None, {"input_ids": input_ids.numpy(), "attention_mask": attention_mask.numpy()})
        with torch.no_grad():
            expected = LogitsOnly(model)(input_ids, attention_mask)
        torch.testing.assert_close(torch.from_numpy(exported), expected, atol=1e-4, rtol=0)


def test_torch_export_of_the_encoder_handles_new_shapes():
    torch.manual_seed(0)
    model = hf_roformer.HfRoFormerModel(tiny_config(max_position_embeddings=16)).eval()
    exported = torch.export.export(LogitsOnly(model), padded_inputs(2, 10), dynamic_shapes=dynamic_shapes())
    for batch, length in SHAPES:
        inputs = padded_inputs(batch, length, seed=length)
        with torch.no_grad():
            torch.testing.assert_close(exported.module()(*inputs), LogitsOnly(model)(*inputs), atol=1e-5, rtol=0)
