"""Every head loads a checkpoint saved by transformers' own RoFormer classes and reproduces its outputs."""

import pytest
import torch
import transformers
from conftest import TINY, randomize_norms, tiny_reference_config

import hf_roformer
from hf_roformer.remote_code.releases_hf_roformer import CACHE_FIELD


pytestmark = [  # see setup.cfg
    pytest.mark.releases("remote_code.modeling_hf_roformer"),
]


TOLERANCE = 1e-6


def head_inputs(head: str, batch: dict) -> dict:
    """Inputs (with labels) for one head, built from the shared padded batch."""
    generator = torch.Generator().manual_seed(1)
    inputs = dict(batch)
    if head in ("ForMaskedLM", "ForCausalLM"):
        labels = batch["input_ids"].clone()
        labels[batch["attention_mask"] == 0] = -100
        inputs["labels"] = labels
    elif head == "ForSequenceClassification":
        inputs["labels"] = torch.tensor([0, 2])
    elif head == "ForTokenClassification":
        inputs["labels"] = torch.randint(0, 3, batch["input_ids"].shape, generator=generator)
    elif head == "ForQuestionAnswering":
        inputs["start_positions"] = torch.tensor([1, 3])
        inputs["end_positions"] = torch.tensor([4, 5])
    elif head == "ForMultipleChoice":
        inputs = {key: value.unsqueeze(1).expand(-1, 3, -1).clone() for key, value in batch.items()}
        inputs["input_ids"][:, 1, 2] = 7
        inputs["input_ids"][:, 2, 3] = 8
        inputs["labels"] = torch.tensor([1, 2])
    return inputs


def load_pair(head: str, tmp_path, **config_overrides):
    """A random transformers `RoFormer<head>` saved to disk, and the same checkpoint loaded into `HfRoFormer<head>`."""
    torch.manual_seed(0)
    config_overrides.setdefault("num_labels", 3)
    if head == "ForCausalLM":
        config_overrides["is_decoder"] = True
    reference = getattr(transformers, f"RoFormer{head}")(tiny_reference_config(**config_overrides)).eval()
    randomize_norms(reference)
    reference.save_pretrained(tmp_path)
    ours = getattr(hf_roformer, f"HfRoFormer{head}").from_pretrained(tmp_path).eval()
    return reference, ours


def assert_outputs_equal(reference_output, our_output):
    """Every tensor field the reference returns (loss, logits, hidden states) matches within `TOLERANCE`."""
    compared = 0
    for key, expected in reference_output.items():
        if key == CACHE_FIELD:
            continue
        actual = our_output[key]
        if isinstance(expected, tuple):
            assert len(actual) == len(expected), key
            pairs = zip(expected, actual, strict=True)
        else:
            pairs = [(expected, actual)]
        for expected_tensor, actual_tensor in pairs:
            assert actual_tensor.shape == expected_tensor.shape, key
            torch.testing.assert_close(actual_tensor, expected_tensor, atol=TOLERANCE, rtol=0, msg=key)
            compared += 1
    assert compared >= 2


HEADS = [
    "Model",
    "ForMaskedLM",
    "ForCausalLM",
    "ForSequenceClassification",
    "ForTokenClassification",
    "ForMultipleChoice",
    "ForQuestionAnswering",
]


def reference_is_causal(reference, batch) -> bool:
    """Whether the installed transformers' RoFormer decoder really attends causally (some 5.x releases build a
    bidirectional mask for it, so it cannot serve as the reference for causal outputs)."""
    full = reference(batch["input_ids"][:1]).logits
    prefix = reference(batch["input_ids"][:1, :4]).logits
    return torch.allclose(full[:, :4], prefix, atol=1e-5)


@pytest.mark.parametrize("head", HEADS)
@pytest.mark.parametrize("rotary_value", [False, True])
@pytest.mark.parametrize("padded", [False, True])
def test_head_matches_transformers_roformer(head, rotary_value, padded, batch, tmp_path):
    reference, ours = load_pair(head, tmp_path, rotary_value=rotary_value)
    if head == "ForCausalLM" and not reference_is_causal(reference, batch):
        pytest.skip(f"transformers {transformers.__version__}: RoFormerForCausalLM is not causal")
    inputs = head_inputs(head, batch)
    if not padded:  # the first sequence alone has no padding
        inputs = {key: value[:1] for key, value in inputs.items()}
    with torch.no_grad():
        expected = reference(**inputs, output_hidden_states=True)
        actual = ours(**inputs, output_hidden_states=True)
        if head == "ForMultipleChoice" and padded:  # transformers scores a padded choice from padding
            expected.logits, expected.loss = scores_of_each_question_unpadded(reference, inputs)
    assert_outputs_equal(expected, actual)
    if "labels" in inputs or "start_positions" in inputs:
        assert actual.loss is not None and torch.isfinite(actual.loss)


