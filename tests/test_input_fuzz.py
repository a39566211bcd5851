"""Seeded fuzzing of model inputs over every head: each case either gives a finite result or fails with a
`ValueError`/`TypeError` that names the argument at fault; no other exception, and no bad input accepted."""

import random
import re

import numpy as np
import pytest
import torch
from conftest import tiny_config

import hf_roformer


pytestmark = pytest.mark.releases("remote_code.modeling_hf_roformer")  # see setup.cfg


CASES = 600
VOCAB, TYPES, LABELS, CHOICES = 99, 2, 3, 3


def heads() -> dict:
    """One tiny model of every head (and problem type of sequence classification)."""
    torch.manual_seed(0)
    models = {
        "base": hf_roformer.HfRoFormerModel(tiny_config(pooler_activation="tanh")),
        "masked_lm": hf_roformer.HfRoFormerForMaskedLM(tiny_config()),
        "causal_lm": hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True)),
        "sequence_single": hf_roformer.HfRoFormerForSequenceClassification(tiny_config(num_labels=LABELS)),
        "sequence_regression": hf_roformer.HfRoFormerForSequenceClassification(tiny_config(num_labels=1)),
        "sequence_multi": hf_roformer.HfRoFormerForSequenceClassification(
            tiny_config(num_labels=LABELS, problem_type="multi_label_classification", classifier_pooling="mean")
        ),
        "token": hf_roformer.HfRoFormerForTokenClassification(tiny_config(num_labels=LABELS)),
        "multiple_choice": hf_roformer.HfRoFormerForMultipleChoice(tiny_config()),
        "question_answering": hf_roformer.HfRoFormerForQuestionAnswering(tiny_config()),
    }
    return {name: model.eval() for name, model in models.items()}


def valid_inputs(head: str, rng: random.Random) -> dict:
    """A correct random batch for `head`, with padding, segment ids, positions and labels drawn at random."""
    batch, length = rng.randint(1, 3), rng.randint(1, 7)
    shape = (batch, CHOICES, length) if head == "multiple_choice" else (batch, length)
    generator = torch.Generator().manual_seed(rng.randrange(2**31))
    inputs = {"input_ids": torch.randint(0, VOCAB, shape, generator=generator)}
    if rng.random() < 0.7:
        mask = torch.ones(shape, dtype=torch.long)
        if length > 1:
            mask[..., rng.randint(1, length) :] = 0
        inputs["attention_mask"] = mask
    if rng.random() < 0.5:
        inputs["token_type_ids"] = torch.randint(0, TYPES, shape, generator=generator)
    if rng.random() < 0.3:
        rows = 1 if head != "multiple_choice" and rng.random() < 0.5 else shape[0]
        offset = rng.choice([0, 7, 10**6])
        inputs["position_ids"] = (torch.arange(length) + offset).expand(*((rows,) + shape[1:-1]), length).clone()
    if rng.random() < 0.15:  # int32 ids are embedding indices too
        for name in ("input_ids", "token_type_ids"):
            if name in inputs:
                inputs[name] = inputs[name].int()
    if rng.random() < 0.6:
        inputs.update(valid_labels(head, batch, length, generator))
        if rng.random() < 0.15:  # nothing labelled: the loss must still be finite
            ignore_every_label(head, inputs)
    return inputs


def ignore_every_label(head: str, inputs: dict) -> None:
    """Mark every label of `inputs` as ignored, where the head has such a label (-100, or an answer past the input)."""
    if head in ("masked_lm", "causal_lm", "token"):
        inputs["labels"] = torch.full_like(inputs["labels"], -100)
    elif head == "question_answering":
        past_the_input = torch.full_like(inputs["start_positions"], inputs["input_ids"].shape[-1] + 3)
        inputs["start_positions"], inputs["end_positions"] = past_the_input, past_the_input.clone()


