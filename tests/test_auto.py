"""Auto classes: registration, save/reload through every head, and remote-code loading without the package."""

import json
import os
import subprocess
import sys

import pytest
import torch
import transformers
from conftest import run_without_the_package, tiny_config
from transformers.testing_utils import CaptureLogger

import hf_roformer
from hf_roformer.remote_code.saving_hf_roformer import AUTO_MAP


pytestmark = [  # see setup.cfg
    pytest.mark.releases("auto_registration", "integrations.roformer_checkpoints", "remote_code.saving_hf_roformer"),
]


AUTO_HEADS = {auto_class.__name__: model_class for auto_class, model_class in hf_roformer.AUTO_MODEL_CLASSES.items()}
HUB_FILES = {
    "configuration_hf_roformer.py",
    "modeling_hf_roformer.py",
    "saving_hf_roformer.py",
    "rotary_hf_roformer.py",
    "rotary_kernels_hf_roformer.py",
    "linear_attention_hf_roformer.py",
    "blockwise_attention_hf_roformer.py",
}


def build(auto_name: str):
    """A tiny random model of the head an Auto class maps to."""
    torch.manual_seed(0)
    config = tiny_config(is_decoder=auto_name == "AutoModelForCausalLM", num_labels=3)
    return AUTO_HEADS[auto_name](config).eval()


def sample_inputs(auto_name: str) -> dict:
    """Deterministic inputs of the right shape for a head (multiple choice takes a choices dimension)."""
    input_ids = torch.arange(1, 19).reshape(2, 9) % 97 + 1
    attention_mask = torch.ones_like(input_ids)
    attention_mask[1, 7:] = 0
    if auto_name == "AutoModelForMultipleChoice":
        return {
            "input_ids": input_ids[None].expand(2, -1, -1),
            "attention_mask": attention_mask[None].expand(2, -1, -1),
        }
    return {"input_ids": input_ids, "attention_mask": attention_mask}


def first_output(output) -> torch.Tensor:
    """The main tensor of a model output (hidden states, logits or start logits)."""
    return output[0]


def test_registration():
    assert transformers.CONFIG_MAPPING["hf_roformer"] is hf_roformer.HfRoFormerConfig
    assert transformers.AutoConfig.for_model("hf_roformer").__class__ is hf_roformer.HfRoFormerConfig
    for auto_name, model_class in AUTO_HEADS.items():
        auto_class = getattr(transformers, auto_name)
        assert auto_class._model_mapping[hf_roformer.HfRoFormerConfig] is model_class
        assert isinstance(auto_class.from_config(tiny_config()), model_class)
    # transformers' own RoFormer is untouched
    assert transformers.CONFIG_MAPPING["roformer"] is transformers.RoFormerConfig


# Checked in a fresh interpreter: the config, every head and the tokenizer reached through transformers' Auto classes.
REGISTERED_EVERYWHERE = """
import transformers
from transformers.models.auto.tokenization_auto import TOKENIZER_MAPPING
import hf_roformer
config = transformers.AutoConfig.for_model("hf_roformer", vocab_size=16, hidden_size=8, num_hidden_layers=1,
                                           num_attention_heads=2, intermediate_size=8)
assert type(config) is hf_roformer.HfRoFormerConfig, type(config)
for auto_class, head in hf_roformer.AUTO_MODEL_CLASSES.items():
    assert type(auto_class.from_config(config)) is head, auto_class
registered = TOKENIZER_MAPPING[hf_roformer.HfRoFormerConfig]  # a class, or (slow, fast) on some releases
assert hf_roformer.HfRoFormerTokenizer in (registered if isinstance(registered, tuple) else (registered,)), registered
"""


@pytest.mark.parametrize("first", ["hf_roformer", "transformers' Auto classes"])
def test_registration_holds_in_either_import_order_and_the_package_import_is_light(first, tmp_path):
    """`import hf_roformer` imports neither torch nor transformers (`auto_registration.py` registers each class when
    its Auto module is imported); the Auto classes find every class whichever is imported first."""
    if first == "hf_roformer":
        prologue = "import sys, hf_roformer\nassert not {'torch', 'transformers'} & set(sys.modules)\n"
    else:
        prologue = "from transformers import AutoConfig, AutoModel, AutoTokenizer\n"
    result = subprocess.run(
        [sys.executable, "-c", prologue + REGISTERED_EVERYWHERE], capture_output=True, text=True, cwd=tmp_path,
        env={**os.environ, "HF_HUB_OFFLINE": "1"}, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]


