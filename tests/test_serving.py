"""Serving through vLLM's Transformers backend, emulated on CPU (vLLM needs a GPU and is not installed here).

What the emulation does is what vLLM 0.33's backend does (vllm/model_executor/models/transformers/): it sets the
config's attention implementation to "vllm", a function registered in transformers' `AttentionInterface`; builds the
base model with `AutoModel.from_config`; finds the attention modules by their one attention-interface call and their
`layer_idx`; maps the checkpoint's weight names onto its module tree, dropping some; and calls the base model with
every request flattened into one row `(1, T)`, positions restarting at 0 for each request, no attention mask and
`use_cache=False`. The attention function here reads the request boundaries from an extra keyword argument (vLLM
reads them from its forward context), which proves such arguments reach every attention call. Pooling models pool
the last hidden state themselves (CLS or mean) and run the classifier of `AutoModelForSequenceClassification` on it;
causal LMs project with their own `lm_head`, tied to the input embeddings.
"""

import ast
import inspect
import json
import re
import textwrap
from itertools import chain
from pathlib import Path

import pytest
import safetensors.torch
import torch
import transformers
from conftest import tiny_config
from transformers import AttentionInterface, AutoConfig, AutoModel, AutoModelForSequenceClassification
from vllm_models import saved_off_initial_values

import hf_roformer
from hf_roformer.integrations.serving import save_with_dense_pooler
from hf_roformer.remote_code.saving_hf_roformer import AUTO_MAP


pytestmark = pytest.mark.releases("remote_code.modeling_hf_roformer")  # see setup.cfg


VLLM_ATTENTION = "vllm"
REQUESTS = [[2, 17, 33, 41, 8], [5, 6, 7], [90, 12, 13, 14, 15, 16, 3]]
# vLLM 0.33, transformers/legacy.py: output layers of encoder checkpoints that pooling models do not load.
DROPPED_PREFIXES = ("model.lm_head.", "model.predictions.", "model.qa_outputs.", "model.embeddings_project.")
DROPPED_PREFIXES += ("model.discriminator_predictions.",)
DROPPED_SUBSTRINGS = ("position_ids", "score.bias")
# vLLM 0.33, transformers_utils/config.py: the sentence-transformers module types it reads.
POOLING_TYPES = {
    "sentence_transformers.models.Pooling",
    "sentence_transformers.sentence_transformer.modules.pooling.Pooling",
}
DENSE_TYPES = {"sentence_transformers.models.Dense", "sentence_transformers.base.modules.dense.Dense"}
CHAR_VOCAB = Path(__file__).parent / "fixtures" / "char_vocab.txt"


def vllm_attention(module, query, key, value, attention_mask, **kwargs):
    """vLLM's attention as a transformers attention function: one row of all requests `(1, heads, T, d)`, no mask; it
    attends within each request (causally where the module says so) with the module's own `scaling`, and returns
    `(T, heads * d)` as vLLM's does."""
    assert attention_mask is None and query.shape[0] == 1
    boundaries = kwargs["request_boundaries"].tolist()
    pieces = []
    for start, end in zip(boundaries[:-1], boundaries[1:], strict=True):
        piece = [tensor[:, :, start:end] for tensor in (query, key, value)]
        pieces.append(
            torch.nn.functional.scaled_dot_product_attention(*piece, is_causal=module.is_causal, scale=module.scaling)
        )
    return torch.cat(pieces, dim=2).transpose(1, 2).reshape(query.shape[2], -1), None


AttentionInterface.register(VLLM_ATTENTION, vllm_attention)


