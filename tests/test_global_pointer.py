"""The GlobalPointer head: gold nested spans decode exactly, a tiny nested set is learned, and the saved model loads
through the Auto class with the package and through remote code without it."""

import json

import torch
from conftest import optimizer_steps, run_without_the_package, tiny_config

from hf_roformer import HfRoFormerForGlobalPointer
from hf_roformer.remote_code.global_pointer_hf_roformer import decode_spans, decoded_span_tensor, span_targets


NESTED = torch.tensor([[[0, 1, 3], [1, 1, 1], [0, 2, 3], [-1, -1, -1]], [[1, 0, 4], [-1, -1, -1]] + [[-1, -1, -1]] * 2])


def gold_logits(labels: torch.Tensor, types: int, length: int) -> torch.Tensor:
    """Scores of +5 on gold spans and -5 elsewhere."""
    return span_targets(labels, torch.Size((labels.shape[0], types, length, length))) * 10 - 5


def test_nested_gold_spans_decode_exactly():
    spans = decode_spans(gold_logits(NESTED, 2, 6))
    assert [[item[:3] for item in row] for row in spans] == [[(1, 1, 1), (0, 1, 3), (0, 2, 3)], [(1, 0, 4)]]
    packed = decoded_span_tensor(gold_logits(NESTED, 2, 6))
    assert packed.tolist() == [[[1, 1, 1], [0, 1, 3], [0, 2, 3]], [[1, 0, 4], [-1, -1, -1], [-1, -1, -1]]]


def test_spans_below_the_diagonal_and_on_padding_never_score():
    torch.manual_seed(0)
    model = HfRoFormerForGlobalPointer(tiny_config(num_labels=2)).eval()
    mask = torch.tensor([[1, 1, 1, 1, 0, 0]])
    logits = model(torch.randint(5, 90, (1, 6)), attention_mask=mask).logits
    allowed = torch.ones(6, 6, dtype=torch.bool).triu() & (mask.T.bool() & mask.bool())
    assert (logits[0, :, ~allowed] < -1e30).all() and (logits[0, :, allowed] > -1e30).all()


def test_a_tiny_nested_set_is_learned():
    torch.manual_seed(0)
    model = HfRoFormerForGlobalPointer(tiny_config(num_labels=2))
    ids = torch.randint(5, 90, (2, 6))
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-3)
    optimizer_steps(lambda: model(ids, labels=NESTED).loss, optimizer, 60)
    model.eval()
    with torch.no_grad():
        found = decode_spans(model(ids).logits)
    assert [[item[:3] for item in row] for row in found] == [[(1, 1, 1), (0, 1, 3), (0, 2, 3)], [(1, 0, 4)]]


def test_saved_model_loads_through_the_auto_class_and_remote_code(tmp_path):
    torch.manual_seed(0)
    model = HfRoFormerForGlobalPointer(tiny_config(num_labels=2, id2label={0: "LOC", 1: "PER"})).eval()
    model.save_pretrained(tmp_path / "gp")
    ids = torch.tensor([[2, 7, 8, 9, 3]])
    expected = model(ids).logits
    loaded = HfRoFormerForGlobalPointer.from_pretrained(tmp_path / "gp")
    assert torch.equal(loaded(ids).logits, expected)
    auto_map = json.loads((tmp_path / "gp" / "config.json").read_text())["auto_map"]
    assert auto_map["AutoModelForTokenClassification"] == "global_pointer_hf_roformer.HfRoFormerForGlobalPointer"
    assert auto_map["AutoModel"] == "modeling_hf_roformer.HfRoFormerModel"
    torch.save({"ids": ids, "expected": expected}, tmp_path / "expected.pt")
    run_without_the_package(
        tmp_path,
        f"""
import torch
from transformers import AutoModelForTokenClassification
model = AutoModelForTokenClassification.from_pretrained({str(tmp_path / "gp")!r}, trust_remote_code=True).eval()
assert type(model).__name__ == "HfRoFormerForGlobalPointer", type(model)
saved = torch.load({str(tmp_path / "expected.pt")!r})
assert torch.equal(model(saved["ids"]).logits, saved["expected"])
""",
    )