@pytest.mark.parametrize("auto_name", sorted(AUTO_HEADS))
def test_save_and_reload_through_auto_class(auto_name, tmp_path):
    model = build(auto_name)
    model.save_pretrained(tmp_path)
    saved_config = json.loads((tmp_path / "config.json").read_text())
    assert saved_config["model_type"] == "hf_roformer"
    assert saved_config["auto_map"] == AUTO_MAP
    assert HUB_FILES <= set(os.listdir(tmp_path))
    reloaded = getattr(transformers, auto_name).from_pretrained(tmp_path).eval()
    assert type(reloaded) is type(model)
    inputs = sample_inputs(auto_name)
    with torch.no_grad():
        assert torch.equal(first_output(reloaded(**inputs)), first_output(model(**inputs)))


REMOTE_SCRIPT = """
import torch
import transformers

for job in torch.load(sys.argv[1]):
    auto_class = getattr(transformers, job["auto_name"])
    model = auto_class.from_pretrained(job["checkpoint"], trust_remote_code=True).eval()
    assert type(model).__module__.startswith("transformers_modules."), type(model).__module__
    with torch.no_grad():
        torch.save({"class": type(model).__name__, "output": model(**job["inputs"])[0]}, job["output"])
"""


def test_remote_code_load_without_the_package(tmp_path):
    """Every head loads with `trust_remote_code=True` in a Python that cannot import hf_roformer, bit-exact."""
    jobs, expected = [], {}
    for auto_name in sorted(AUTO_HEADS):
        model = build(auto_name)
        checkpoint = tmp_path / auto_name
        model.save_pretrained(checkpoint)
        inputs = sample_inputs(auto_name)
        jobs.append(
            {
                "auto_name": auto_name,
                "checkpoint": str(checkpoint),
                "inputs": inputs,
                "output": str(checkpoint / "out.pt"),
            }
        )
        with torch.no_grad():
            expected[auto_name] = (type(model).__name__, first_output(model(**inputs)))
    torch.save(jobs, tmp_path / "jobs.pt")
    run_without_the_package(tmp_path, REMOTE_SCRIPT, tmp_path / "jobs.pt", timeout=600)
    for auto_name, (class_name, output) in expected.items():
        remote = torch.load(tmp_path / auto_name / "out.pt")
        assert remote["class"] == class_name, auto_name
        assert torch.equal(remote["output"], output), auto_name


# -- transformers' `roformer` checkpoints through the Auto classes: opt-in routing ---------------------------------

ROUTED_HEADS = {  # Auto class -> (transformers' class, hf_roformer's class)
    auto_name: (getattr(transformers, model_class.__name__.removeprefix("Hf")), model_class)
    for auto_name, model_class in AUTO_HEADS.items()
}
TRAINED_LENGTH = 64
ROUTING_TOLERANCE = 1e-6
CHAR_VOCAB = os.path.join(os.path.dirname(__file__), "fixtures", "char_vocab.txt")
with open(CHAR_VOCAB, encoding="utf-8") as _vocab:
    CHAR_VOCAB_SIZE = len(_vocab.read().splitlines())


@pytest.fixture
def routed():
    """`roformer` checkpoints routed to hf_roformer for one test, switched back however it ends."""
    hf_roformer.use_for_roformer_checkpoints()
    try:
        yield
    finally:
        hf_roformer.use_for_roformer_checkpoints(False)


def transformers_checkpoint(auto_name: str, directory) -> torch.nn.Module:
    """A seeded tiny transformers `RoFormer*` model of the head `auto_name` maps to, saved (with transformers'
    `RoFormerTokenizer`) as the Hub's RoFormer checkpoints are: model type `roformer`."""
    torch.manual_seed(0)
    config = transformers.RoFormerConfig(
        vocab_size=CHAR_VOCAB_SIZE, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=37,
        max_position_embeddings=TRAINED_LENGTH, num_labels=3, is_decoder=auto_name == "AutoModelForCausalLM",
    )
    model = ROUTED_HEADS[auto_name][0](config).eval()
    model.save_pretrained(directory)
    transformers.RoFormerTokenizer(CHAR_VOCAB).save_pretrained(directory)
    assert json.loads((directory / "config.json").read_text())["model_type"] == "roformer"
    return model