def valid_labels(head: str, batch: int, length: int, generator) -> dict:
    """Correct labels for `head` and a batch of `(batch, length)`."""
    if head in ("masked_lm", "causal_lm"):
        labels = torch.randint(0, VOCAB, (batch, length), generator=generator)
        labels[:, 0] = -100
        return {"labels": labels}
    if head == "token":
        return {"labels": torch.randint(0, LABELS, (batch, length), generator=generator)}
    if head == "sequence_single":
        return {"labels": torch.randint(0, LABELS, (batch,), generator=generator)}
    if head == "sequence_regression":
        return {"labels": torch.rand(batch, generator=generator)}
    if head == "sequence_multi":
        return {"labels": torch.randint(0, 2, (batch, LABELS), generator=generator).float()}
    if head == "multiple_choice":
        return {"labels": torch.randint(0, CHOICES, (batch,), generator=generator)}
    if head == "question_answering":
        start = torch.randint(0, length, (batch,), generator=generator)
        return {"start_positions": start, "end_positions": start}
    return {}


def label_name(head: str) -> str | None:
    return {"base": None, "question_answering": "start_positions"}.get(head, "labels")


def mutate(head: str, inputs: dict, rng: random.Random) -> str | None:
    """Break one argument of `inputs` in place; return the name the error must give (None: still valid)."""
    ids = inputs["input_ids"]
    if rng.random() < 0.2:
        return None
    options = ["ids_list", "ids_numpy", "ids_float", "ids_rank", "ids_range", "ids_narrow", "empty", "no_ids", "both"]
    options += ["mask_shape", "mask_values", "mask_list", "types_shape", "types_range", "types_float", "types_narrow"]
    options += ["positions_shape", "positions_rows", "positions_float", "embeds_width", "embeds_wide", "embeds_narrow"]
    if label_name(head) is not None:
        options += ["labels_shape", "labels_dtype", "labels_list"]
        if head not in ("sequence_regression", "sequence_multi"):
            options += ["labels_range", "labels_narrow"]
    choice = rng.choice(options)
    if choice == "ids_narrow":  # torch: "Expected tensor for argument #1 'indices' to have ... Long, Int"
        inputs["input_ids"] = ids.to(rng.choice([torch.uint8, torch.int8, torch.int16]))
        return "input_ids"
    if choice == "types_narrow":
        inputs["token_type_ids"] = torch.zeros_like(ids, dtype=rng.choice([torch.uint8, torch.int16]))
        return "token_type_ids"
    if choice in ("embeds_wide", "embeds_narrow"):  # float64 into a float32 model: torch's "mixed dtype"
        dtype = torch.float64 if choice == "embeds_wide" else rng.choice([torch.bfloat16, torch.float16])
        inputs["inputs_embeds"] = torch.randn(*ids.shape, 32).to(dtype)
        del inputs["input_ids"]
        return "inputs_embeds" if choice == "embeds_wide" else None  # a narrower float promotes to the model's
    if choice == "positions_rows":  # neither one row nor one per row (multiple choice: a RuntimeError in `expand`)
        rows = ids.shape[0] + rng.choice([1, 2])
        inputs["position_ids"] = torch.arange(ids.shape[-1]).expand(rows, *ids.shape[1:]).clone()
        return "position_ids"
    if choice == "ids_list":
        inputs["input_ids"] = ids.tolist()
        return "input_ids"
    if choice == "ids_numpy":
        inputs["input_ids"] = ids.numpy()
        return "input_ids"
    if choice == "ids_float":
        inputs["input_ids"] = ids.float()
        return "input_ids"
    if choice == "ids_rank":
        inputs["input_ids"] = ids.flatten() if rng.random() < 0.5 else ids.unsqueeze(0)
        return "input_ids"
    if choice == "ids_range":
        bad = ids.clone()
        bad.view(-1)[rng.randrange(bad.numel())] = rng.choice([VOCAB, -1, 10**9])
        inputs["input_ids"] = bad
        return "input_ids"
    if choice == "empty":
        axis = rng.choice([0, ids.dim() - 1])
        inputs["input_ids"] = ids.narrow(axis, 0, 0)
        for name in ("attention_mask", "token_type_ids", "position_ids"):
            inputs.pop(name, None)
        for name in ("labels", "start_positions", "end_positions"):
            inputs.pop(name, None)
        return "input_ids"
    if choice == "no_ids":
        del inputs["input_ids"]
        return "input_ids"
    if choice == "both":
        inputs["inputs_embeds"] = torch.randn(*ids.shape, 32)
        return "inputs_embeds"
    if choice == "embeds_width":
        inputs["inputs_embeds"] = torch.randn(*ids.shape, rng.choice([31, 64]))
        del inputs["input_ids"]
        return "inputs_embeds"
    if choice.startswith("mask"):
        mask = inputs.get("attention_mask", torch.ones_like(ids))
        if choice == "mask_shape":
            inputs["attention_mask"] = torch.ones(*ids.shape[:-1], ids.shape[-1] + rng.choice([1, 2]), dtype=torch.long)
        elif choice == "mask_values":
            bad = mask.clone()
            bad.view(-1)[0] = rng.choice([2, -1])
            inputs["attention_mask"] = bad
        else:
            inputs["attention_mask"] = mask.tolist()
        return "attention_mask"
    if choice.startswith("types"):
        if choice == "types_shape":
            inputs["token_type_ids"] = torch.zeros(*ids.shape[:-1], ids.shape[-1] + 1, dtype=torch.long)
        elif choice == "types_range":
            bad = torch.zeros_like(ids)
            bad.view(-1)[0] = rng.choice([TYPES, -1])
            inputs["token_type_ids"] = bad
        else:
            inputs["token_type_ids"] = torch.zeros_like(ids).float()
        return "token_type_ids"
    if choice == "positions_shape":
        length = ids.shape[-1]
        inputs["position_ids"] = torch.arange(length + 1).expand(*ids.shape[:-1], length + 1).clone()
        return "position_ids"
    if choice == "positions_float":
        inputs["position_ids"] = torch.arange(ids.shape[-1]).expand_as(ids).float()
        return "position_ids"
    name = label_name(head)
    labels = inputs.get(name)
    if labels is None:
        generator = torch.Generator().manual_seed(0)
        labels = valid_labels(head, ids.shape[0], ids.shape[-1], generator)[name]
        if head == "question_answering":
            inputs["end_positions"] = labels
    if choice == "labels_narrow":  # cross-entropy: "expected target dtype to be Long or Byte"
        inputs[name] = labels.to(rng.choice([torch.int32, torch.int16, torch.uint8]))
        if head == "question_answering":
            inputs["end_positions"] = inputs[name]
    elif choice == "labels_shape":
        inputs[name] = torch.cat([labels, labels])
    elif choice == "labels_dtype":
        inputs[name] = labels.long() if labels.dtype.is_floating_point else labels.float()
    elif choice == "labels_list":
        inputs[name] = labels.tolist()
    else:
        bad = labels.clone()
        high = {"masked_lm": VOCAB, "causal_lm": VOCAB, "multiple_choice": CHOICES}.get(head, LABELS)
        # answer positions past the input are ignored (transformers' convention); negative ones are errors
        bad.view(-1)[0] = -5 if head == "question_answering" else rng.choice([high, -5])
        inputs[name] = bad
    return name