def scores_of_each_question_unpadded(reference, inputs: dict) -> tuple[torch.Tensor, torch.Tensor]:
    """transformers' choice scores of each question run alone without its padding (the choices of one question share
    their length here), and their cross-entropy against `inputs["labels"]`."""
    logits = []
    for question in range(inputs["input_ids"].shape[0]):
        length = int(inputs["attention_mask"][question, 0].sum())
        alone = {key: value[question : question + 1, ..., :length] for key, value in inputs.items() if key != "labels"}
        logits.append(reference(**alone).logits)
    logits = torch.cat(logits)
    return logits, torch.nn.functional.cross_entropy(logits, inputs["labels"])


@pytest.mark.parametrize("summary_type", ["first", "last"])
def test_multiple_choice_reads_the_token_transformers_summary_type_names(summary_type, batch, tmp_path):
    """"first" reads [CLS], as transformers does; "last" reads each choice's last real token, where transformers reads
    the last position (padding in the right-padded second question): the same on unpadded choices."""
    reference, ours = load_pair("ForMultipleChoice", tmp_path, summary_type=summary_type)
    inputs = head_inputs("ForMultipleChoice", batch)
    with torch.no_grad():
        expected, actual = reference(**inputs), ours(**inputs)
        padded_reference = expected.logits.clone()
        if summary_type == "last":
            expected.logits, expected.loss = scores_of_each_question_unpadded(reference, inputs)
    assert ours.config.summary_type == summary_type
    assert_outputs_equal(expected, actual)
    if summary_type == "last":  # the reference itself changes with the padding: the case this head differs in
        assert not torch.allclose(padded_reference[1], actual.logits[1], atol=1e-3)


@pytest.mark.parametrize("problem_type", ["regression", "multi_label_classification"])
def test_sequence_classification_problem_types(problem_type, batch, tmp_path):
    num_labels = 1 if problem_type == "regression" else 3
    reference, ours = load_pair("ForSequenceClassification", tmp_path, num_labels=num_labels)
    if problem_type == "regression":
        labels = torch.tensor([0.5, -1.0])
    else:
        labels = torch.tensor([[1.0, 0.0, 1.0], [0.0, 1.0, 0.0]])
    with torch.no_grad():
        expected = reference(**batch, labels=labels)
        actual = ours(**batch, labels=labels)
    assert ours.config.problem_type == problem_type
    assert_outputs_equal(expected, actual)


def test_factorized_embeddings_match(batch, tmp_path):
    """`embedding_size` != `hidden_size` (the `embeddings_project` layer, ELECTRA-style) loads and matches too."""
    reference, ours = load_pair("ForMaskedLM", tmp_path, embedding_size=16)
    assert ours.roformer.embeddings_project.weight.shape == (TINY["hidden_size"], 16)
    with torch.no_grad():
        assert_outputs_equal(reference(**batch, output_hidden_states=True), ours(**batch, output_hidden_states=True))


def test_position_table_is_ignored_and_not_saved(tmp_path):
    """The sinusoid table of transformers' checkpoints is the only key left out, and ours has no table at all."""
    reference, ours = load_pair("ForMaskedLM", tmp_path)
    reference_keys = set(reference.state_dict())
    our_keys = set(ours.state_dict())
    assert reference_keys - our_keys == {"roformer.encoder.embed_positions.weight"}
    assert our_keys <= reference_keys
    assert not any("embed_positions" in key or "inv_freq" in key for key in our_keys)


def test_roformer_config_is_translated(tmp_path):
    transformers.RoFormerConfig(**TINY, rotary_value=True).save_pretrained(tmp_path)
    config = hf_roformer.HfRoFormerConfig.from_pretrained(tmp_path)
    assert config.model_type == "hf_roformer"
    assert config.rotary_value is True and config.hidden_size == TINY["hidden_size"]
    assert config.rope_parameters == {"rope_type": "default", "rope_theta": 10000.0}


def test_roformer_config_of_roformer_v2_selects_that_architecture(tmp_path):
    """A `roformer` config of RoFormer-V2 (RMS norm, no biases) loads into the V2 layout, an unknown variant fails."""
    config_file = tmp_path / "config.json"
    transformers.RoFormerConfig(**TINY).save_pretrained(tmp_path)
    original = config_file.read_text()
    v2 = '"model_type": "roformer", "norm_type": "rms_norm", "use_bias": false'
    config_file.write_text(original.replace('"model_type": "roformer"', v2))
    model = hf_roformer.HfRoFormerModel(hf_roformer.HfRoFormerConfig.from_pretrained(tmp_path))
    assert model.config.norm_type == "rms_norm" and model.encoder.layer[0].attention.self.query.bias is None
    assert not any("LayerNorm" in name for name, _ in model.named_parameters())
    config_file.write_text(
        original.replace('"model_type": "roformer"', '"model_type": "roformer", "norm_type": "scale"')
    )
    with pytest.raises(ValueError, match="norm_type"):
        hf_roformer.HfRoFormerConfig.from_pretrained(tmp_path)