def interface_calls(module_class) -> list[ast.Call]:
    """The attention-interface calls in a module class's `forward` source, found as vLLM's `AttentionFuser` finds
    them: calls of a name assigned from `ALL_ATTENTION_FUNCTIONS.get_interface(...)` (or `[...]`)."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(inspect.unwrap(module_class.forward))))
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            lookup = node.value.func if isinstance(node.value, ast.Call) else node.value
            if isinstance(lookup, (ast.Attribute, ast.Subscript)) and getattr(lookup.value, "id", None) == (
                "ALL_ATTENTION_FUNCTIONS"
            ):
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                names |= {target.id for target in targets if isinstance(target, ast.Name)}
    return [node for node in ast.walk(tree) if isinstance(node, ast.Call) and getattr(node.func, "id", None) in names]


def served_attention_modules(model: torch.nn.Module) -> dict[int, torch.nn.Module]:
    """The attention module vLLM serves for each layer: the module whose forward makes one attention-interface call
    with `scaling=self.<attribute>`, keyed by its `layer_idx` (vLLM refuses a layer with none or with two)."""
    served = {}
    for module in model.modules():
        calls = interface_calls(type(module)) if hasattr(type(module), "forward") else []
        if len(calls) != 1:
            continue
        (scaling,) = [keyword.value for keyword in calls[0].keywords if keyword.arg == "scaling"]
        assert isinstance(scaling, ast.Attribute) and scaling.value.id == "self"
        assert isinstance(getattr(module, scaling.attr), float)
        assert isinstance(module.layer_idx, int) and module.layer_idx not in served
        served[module.layer_idx] = module
    return served


def build_like_vllm(directory) -> torch.nn.Module:
    """The base model as vLLM builds it: config with the "vllm" attention implementation, `AutoModel.from_config`."""
    config = AutoConfig.from_pretrained(directory, trust_remote_code=True)
    config._attn_implementation = VLLM_ATTENTION
    model = AutoModel.from_config(config, trust_remote_code=True).eval()
    served = served_attention_modules(model)
    assert sorted(served) == list(range(config.num_hidden_layers))
    return model


def vllm_weight_name(name: str, model: torch.nn.Module, pooling: bool) -> str | None:
    """Where vLLM puts a saved weight in its module tree (`model.` is the base model), None where it drops it:
    `Base._create_hf_to_vllm_mapper`, plus `LegacyMixin`'s drops for pooling models."""
    children = "|".join(
        child
        for child, _ in chain(
            model.named_children(), model.named_parameters(recurse=False), model.named_buffers(recurse=False)
        )
    )
    rules = {re.compile(pattern): None for pattern in model._keys_to_ignore_on_load_unexpected or []}
    rules[re.compile(rf"^{model.base_model_prefix}\.(.+)")] = r"model.\1"
    rules[re.compile(rf"^(?!model\.)(({children}).*)")] = r"model.\1"
    rules[re.compile(rf"^(model\.)((?!{children}).+)")] = r"\2"
    rules[re.compile(r"^model\.(.+\.)*(lm_head.+)")] = r"\2"
    for pattern, replacement in rules.items():
        if pattern.search(name):
            if replacement is None:
                return None
            name = pattern.sub(replacement, name)
    if pooling and (name.startswith(DROPPED_PREFIXES) or any(part in name for part in DROPPED_SUBSTRINGS)):
        return None
    return name


def load_like_vllm(directory, modules: dict[str, torch.nn.Module], pooling: bool) -> None:
    """Load a saved checkpoint into vLLM's module tree (`{"model": base model, "classifier": ...}`), raising vLLM's
    errors: a weight under a module the tree lacks, or a parameter the checkpoint does not fill."""
    saved = safetensors.torch.load_file(directory / "model.safetensors")
    parameters = {f"{prefix}.{name}": p for prefix, module in modules.items() for name, p in module.named_parameters()}
    loaded = set()
    for name, tensor in saved.items():
        target = vllm_weight_name(name, modules["model"], pooling)
        if target is None:
            continue
        if target.split(".", 1)[0] not in modules:
            raise ValueError(f"There is no module or parameter named {target.split('.', 1)[0]!r}")
        with torch.no_grad():
            parameters[target].copy_(tensor)
        loaded.add(target)
    if missing := set(parameters) - loaded:
        raise ValueError(f"Following weights were not initialized from checkpoint: {sorted(missing)}")


def flattened_requests() -> dict:
    """Every request in one row, positions restarting at 0 per request, as vLLM calls the model."""
    lengths = torch.tensor([len(request) for request in REQUESTS])
    return {
        "input_ids": torch.tensor([list(chain(*REQUESTS))]),
        "position_ids": torch.cat([torch.arange(length) for length in lengths.tolist()])[None],
        "request_boundaries": torch.nn.functional.pad(lengths.cumsum(0), (1, 0)),
    }


def serve(model: torch.nn.Module) -> list[torch.Tensor]:
    """vLLM's call of the base model; the last hidden state of each request."""
    inputs = flattened_requests()
    with torch.no_grad():
        hidden = model(**inputs, use_cache=False, return_dict=False)[0][0]
    boundaries = inputs["request_boundaries"].tolist()
    return [hidden[start:end] for start, end in zip(boundaries[:-1], boundaries[1:], strict=True)]