def test_without_the_call_auto_classes_keep_transformers_roformer(tmp_path):
    transformers_checkpoint("AutoModelForMaskedLM", tmp_path)
    assert not hf_roformer.routes_roformer_checkpoints()
    assert type(transformers.AutoConfig.from_pretrained(tmp_path)) is transformers.RoFormerConfig
    assert type(transformers.AutoModelForMaskedLM.from_pretrained(tmp_path)) is transformers.RoFormerForMaskedLM


@pytest.mark.parametrize("auto_name", sorted(AUTO_HEADS))
def test_routed_auto_classes_return_hf_roformer_with_transformers_outputs(auto_name, routed, tmp_path):
    reference = transformers_checkpoint(auto_name, tmp_path)
    assert hf_roformer.routes_roformer_checkpoints()
    config = transformers.AutoConfig.from_pretrained(tmp_path)
    assert type(config) is hf_roformer.HfRoFormerConfig and config.model_type == "hf_roformer"
    assert config.architectures == [ROUTED_HEADS[auto_name][1].__name__]  # translated from transformers' name
    model = getattr(transformers, auto_name).from_pretrained(tmp_path).eval()
    assert type(model) is ROUTED_HEADS[auto_name][1]
    if auto_name == "AutoModelForCausalLM":
        return  # some transformers 5.x releases run their RoFormer decoder bidirectionally: no reference (test_parity)
    inputs = {name: tensor.contiguous() for name, tensor in sample_inputs(auto_name).items()}  # transformers `view`s
    if auto_name == "AutoModelForMultipleChoice":  # transformers scores a padded choice from padding: unpadded only
        inputs = {name: tensor[..., :7].contiguous() for name, tensor in inputs.items()}
        assert inputs["attention_mask"].all()
    with torch.no_grad():
        torch.testing.assert_close(
            first_output(model(**inputs)), first_output(reference(**inputs)), atol=ROUTING_TOLERANCE, rtol=0
        )