def run_case(model, inputs: dict, expected: str | None) -> str:
    """Run one case; return "ok", "rejected" or raise an AssertionError explaining what went wrong."""
    try:
        with torch.no_grad():
            outputs = model(**inputs)
    except (ValueError, TypeError) as error:
        assert expected is not None, f"valid input rejected: {error}"
        assert f"`{expected}`" in str(error), f"error does not name `{expected}`: {error}"
        return "rejected"
    assert expected is None, f"bad `{expected}` accepted"
    for value in outputs.values():
        if isinstance(value, torch.Tensor) and value.is_floating_point():
            assert torch.isfinite(value).all(), "non-finite output"
    return "ok"


@pytest.mark.parametrize("seed", [0])
def test_input_fuzz(seed):
    rng = random.Random(seed)
    models = heads()
    counts = {"ok": 0, "rejected": 0}
    for case in range(CASES):
        head = rng.choice(sorted(models))
        inputs = valid_inputs(head, rng)
        expected = mutate(head, inputs, rng)
        shapes = {k: tuple(v.shape) if isinstance(v, torch.Tensor) else type(v).__name__ for k, v in inputs.items()}
        where = f"case {case}, head {head}, inputs {shapes}"
        try:
            counts[run_case(models[head], inputs, expected)] += 1
        except AssertionError as failure:
            raise AssertionError(f"{where}: {failure}") from None
        except Exception as error:  # noqa: BLE001 - the point: nothing but ValueError/TypeError may escape
            raise AssertionError(f"{where}: {type(error).__name__}: {error}") from error
    assert counts["ok"] > 80 and counts["rejected"] > 400, counts