@pytest.mark.parametrize(
    "overrides",
    [{}, {"rotary_value": True}, {"norm_type": "rms_norm", "use_bias": False}, {"pooler_activation": "linear"}],
    ids=["RoFormer", "rotary values", "RoFormer-V2", "RoFormer-Sim pooler"],
)
def test_base_model_served_like_vllm_equals_each_request_alone(overrides, tmp_path):
    model = saved_off_initial_values(hf_roformer.HfRoFormerModel(tiny_config(**overrides)), tmp_path)
    served_model = build_like_vllm(tmp_path)
    assert all(not module.is_causal for module in served_attention_modules(served_model).values())  # an encoder
    load_like_vllm(tmp_path, {"model": served_model}, pooling=True)
    for request, hidden in zip(REQUESTS, serve(served_model), strict=True):
        with torch.no_grad():
            alone = model(input_ids=torch.tensor([request]))
        torch.testing.assert_close(hidden, alone.last_hidden_state[0], atol=1e-5, rtol=0)
        if overrides.get("pooler_activation"):  # vLLM pools the CLS state itself: the model's pooler does not run
            assert (hidden[0] - alone.pooler_output[0]).abs().max() > 1e-2


@pytest.mark.parametrize("classifier_pooling", ["cls", "mean"])
def test_sequence_classification_served_like_vllm_equals_each_request_alone(classifier_pooling, tmp_path):
    config = tiny_config(num_labels=3, classifier_pooling=classifier_pooling)
    model = saved_off_initial_values(hf_roformer.HfRoFormerForSequenceClassification(config), tmp_path)
    served_model = build_like_vllm(tmp_path)
    # vLLM takes the classifier of the sequence-classification model and feeds it one pooled vector per request,
    # given a length-1 sequence dimension (its `ClassifierWithReshape`).
    head = AutoModelForSequenceClassification.from_config(served_model.config, trust_remote_code=True)
    classifier = head.classifier.eval()
    load_like_vllm(tmp_path, {"model": served_model, "classifier": classifier}, pooling=True)
    for request, hidden in zip(REQUESTS, serve(served_model), strict=True):
        pooled = hidden[0] if classifier_pooling == "cls" else hidden.mean(dim=0)  # vLLM's CLS or MEAN pooling
        with torch.no_grad():
            logits = classifier(pooled[None, None])
            alone = model(input_ids=torch.tensor([request])).logits
        torch.testing.assert_close(logits, alone, atol=1e-5, rtol=0)


def test_causal_lm_prefill_served_like_vllm_equals_each_request_alone(tmp_path):
    """The bare tied vocabulary projection (RoFormer-V2's head, `lm_head_transform=False`) is vLLM's `lm_head`."""
    config = tiny_config(is_decoder=True, norm_type="rms_norm", use_bias=False, lm_head_transform=False)
    model = saved_off_initial_values(hf_roformer.HfRoFormerForCausalLM(config), tmp_path)
    served_model = build_like_vllm(tmp_path)
    assert all(module.is_causal for module in served_attention_modules(served_model).values())  # a decoder
    load_like_vllm(tmp_path, {"model": served_model}, pooling=False)
    lm_head = served_model.get_input_embeddings().weight  # tied, as `tie_word_embeddings` asks
    for request, hidden in zip(REQUESTS, serve(served_model), strict=True):
        with torch.no_grad():
            alone = model(input_ids=torch.tensor([request]), use_cache=False).logits[0]
        torch.testing.assert_close(hidden @ lm_head.T, alone, atol=1e-5, rtol=0)


@pytest.mark.parametrize(
    ("model_class", "overrides", "pooling", "error"),
    [
        (
            hf_roformer.HfRoFormerModel,
            {"embedding_size": 16},
            True,
            r"not initialized from checkpoint: \['model\.embeddings_project\.bias', 'model\.embeddings_project\.weight",
        ),
        (hf_roformer.HfRoFormerForCausalLM, {"is_decoder": True}, False, "no module or parameter named 'cls'"),
    ],
    ids=["embedding_size != hidden_size", "causal LM with the RoFormer head"],
)
def test_weights_vllm_cannot_place_stop_it_loudly(model_class, overrides, pooling, error, tmp_path):
    """What docs/serving.md lists as not served: vLLM drops `embeddings_project` (then refuses the unfilled
    parameters) and has no place for the RoFormer vocabulary head's transform and bias (`cls.predictions.*`)."""
    saved_off_initial_values(model_class(tiny_config(**overrides)), tmp_path)
    with pytest.raises(ValueError, match=error):
        load_like_vllm(tmp_path, {"model": build_like_vllm(tmp_path)}, pooling=pooling)


