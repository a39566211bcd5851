"""No head's output depends on padding: the same rows padded to different lengths, on the right or on the left, give
each row's outputs alone (per-token outputs on its real tokens; pooled vectors, class logits, choice scores and the
batch's loss whole), in float32 within 1e-5. A head that read a padding position (the last position of a right-padded
choice, position 0 of a left-padded row) would fail here."""

import pytest
import torch
from conftest import randomize_norms, tiny_config

import hf_roformer


TOLERANCE = 1e-5
HEADS = {
    "base_with_pooler": (hf_roformer.HfRoFormerModel, {"pooler_activation": "tanh"}),
    "base_with_linear_pooler": (hf_roformer.HfRoFormerModel, {"pooler_activation": "linear"}),
    "masked_lm": (hf_roformer.HfRoFormerForMaskedLM, {}),
    "causal_lm": (hf_roformer.HfRoFormerForCausalLM, {"is_decoder": True, "use_cache": False}),
    "sequence_cls": (hf_roformer.HfRoFormerForSequenceClassification, {"num_labels": 3}),
    "sequence_mean": (hf_roformer.HfRoFormerForSequenceClassification, {"classifier_pooling": "mean", "num_labels": 3}),
    "token": (hf_roformer.HfRoFormerForTokenClassification, {"num_labels": 3}),
    "question_answering": (hf_roformer.HfRoFormerForQuestionAnswering, {}),
    "multiple_choice_last": (hf_roformer.HfRoFormerForMultipleChoice, {}),
    "multiple_choice_first": (hf_roformer.HfRoFormerForMultipleChoice, {"summary_type": "first"}),
    "global_pointer": (hf_roformer.HfRoFormerForGlobalPointer, {"num_labels": 2}),
}
LENGTHS = [9, 4, 6, 7]  # rows of a batch; multiple choice: two questions of two choices
PER_TOKEN = ("last_hidden_state", "start_logits", "end_logits")


def rows(seed: int = 0) -> list[dict[str, torch.Tensor]]:
    """Rows of different lengths, each with two segments."""
    generator = torch.Generator().manual_seed(seed)
    made = []
    for length in LENGTHS:
        token_type_ids = torch.zeros(length, dtype=torch.long)
        token_type_ids[length // 2 :] = 1
        input_ids = torch.randint(1, 99, (length,), generator=generator)
        made.append({"input_ids": input_ids, "token_type_ids": token_type_ids})
    return made


def padded(sequences: list[dict], width: int, side: str) -> dict[str, torch.Tensor]:
    """`sequences` padded with zeros to `width` tokens on `side`, with their attention mask."""
    batch = {name: torch.zeros(len(sequences), width, dtype=torch.long) for name in ("input_ids", "token_type_ids")}
    batch["attention_mask"] = torch.zeros(len(sequences), width, dtype=torch.long)
    for index, sequence in enumerate(sequences):
        length = len(sequence["input_ids"])
        where = slice(0, length) if side == "right" else slice(width - length, width)
        for name in ("input_ids", "token_type_ids"):
            batch[name][index, where] = sequence[name]
        batch["attention_mask"][index, where] = 1
    return batch


def with_labels(name: str, batch: dict) -> dict:
    """The batch with labels for the heads whose loss is compared."""
    real = batch["attention_mask"].bool()
    if name in ("masked_lm", "causal_lm", "token"):
        labels = batch["input_ids"] % 3 if name == "token" else batch["input_ids"]
        return {**batch, "labels": labels.masked_fill(~real, -100)}
    if name.startswith("sequence"):
        return {**batch, "labels": torch.tensor([0, 2, 1, 0])}
    if name.startswith("multiple_choice"):
        return {**{key: value.view(2, 2, -1) for key, value in batch.items()}, "labels": torch.tensor([1, 0])}
    return batch


def real_outputs(name: str, output, batch: dict) -> dict[str, list[torch.Tensor]]:
    """Each row's outputs at its real tokens, in the row's own order (per-token outputs), or whole (per-row
    outputs); the loss of the batch."""
    real = batch["attention_mask"].reshape(len(LENGTHS), -1).bool()
    found = {}
    for key, value in output.items():
        if not isinstance(value, torch.Tensor):
            continue
        if key == "loss":
            found[key] = [value]
        elif key in PER_TOKEN or (key == "logits" and value.dim() == 3):
            found[key] = [value[row][real[row]] for row in range(len(LENGTHS))]
        elif key == "logits" and name == "global_pointer":  # (rows, labels, tokens, tokens): real start x real end
            found[key] = [value[row][:, real[row]][:, :, real[row]] for row in range(len(LENGTHS))]
        else:
            found[key] = list(value.reshape(len(LENGTHS), -1) if name.startswith("multiple_choice") else value)
    return found


@pytest.mark.parametrize("side", ["right", "left"])
@pytest.mark.parametrize("name", list(HEADS))
def test_every_head_gives_each_row_the_same_outputs_however_the_batch_is_padded(name, side):
    head, overrides = HEADS[name]
    torch.manual_seed(0)
    model = head(tiny_config(**overrides)).eval()
    randomize_norms(model)
    sequences = rows()
    outputs = {}
    with torch.no_grad():
        for width in (max(LENGTHS), max(LENGTHS) + 5):
            batch = with_labels(name, padded(sequences, width, side))
            outputs[width] = real_outputs(name, model(**batch), batch)
        alone = {}
        for sequence in sequences:
            single = padded([sequence], len(sequence["input_ids"]), side)
            if name.startswith("multiple_choice"):
                single = {key: value[:, None] for key, value in single.items()}
            for key, value in model(**single).items():
                if isinstance(value, torch.Tensor) and key != "loss":
                    alone.setdefault(key, []).append(value[0].reshape(-1) if name.startswith("multiple_choice")
                                                     else value[0])  # fmt: skip
    narrow, wide = outputs.values()
    assert set(narrow) == set(wide)
    assert ("loss" in narrow) == (name not in ("base_with_pooler", "base_with_linear_pooler", "question_answering",
                                               "global_pointer"))  # fmt: skip
    for key in narrow:
        for row, (first, second) in enumerate(zip(narrow[key], wide[key], strict=True)):
            torch.testing.assert_close(second, first, atol=TOLERANCE, rtol=0, msg=f"{key}, row {row}")
    choices = torch.cat(alone["logits"]) if name.startswith("multiple_choice") else None
    for key, values in alone.items():
        if name.startswith("multiple_choice"):
            torch.testing.assert_close(torch.cat(narrow[key]), choices, atol=TOLERANCE, rtol=0, msg=key)
            continue
        for row, value in enumerate(values):
            torch.testing.assert_close(narrow[key][row], value.reshape(narrow[key][row].shape), atol=TOLERANCE,
                                       rtol=0, msg=f"{key}, row {row} alone")  # fmt: skip