def test_routed_masked_lm_runs_past_the_trained_length_with_rope_parameters(routed, tmp_path):
    reference = transformers_checkpoint("AutoModelForMaskedLM", tmp_path)
    rope_parameters = {"rope_type": "yarn", "factor": 3.0, "original_max_position_embeddings": TRAINED_LENGTH}
    model = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path, rope_parameters=rope_parameters).eval()
    assert type(model) is hf_roformer.HfRoFormerForMaskedLM
    assert model.config.rope_parameters == {**rope_parameters, "rope_theta": 10000.0}
    long_ids = torch.randint(1, 99, (1, 3 * TRAINED_LENGTH), generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        logits = model(long_ids).logits
        assert logits.shape == (1, 3 * TRAINED_LENGTH, CHAR_VOCAB_SIZE) and logits.isfinite().all()
        with pytest.raises(IndexError):  # what the same call gives without the routing
            reference(long_ids)
    model.save_pretrained(tmp_path / "saved")  # an ordinary hf_roformer checkpoint
    saved = json.loads((tmp_path / "saved" / "config.json").read_text())
    assert saved["model_type"] == "hf_roformer" and saved["auto_map"] == AUTO_MAP
    assert saved["architectures"] == ["HfRoFormerForMaskedLM"] and saved["rope_parameters"]["rope_type"] == "yarn"


def test_routing_switches_off_again(tmp_path):
    transformers_checkpoint("AutoModelForMaskedLM", tmp_path)
    hf_roformer.use_for_roformer_checkpoints()
    try:
        assert type(transformers.AutoModelForMaskedLM.from_pretrained(tmp_path)) is hf_roformer.HfRoFormerForMaskedLM
        assert type(transformers.AutoConfig.for_model("roformer", vocab_size=50)) is hf_roformer.HfRoFormerConfig
    finally:
        hf_roformer.use_for_roformer_checkpoints(False)
    assert not hf_roformer.routes_roformer_checkpoints()
    assert transformers.CONFIG_MAPPING["roformer"] is transformers.RoFormerConfig
    assert type(transformers.AutoModelForMaskedLM.from_pretrained(tmp_path)) is transformers.RoFormerForMaskedLM
    with pytest.raises(TypeError, match=r"^`enabled` must be True or False, got 'no'\.$"):
        hf_roformer.use_for_roformer_checkpoints("no")


def test_routed_fill_mask_pipeline_answers_as_transformers_roformer(tmp_path):
    transformers_checkpoint("AutoModelForMaskedLM", tmp_path)
    text = "今天[MASK]气很好"
    expected_pipeline = transformers.pipeline("fill-mask", model=str(tmp_path))
    assert type(expected_pipeline.model) is transformers.RoFormerForMaskedLM
    expected = expected_pipeline(text, top_k=5)
    hf_roformer.use_for_roformer_checkpoints()
    try:
        routed_pipeline = transformers.pipeline("fill-mask", model=str(tmp_path))
    finally:
        hf_roformer.use_for_roformer_checkpoints(False)
    assert type(routed_pipeline.model) is hf_roformer.HfRoFormerForMaskedLM
    # the checkpoint's own tokenizer, less its "indexing errors" warning
    assert type(expected_pipeline.tokenizer) is transformers.RoFormerTokenizer
    assert type(routed_pipeline.tokenizer).__mro__[1] is transformers.RoFormerTokenizer
    answers = routed_pipeline(text, top_k=5)
    assert [answer["token"] for answer in answers] == [answer["token"] for answer in expected]
    torch.testing.assert_close(
        torch.tensor([answer["score"] for answer in answers]),
        torch.tensor([answer["score"] for answer in expected]),
        atol=ROUTING_TOLERANCE,
        rtol=0,
    )


def test_routed_sequence_classification_head_and_pipeline(routed, tmp_path):
    reference = transformers_checkpoint("AutoModelForSequenceClassification", tmp_path)
    model = transformers.AutoModelForSequenceClassification.from_pretrained(tmp_path).eval()
    assert type(model) is hf_roformer.HfRoFormerForSequenceClassification and model.config.num_labels == 3
    classify = transformers.pipeline("text-classification", model=str(tmp_path), top_k=None)
    assert type(classify.model) is hf_roformer.HfRoFormerForSequenceClassification
    encoded = classify.tokenizer("今天天气很好", return_tensors="pt")
    with torch.no_grad():
        expected = reference(**encoded).logits[0].softmax(-1)
    (result,) = classify(["今天天气很好"])
    scores = {answer["label"]: answer["score"] for answer in result}
    actual = torch.tensor([scores[reference.config.id2label[index]] for index in range(3)])
    torch.testing.assert_close(actual, expected, atol=ROUTING_TOLERANCE, rtol=0)


def test_routed_tokenizer_has_no_indexing_errors_warning_and_the_same_ids(tmp_path):
    """A text past the trained length: transformers' `RoFormerTokenizer` warns of "indexing errors" (true for its
    position table); the tokenizer routed checkpoints get is silent (hf_roformer has none) and encodes alike; a
    tokenizer saved from it names transformers' class; switched off, transformers' own class is back."""
    transformers_checkpoint("AutoModelForMaskedLM", tmp_path)
    text = "今天天气很好，我们去公园散步" * 15
    log = transformers.utils.logging.get_logger("transformers.tokenization_utils_base")
    encoded, warnings, classes = [], [], []
    try:
        for routed in (False, True, False):
            hf_roformer.use_for_roformer_checkpoints(routed)
            tokenizer = transformers.AutoTokenizer.from_pretrained(tmp_path, model_max_length=TRAINED_LENGTH)
            with CaptureLogger(log) as captured:
                encoded.append(tokenizer(text)["input_ids"])
            warnings.append(captured.out)
            classes.append(type(tokenizer))
            if routed:
                tokenizer.save_pretrained(tmp_path / "saved")
    finally:
        hf_roformer.use_for_roformer_checkpoints(False)
    length = len(encoded[0])
    assert length > TRAINED_LENGTH and encoded[1] == encoded[0] == encoded[2]
    indexing = (
        f"Token indices sequence length is longer than the specified maximum sequence length for this model ({length} "
        f"> {TRAINED_LENGTH}). Running this sequence through the model will result in indexing errors\n"
    )
    assert warnings == [indexing, "", indexing]
    assert classes[0] is classes[2] is transformers.RoFormerTokenizer and classes[1] is not classes[0]
    assert json.loads((tmp_path / "saved" / "tokenizer_config.json").read_text())["tokenizer_class"] == (
        "RoFormerTokenizer"
    )