@pytest.mark.parametrize("pooler_activation", ["linear", "tanh"])
def test_a_pooler_runs_in_vllm_as_the_dense_layer_after_cls_pooling(pooler_activation, tmp_path):
    """docs/serving.md's route for RoFormer-Sim: `save_with_dense_pooler` writes CLS pooling and a Dense layer holding
    the pooler; vLLM's embedding pooler (CLS, then the Dense layers of `modules.json`, read as its
    `_load_st_projector` reads them) returns the model's `pooler_output`, and sentence-transformers the same."""
    from sentence_transformers import SentenceTransformer

    tokenizer = hf_roformer.HfRoFormerTokenizer(str(CHAR_VOCAB))
    config = tiny_config(vocab_size=len(tokenizer), pooler_activation=pooler_activation, is_decoder=True, unilm=True)
    # as a converted RoFormer-Sim is
    model = saved_off_initial_values(hf_roformer.HfRoFormerForCausalLM(config), tmp_path / "sim")
    tokenizer.save_pretrained(tmp_path / "sim")
    served_directory = save_with_dense_pooler(tmp_path / "sim", tmp_path / "served")
    assert json.loads((served_directory / "config.json").read_text())["architectures"] == ["HfRoFormerModel"]
    modules = json.loads((served_directory / "modules.json").read_text())
    pooling, dense = [module for module in modules if module["type"] in POOLING_TYPES | DENSE_TYPES]
    assert json.loads((served_directory / pooling["path"] / "config.json").read_text())["pooling_mode"] == "cls"
    dense_config = json.loads((served_directory / dense["path"] / "config.json").read_text())
    projector = torch.nn.Linear(dense_config["in_features"], dense_config["out_features"], dense_config["bias"])
    projector.load_state_dict(
        {name.removeprefix("linear."): tensor for name, tensor in
         safetensors.torch.load_file(served_directory / dense["path"] / "model.safetensors").items()}
    )  # fmt: skip
    activation = {"linear": "Identity", "tanh": "Tanh"}[pooler_activation]
    assert dense_config["activation_function"].rsplit(".", 1)[-1] == activation
    served_model = build_like_vllm(served_directory)
    load_like_vllm(served_directory, {"model": served_model}, pooling=True)
    encoder = SentenceTransformer(str(served_directory))
    for request, hidden in zip(REQUESTS, serve(served_model), strict=True):
        with torch.no_grad():
            vector = getattr(torch.nn, activation)()(projector(hidden[0]))
            expected = model.roformer(input_ids=torch.tensor([request])).pooler_output[0]
        torch.testing.assert_close(vector, expected, atol=1e-5, rtol=0)
    features = encoder.tokenize(["今天天气很好", "明天天气不好。"])  # sentence-transformers on text
    with torch.no_grad():
        vectors = encoder(features)["sentence_embedding"]
        expected = model.roformer(**features).pooler_output
    torch.testing.assert_close(vectors, expected, atol=1e-5, rtol=0)


def test_a_model_without_pooler_is_served_as_it_is(tmp_path):
    tokenizer = hf_roformer.HfRoFormerTokenizer(str(CHAR_VOCAB))
    saved_off_initial_values(hf_roformer.HfRoFormerModel(tiny_config(vocab_size=len(tokenizer))), tmp_path / "encoder")
    tokenizer.save_pretrained(tmp_path / "encoder")
    message = (
        f"The model in {tmp_path / 'encoder'} has no pooler (`pooler_activation` is None); vLLM's CLS or mean "
        "pooling already gives its sentence vector: serve the directory as it is."
    )
    with pytest.raises(ValueError, match=re.escape(message)):
        save_with_dense_pooler(tmp_path / "encoder", tmp_path / "served")


def fine_tune_and_save(model, directory) -> None:
    """One Trainer step on a tiny batch, then the Trainer's own saving (a checkpoint and the final model)."""
    tokens = [2, 3, 4, 5]
    labels = 1 if isinstance(model, hf_roformer.HfRoFormerForSequenceClassification) else tokens
    arguments = transformers.TrainingArguments(
        output_dir=str(directory), max_steps=1, save_steps=1, per_device_train_batch_size=2, report_to=[], use_cpu=True
    )
    trainer = transformers.Trainer(
        model=model, args=arguments, train_dataset=[{"input_ids": tokens, "labels": labels}] * 2
    )
    trainer.train()
    trainer.save_model()