def test_generate_with_an_empty_prompt_is_refused():
    model = hf_roformer.HfRoFormerForCausalLM(tiny_config(is_decoder=True)).eval()
    with pytest.raises(ValueError, match="Nothing to encode: `input_ids` has shape \\(1, 0\\)"):
        model.generate(torch.zeros(1, 0, dtype=torch.long), max_new_tokens=2)


def test_numpy_ids_are_refused_with_a_hint():
    model = hf_roformer.HfRoFormerModel(tiny_config()).eval()
    with pytest.raises(TypeError, match="`input_ids` must be a torch.Tensor, got ndarray.*return_tensors='pt'"):
        model(input_ids=np.array([[1, 2, 3]]))


def exact(message: str) -> str:
    """A `pytest.raises` pattern matching `message` and nothing else."""
    return "^" + re.escape(message) + "$"


INPUT_MISTAKES = {
    # the examples the input checks were written for, each with the whole message it gives
    "batch of 0 rows": (
        "base", {"input_ids": torch.zeros(0, 7, dtype=torch.long)}, ValueError,
        "Nothing to encode: `input_ids` has shape (0, 7); pass at least one row of at least one token.",
    ),
    "sequences of 0 tokens": (
        "base", {"input_ids": torch.zeros(2, 0, dtype=torch.long)}, ValueError,
        "Nothing to encode: `input_ids` has shape (2, 0); pass at least one row of at least one token.",
    ),
    "1-D ids": (
        "base", {"input_ids": torch.tensor([1, 2, 3])}, ValueError,
        "`input_ids` must have 2 dimensions, got shape (3,).",
    ),
    "ids as a list": (
        "base", {"input_ids": [[1, 2, 3]]}, TypeError,
        "`input_ids` must be a torch.Tensor, got list; tokenizers return tensors with `return_tensors='pt'`.",
    ),
    "multiple choice without ids or embeddings": (
        "multiple_choice", {}, ValueError, "Pass exactly one of `input_ids` and `inputs_embeds`.",
    ),
    "mask of the wrong shape": (
        "base", {"attention_mask": torch.ones(2, 6)}, ValueError,
        "`attention_mask` has shape (2, 6), expected (2, 7): one entry per token, 1 for real tokens and 0 for padding.",
    ),
    "mask value 2": (
        "base", {"attention_mask": torch.full((2, 7), 2)}, ValueError,
        "`attention_mask` contains 2; use 1 for real tokens and 0 for padding.",
    ),
    "token types of the wrong shape": (
        "base", {"token_type_ids": torch.zeros(2, 8, dtype=torch.long)}, ValueError,
        "`token_type_ids` has shape (2, 8), expected (2, 7).",
    ),
    "token type past the type vocabulary": (
        "base", {"token_type_ids": torch.full((2, 7), 5)}, ValueError,
        "`token_type_ids` contains 5, outside the valid range [0, 1] given by `type_vocab_size`=2; check that the "
        "tokenizer (or segment ids) match the model.",
    ),
    "positions for 3 rows": (
        "base", {"position_ids": torch.zeros(3, 7, dtype=torch.long)}, ValueError,
        "`position_ids` has shape (3, 7), expected (2, 7) or (1, 7) (one row of positions for every row of the batch).",
    ),
    "token labels of the wrong shape": (
        "token", {"labels": torch.zeros(2, 6, dtype=torch.long)}, ValueError,
        "`labels` has shape (2, 6), expected (2, 7).",
    ),
    "token label past the classes": (
        "token", {"labels": torch.full((2, 7), 3)}, ValueError,
        "`labels` contains 3; labels must lie in [0, 2] or -100 (ignored).",
    ),
    "sentence label past the classes": (
        "sequence_single", {"labels": torch.tensor([0, 7])}, ValueError,
        "`labels` contains 7; labels must lie in [0, 2].",
    ),
    # issue 22: torch's errors from inside the embedding lookup, the norm, `expand` and cross-entropy
    "uint8 ids": (
        "base", {"input_ids": torch.ones(2, 7, dtype=torch.uint8)}, TypeError,
        "`input_ids` must have dtype torch.long or torch.int32 (indices into an embedding table), got torch.uint8.",
    ),
    "int16 ids": (
        "masked_lm", {"input_ids": torch.ones(2, 7, dtype=torch.int16)}, TypeError,
        "`input_ids` must have dtype torch.long or torch.int32 (indices into an embedding table), got torch.int16.",
    ),
    "int16 token types": (
        "base", {"token_type_ids": torch.zeros(2, 7, dtype=torch.int16)}, TypeError,
        "`token_type_ids` must have dtype torch.long or torch.int32 (indices into an embedding table), got "
        "torch.int16.",
    ),
    "float64 embeddings for a float32 model": (
        "base", {"input_ids": None, "inputs_embeds": torch.zeros(2, 7, 32, dtype=torch.float64)}, TypeError,
        "`inputs_embeds` has dtype torch.float64, but the model's embeddings are torch.float32; pass "
        "`inputs_embeds.to(torch.float32)`.",
    ),
    "multiple-choice positions for 3 questions of 2": (
        "multiple_choice",
        {"input_ids": torch.ones(2, 3, 5, dtype=torch.long), "position_ids": torch.zeros(3, 3, 5, dtype=torch.long)},
        ValueError,
        "`position_ids` has shape (3, 3, 5), expected (2, 3, 5) or (1, 3, 5) (one row of positions for every question "
        "of the batch).",
    ),
    "int32 class labels": (
        "sequence_single", {"labels": torch.tensor([0, 1], dtype=torch.int32)}, TypeError,
        "`labels` must have dtype torch.long (class indices of a cross-entropy loss), got torch.int32.",
    ),
}