@pytest.mark.parametrize("model_class", sorted(hf_roformer.AUTO_MODEL_CLASSES.values(), key=lambda c: c.__name__))
def test_every_saved_config_names_its_own_architecture_and_every_auto_class(model_class, tmp_path):
    """vLLM picks the implementation by `architectures` (`getattr(transformers, name)` first, then `auto_map`): the
    names must not exist in transformers, and `auto_map` must list every Auto class, after `save_pretrained` and
    after fine-tuning with the Trainer."""
    config = tiny_config(is_decoder=model_class is hf_roformer.HfRoFormerForCausalLM, num_labels=3)
    model = model_class(config)
    model.save_pretrained(tmp_path / "saved")
    written = [tmp_path / "saved" / "config.json"]
    if model_class in (hf_roformer.HfRoFormerForSequenceClassification, hf_roformer.HfRoFormerForMaskedLM):
        fine_tune_and_save(model, tmp_path / "trained")
        written += [tmp_path / "trained" / "config.json", tmp_path / "trained" / "checkpoint-1" / "config.json"]
    for path in written:
        saved_config = json.loads(path.read_text())
        assert saved_config["architectures"] == [model_class.__name__], path
        assert not hasattr(transformers, model_class.__name__)
        assert saved_config["auto_map"] == AUTO_MAP, path


def test_segment_ids_of_the_one_served_row_come_without_a_batch_dimension(tmp_path):
    """vLLM's `/score` passes each pair's segment ids for its `(1, T)` row as one `(T,)` tensor (int32): the served
    pairs equal each pair run alone with its segment ids; a batch of several rows still needs `(batch, T)`."""
    config = tiny_config(num_labels=1)
    model = saved_off_initial_values(hf_roformer.HfRoFormerForSequenceClassification(config), tmp_path)
    served_model = build_like_vllm(tmp_path)
    head = AutoModelForSequenceClassification.from_config(served_model.config, trust_remote_code=True)
    classifier = head.classifier.eval()
    load_like_vllm(tmp_path, {"model": served_model, "classifier": classifier}, pooling=True)
    segments = [(torch.arange(len(request)) >= len(request) // 2).long() for request in REQUESTS]  # second half: 1
    inputs = flattened_requests()
    with torch.no_grad():
        hidden = served_model(**inputs, token_type_ids=torch.cat(segments).int(), use_cache=False).last_hidden_state[0]
    boundaries = inputs["request_boundaries"].tolist()
    for request, segment, start in zip(REQUESTS, segments, boundaries, strict=False):
        with torch.no_grad():
            logits = classifier(hidden[start][None, None])
            alone = model(input_ids=torch.tensor([request]), token_type_ids=segment[None]).logits
            without_segments = model(input_ids=torch.tensor([request])).logits
        torch.testing.assert_close(logits, alone, atol=1e-5, rtol=0)
        assert (alone - without_segments).abs().max() > 1e-4
    with pytest.raises(ValueError, match=r"`token_type_ids` must have 2 dimensions, got shape \(5,\)"):
        model(input_ids=torch.tensor([REQUESTS[0]] * 2), token_type_ids=torch.zeros(5, dtype=torch.long))


def test_the_vllm_plugin_registers_a_native_model_for_each_architecture_it_names():
    """setup.cfg declares the plugin vLLM loads; each architecture it registers is one hf_roformer saves, served by a
    class of the native model module (read without importing it: vLLM is not installed here)."""
    import configparser

    from hf_roformer.integrations.vllm_plugin import NATIVE_MODELS

    root = Path(__file__).resolve().parents[1]
    setup = configparser.ConfigParser()
    setup.read(root / "setup.cfg")
    assert setup["options.entry_points"]["vllm.general_plugins"].split() == [
        "hf_roformer",
        "=",
        "hf_roformer.integrations.vllm_plugin:register",
    ]
    module = ast.parse((root / "hf_roformer" / "integrations" / "vllm_model.py").read_text(encoding="utf-8"))
    classes = {node.name for node in module.body if isinstance(node, ast.ClassDef)}
    assert {"HfRoFormerModel", "HfRoFormerForSequenceClassification", "HfRoFormerForCausalLM"} <= set(NATIVE_MODELS)
    for architecture, target in NATIVE_MODELS.items():
        assert hasattr(hf_roformer, architecture), architecture
        path, name = target.split(":")
        assert path == "hf_roformer.integrations.vllm_model" and name in classes, target