@pytest.mark.parametrize("mistake", sorted(INPUT_MISTAKES))
def test_input_mistakes_give_exact_messages(mistake):
    head, arguments, error, message = INPUT_MISTAKES[mistake]
    model = heads()[head]
    inputs = {"input_ids": torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(0))}
    if head == "multiple_choice":
        inputs = {}
    with pytest.raises(error, match=exact(message)):
        model(**{**inputs, **arguments})


def test_int32_ids_and_narrower_embeddings_are_taken():
    """int32 ids index the embedding like int64 ones; bfloat16 embeddings promote to a float32 model's dtype."""
    model = heads()["masked_lm"]
    ids = torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        expected = model(input_ids=ids).logits
        assert torch.equal(model(input_ids=ids.int(), token_type_ids=torch.zeros_like(ids.int())).logits, expected)
        embeds = model.get_input_embeddings()(ids)
        narrow = model(inputs_embeds=embeds.bfloat16()).logits
        assert torch.equal(narrow, model(inputs_embeds=embeds.bfloat16().float()).logits)


def test_embeddings_of_another_dtype_are_refused_for_a_bfloat16_model():
    model = hf_roformer.HfRoFormerModel(tiny_config()).to(torch.bfloat16).eval()
    with pytest.raises(TypeError, match=exact(
        "`inputs_embeds` has dtype torch.float32, but the model's embeddings are torch.bfloat16; pass "
        "`inputs_embeds.to(torch.bfloat16)`."
    )):
        model(inputs_embeds=torch.zeros(1, 3, 32))


@pytest.mark.parametrize("head", ["masked_lm", "causal_lm", "token", "question_answering"])
def test_a_batch_without_labelled_tokens_gives_zero_loss_and_no_gradient(head):
    model = heads()[head].train()
    inputs = {"input_ids": torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(1))}
    inputs.update(valid_labels(head, 2, 7, torch.Generator().manual_seed(2)))
    labelled = model(**inputs).loss
    ignore_every_label(head, inputs)
    loss = model(**inputs).loss
    loss.backward()
    assert labelled > 0 and loss.item() == 0.0
    assert all(p.grad is None or not p.grad.any() for p in model.parameters())


@pytest.mark.parametrize("head", ["masked_lm", "causal_lm", "token"])
def test_token_losses_are_the_mean_over_labelled_tokens(head):
    model = heads()[head]
    inputs = {"input_ids": torch.randint(0, VOCAB, (2, 7), generator=torch.Generator().manual_seed(1))}
    labels = valid_labels(head, 2, 7, torch.Generator().manual_seed(2))["labels"]
    labels[1, 3:] = -100
    with torch.no_grad():
        output = model(**inputs, labels=labels)
    logits, targets = output.logits, labels
    if head == "causal_lm":
        logits, targets = logits[:, :-1], labels[:, 1:]
    expected = torch.nn.functional.cross_entropy(logits.flatten(0, 1), targets.flatten(), ignore_index=-100)
    torch.testing.assert_close(output.loss, expected, rtol=1e-6, atol=0)
