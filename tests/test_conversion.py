"""Conversion of the original checkpoints: equal to the original implementation (bert4keras golden outputs), a strict
TF-free reader (fuzzed), strict name tables, atomic writes, transformers-format sources, hub upload, model cards."""

import json
import shutil
import struct
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers

import hf_roformer
from hf_roformer.cli import main
from hf_roformer.conversion.convert import ConversionError, convert_tf_checkpoint, convert_transformers_roformer
from hf_roformer.conversion.families import RELEASED
from hf_roformer.conversion.hub import push_folder
from hf_roformer.conversion.model_card import render_card
from hf_roformer.conversion.tf_checkpoint import TABLE_MAGIC, CheckpointError, TFCheckpoint


FIXTURES = Path(__file__).resolve().parent / "fixtures" / "original_checkpoints"
FAMILIES = ["v1", "gpt", "sim", "v2"]
REPOSITORY = Path(__file__).resolve().parents[1]


def golden(family: str) -> dict[str, np.ndarray]:
    with np.load(FIXTURES / family / "golden.npz") as data:
        return {key: data[key] for key in data.files}


def convert(family: str, tmp_path: Path, source: Path | None = None, **kwargs) -> Path:
    output = tmp_path / f"converted-{family}"
    convert_tf_checkpoint(source or FIXTURES / family, output, layer_norm_eps=1e-7, **kwargs)
    return output


# -- a minimal TF bundle writer, to make checkpoints the converter must refuse ----------------------------------------


def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        out.append(byte | (0x80 if value else 0))
        if not value:
            return bytes(out)


def _field(number: int, wire_type: int, payload: bytes | int) -> bytes:
    tag = _varint(number << 3 | wire_type)
    if wire_type == 0:
        return tag + _varint(payload)
    return tag + _varint(len(payload)) + payload


def _block(entries: list[tuple[bytes, bytes]]) -> bytes:
    body = b"".join(_varint(0) + _varint(len(k)) + _varint(len(v)) + k + v for k, v in entries)
    return body + struct.pack("<II", 0, 1)


def write_tf_checkpoint(
    prefix: Path, tensors: dict[str, np.ndarray], compression: int = 0, dtype_enum: int = 1
) -> None:
    """Write float32 tensors as a TF1 bundle: one data shard, one sorted data block, an index block, the footer.
    `compression` and `dtype_enum` let a test declare what the reader must refuse."""
    data, entries = bytearray(), [(b"", _field(1, 0, 1))]
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name], dtype="<f4")
        shape = b"".join(_field(2, 2, _field(1, 0, size)) for size in array.shape)
        entry = _field(1, 0, dtype_enum) + _field(2, 2, shape) + _field(4, 0, len(data)) + _field(5, 0, array.nbytes)
        entries.append((name.encode(), entry))
        data += array.tobytes()
    data_block = _block(entries)
    index_offset = len(data_block) + 5
    handle = _varint(0) + _varint(len(data_block))
    index_block = _block([(entries[-1][0] + b"\xff", handle)])
    meta_offset = index_offset + len(index_block) + 5
    meta_block = _block([])
    footer = _varint(meta_offset) + _varint(len(meta_block)) + _varint(index_offset) + _varint(len(index_block))
    footer = footer.ljust(40, b"\0") + struct.pack("<Q", TABLE_MAGIC)
    trailer = b"\0" * 5
    Path(str(prefix) + ".index").write_bytes(
        data_block + bytes([compression]) + trailer[1:] + index_block + trailer + meta_block + trailer + footer
    )
    Path(str(prefix) + ".data-00000-of-00001").write_bytes(bytes(data))


def fixture_copy(family: str, directory: Path, change=None) -> Path:
    """A copy of a fixture directory whose checkpoint is rewritten after `change(tensors)`."""
    shutil.copytree(FIXTURES / family, directory)
    tensors = {name: value.numpy() for name, value in TFCheckpoint(directory / "bert_model.ckpt").read_all().items()}
    if change is not None:
        change(tensors)
        for path in directory.glob("bert_model.ckpt.*"):
            path.unlink()
        write_tf_checkpoint(directory / "bert_model.ckpt", tensors)
    return directory


# -- equality with the original --------------------------------------------------------------------------------------


@pytest.mark.parametrize("family", FAMILIES)
def test_reader_equals_tensorflow(family):
    expected = {k.removeprefix("variable/"): v for k, v in golden(family).items() if k.startswith("variable/")}
    checkpoint = TFCheckpoint(FIXTURES / family / "bert_model.ckpt")
    assert checkpoint.names() == sorted(expected)
    for name, value in expected.items():
        assert checkpoint.shape(name) == value.shape
        assert np.array_equal(checkpoint.read(name).numpy(), value), name


@pytest.mark.parametrize("family", FAMILIES)
def test_converted_model_equals_bert4keras(family, tmp_path):
    output = convert(family, tmp_path)
    data = golden(family)
    input_ids = torch.tensor(data["token_ids"])
    inputs = dict(input_ids=input_ids, token_type_ids=torch.tensor(data["segment_ids"]), attention_mask=input_ids != 0)
    real = inputs["attention_mask"]
    head_class = transformers.AutoModelForCausalLM if family in ("gpt", "sim") else transformers.AutoModelForMaskedLM
    model = head_class.from_pretrained(output).eval()
    base = transformers.AutoModel.from_pretrained(output).eval()
    with torch.no_grad():
        logits = model(**inputs, use_cache=False).logits
        outputs = base(**inputs)
    hidden = torch.tensor(data["output/hidden"])
    torch.testing.assert_close(outputs.last_hidden_state[real], hidden[real], atol=1e-4, rtol=0)
    probabilities = torch.tensor(data["output/mlm_probabilities"])
    torch.testing.assert_close(logits.softmax(-1)[real], probabilities[real], atol=1e-4, rtol=0)
    if "output/pooler" in data:
        torch.testing.assert_close(outputs.pooler_output, torch.tensor(data["output/pooler"]), atol=1e-4, rtol=0)
    else:
        assert outputs.pooler_output is None
    report = json.loads((output / "conversion_report.json").read_text())
    assert report["family"] == family and report["weights_max_abs_diff"] == 0.0 and report["reload_max_abs_diff"] == 0.0


def test_family_layouts(tmp_path):
    v2 = hf_roformer.HfRoFormerForMaskedLM.from_pretrained(convert("v2", tmp_path))
    assert v2.config.norm_type == "rms_norm" and not v2.config.use_bias and v2.config.hidden_act == "relu"
    assert sum(1 for _ in v2.named_parameters()) == 14  # 2 embeddings + 6 kernels per layer; the head is tied
    assert v2.cls.predictions.decoder.weight.data_ptr() == v2.roformer.embeddings.word_embeddings.weight.data_ptr()
    sim = hf_roformer.HfRoFormerForCausalLM.from_pretrained(convert("sim", tmp_path))
    assert sim.config.unilm and sim.config.is_decoder and sim.config.pooler_activation == "linear"
    assert transformers.GenerationConfig.from_pretrained(tmp_path / "converted-sim").eos_token_id == 3
    v1 = hf_roformer.HfRoFormerConfig.from_pretrained(convert("v1", tmp_path))
    assert v1.pooler_activation == "tanh" and not v1.is_decoder


def test_sim_generation_with_cache_equals_recomputation(tmp_path):
    """RoFormer-Sim generates the target segment after the source under the UniLM mask; the cache is exact."""
    model = hf_roformer.HfRoFormerForCausalLM.from_pretrained(convert("sim", tmp_path)).eval()
    prompt = torch.tensor([[2, 11, 12, 13, 14, 3]])
    output = model.generate(
        prompt, max_new_tokens=6, min_new_tokens=6, do_sample=False, return_dict_in_generate=True, output_logits=True
    )
    sequence = output.sequences
    with torch.no_grad():
        for step, logits in enumerate(output.logits):
            length = prompt.shape[1] + step
            token_types = torch.zeros(1, length, dtype=torch.long)
            token_types[:, prompt.shape[1] :] = 1
            full = model(sequence[:, :length], token_type_ids=token_types, use_cache=False).logits[:, -1]
            torch.testing.assert_close(logits, full, atol=1e-5, rtol=0)


# -- strict reader -----------------------------------------------------------------------------------------------------


def test_reader_errors_name_the_file(tmp_path):
    source = FIXTURES / "v1"
    index = (source / "bert_model.ckpt.index").read_bytes()
    cases = {
        "truncated": index[:20],
        "magic": index[:-8] + b"\0" * 8,
        "offsets": index[:-48] + _varint(10**9) + _varint(10) + index[-48 + 2 :],
    }
    for name, content in cases.items():
        directory = tmp_path / name
        shutil.copytree(source, directory)
        (directory / "bert_model.ckpt.index").write_bytes(content)
        with pytest.raises(CheckpointError, match=str(directory / "bert_model.ckpt.index")):
            TFCheckpoint(directory / "bert_model.ckpt").read_all()
    directory = tmp_path / "short-data"
    shutil.copytree(source, directory)
    data = directory / "bert_model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:1000])
    with pytest.raises(CheckpointError, match=rf"{data}: truncated"):
        TFCheckpoint(directory / "bert_model.ckpt").read_all()
    with pytest.raises(CheckpointError, match="nope.ckpt.index"):
        TFCheckpoint(tmp_path / "nope.ckpt")


def test_reader_refuses_compressed_blocks_and_unknown_dtypes(tmp_path):
    prefix = tmp_path / "model.ckpt"
    write_tf_checkpoint(prefix, {"a": np.ones((2, 3), np.float32)})
    assert TFCheckpoint(prefix).read("a").shape == (2, 3)  # the writer makes valid checkpoints
    write_tf_checkpoint(prefix, {"a": np.ones((2, 3), np.float32)}, compression=1)
    with pytest.raises(CheckpointError, match=r"model.ckpt.index: compressed blocks \(type 1\)"):
        TFCheckpoint(prefix)
    write_tf_checkpoint(prefix, {"a": np.ones(2, np.float32)}, dtype_enum=7)
    with pytest.raises(CheckpointError, match=r"model.ckpt.index: tensor 'a' has an unsupported dtype"):
        TFCheckpoint(prefix)


def test_fuzzed_checkpoints_only_raise_checkpoint_errors(tmp_path):
    """Over 1,000 truncated or mutated index/data files: each either reads or raises CheckpointError."""
    rng = np.random.default_rng(0)
    originals = {
        family: (
            (FIXTURES / family / "bert_model.ckpt.index").read_bytes(),
            (FIXTURES / family / "bert_model.ckpt.data-00000-of-00001").read_bytes(),
        )
        for family in FAMILIES
    }
    prefix = tmp_path / "fuzz.ckpt"
    outcomes = {"read": 0, "refused": 0}
    for trial in range(1200):
        index, data = originals[FAMILIES[trial % 4]]
        index, data = bytearray(index), bytearray(data)
        target = index if rng.random() < 0.8 else data
        kind = rng.integers(4)
        if kind == 0 and len(target) > 1:
            del target[int(rng.integers(len(target))) :]
        elif kind == 1:
            for _ in range(int(rng.integers(1, 8))):
                target[int(rng.integers(len(target)))] = int(rng.integers(256))
        elif kind == 2:
            position = int(rng.integers(len(target)))
            target[position:position] = rng.integers(0, 256, int(rng.integers(1, 16))).astype(np.uint8).tobytes()
        else:
            start = int(rng.integers(len(target)))
            target[start : start + 8] = b"\xff" * 8
        Path(str(prefix) + ".index").write_bytes(bytes(index))
        Path(str(prefix) + ".data-00000-of-00001").write_bytes(bytes(data))
        try:
            TFCheckpoint(prefix).read_all()
            outcomes["read"] += 1
        except CheckpointError as error:
            assert "fuzz.ckpt" in str(error)
            outcomes["refused"] += 1
    assert outcomes["refused"] > 600 and sum(outcomes.values()) == 1200


# -- strict conversion -------------------------------------------------------------------------------------------------


def test_extra_missing_and_misshaped_variables_are_named(tmp_path):
    def add(tensors):
        tensors["bert/encoder/layer_0/attention/self/extra/kernel"] = np.zeros((2, 2), np.float32)

    def remove(tensors):
        del tensors["bert/encoder/layer_1/output/dense/bias"]

    def reshape(tensors):
        tensors["bert/pooler/dense/kernel"] = np.zeros((32, 16), np.float32)

    cases = [
        (add, r"unexpected: \['bert/encoder/layer_0/attention/self/extra/kernel'\]"),
        (remove, r"missing: \['bert/encoder/layer_1/output/dense/bias'\]"),
        (reshape, r"bert/pooler/dense/kernel has shape \(16, 32\), roformer.pooler.dense.weight needs \(32, 32\)"),
    ]
    for index, (change, message) in enumerate(cases):
        source = fixture_copy("v1", tmp_path / f"source-{index}", change)
        with pytest.raises(ConversionError, match=message):
            convert("v1", tmp_path, source=source)
        assert not (tmp_path / "converted-v1").exists()
        assert not list(tmp_path.glob(".converted-v1*"))  # no staging directory left behind


def test_training_state_is_skipped_and_reported(tmp_path):
    def add(tensors):
        tensors["global_step"] = np.zeros((), np.float32)
        tensors["bert/encoder/layer_0/output/dense/kernel/adam_m"] = np.zeros((48, 32), np.float32)

    output = convert("v1", tmp_path, source=fixture_copy("v1", tmp_path / "v1", add))
    report = json.loads((output / "conversion_report.json").read_text())
    assert report["skipped_training_state"] == ["bert/encoder/layer_0/output/dense/kernel/adam_m", "global_step"]


def test_output_is_replaced_only_with_force(tmp_path):
    output = convert("v2", tmp_path)
    marker = output / "marker.txt"
    marker.write_text("keep me")
    with pytest.raises(FileExistsError, match="--force"):
        convert("v2", tmp_path)
    assert marker.read_text() == "keep me"
    with pytest.raises(SystemExit, match="exists; pass --force"):
        main(["convert", str(FIXTURES / "v2"), str(output)])
    broken = fixture_copy("v2", tmp_path / "broken", lambda tensors: tensors.pop("bert/embeddings/word_embeddings"))
    with pytest.raises(ConversionError):
        convert("v2", tmp_path, source=broken, force=True)
    assert marker.read_text() == "keep me"  # a failed forced conversion leaves the old output as it was
    convert("v2", tmp_path, force=True)
    assert not marker.exists() and (output / "model.safetensors").exists()
    assert sorted(path.name for path in tmp_path.iterdir() if path.name.startswith(".")) == []


def test_family_detection(tmp_path):
    renamed = tmp_path / "chinese_roformer-char_L-2_H-32_A-4"
    shutil.copytree(FIXTURES / "gpt", renamed)
    output = tmp_path / "out"
    convert_tf_checkpoint(renamed, output, layer_norm_eps=1e-7)
    assert json.loads((output / "conversion_report.json").read_text())["family"] == "v1"
    convert_tf_checkpoint(renamed, output, family="gpt", layer_norm_eps=1e-7, force=True)
    assert hf_roformer.HfRoFormerConfig.from_pretrained(output).is_decoder
    gpt_named = tmp_path / "chinese_roformer-gpt-char_L-2_H-32_A-4"
    shutil.copytree(FIXTURES / "gpt", gpt_named)
    convert_tf_checkpoint(gpt_named, tmp_path / "out2", layer_norm_eps=1e-7)
    assert json.loads((tmp_path / "out2" / "conversion_report.json").read_text())["family"] == "gpt"


def test_bad_bert_config_is_named(tmp_path):
    source = fixture_copy("v1", tmp_path / "v1")
    (source / "bert_config.json").write_text('{"hidden_size": 32}')
    with pytest.raises(ConversionError, match=r"bert_config.json: missing key\(s\)"):
        convert("v1", tmp_path, source=source)


# -- transformers-format sources --------------------------------------------------------------------------------------


def test_transformers_roformer_directory_converts_with_equal_outputs(tmp_path):
    torch.manual_seed(0)
    config = transformers.RoFormerConfig(
        vocab_size=64, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48
    )
    reference = transformers.RoFormerForMaskedLM(config).eval()
    reference.save_pretrained(tmp_path / "junnyu")
    shutil.copy(FIXTURES / "v1" / "vocab.txt", tmp_path / "junnyu" / "vocab.txt")
    main(["convert", str(tmp_path / "junnyu"), str(tmp_path / "out")])
    converted = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "out").eval()
    assert isinstance(converted, hf_roformer.HfRoFormerForMaskedLM)
    input_ids = torch.randint(1, 64, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(converted(input_ids).logits, reference(input_ids).logits, atol=1e-5, rtol=0)
    assert (tmp_path / "out" / "README.md").exists()


def test_v2_in_transformers_format_loads_into_v2(tmp_path):
    """A `roformer`-type directory of RoFormer-V2 (keys without biases and norms, written by hand from the V2 fixture)
    converts into the V2 architecture and reproduces bert4keras' outputs."""
    from safetensors.torch import save_file

    tensors = TFCheckpoint(FIXTURES / "v2" / "bert_model.ckpt").read_all()
    state = {
        "roformer.embeddings.word_embeddings.weight": tensors["bert/embeddings/word_embeddings"],
        "roformer.embeddings.token_type_embeddings.weight": tensors["bert/embeddings/token_type_embeddings"],
    }
    for i in range(2):
        tf_layer, layer = f"bert/encoder/layer_{i}", f"roformer.encoder.layer.{i}"
        for tf_name, name in [
            ("attention/self/query", "attention.self.query"),
            ("attention/self/key", "attention.self.key"),
            ("attention/self/value", "attention.self.value"),
            ("attention/output/dense", "attention.output.dense"),
            ("intermediate/dense", "intermediate.dense"),
            ("output/dense", "output.dense"),
        ]:
            state[f"{layer}.{name}.weight"] = tensors[f"{tf_layer}/{tf_name}/kernel"].T.contiguous()
    state["cls.predictions.decoder.weight"] = state["roformer.embeddings.word_embeddings.weight"].clone()
    source = tmp_path / "roformer_v2_chinese_char_small"
    source.mkdir()
    save_file(state, source / "model.safetensors")
    bert = json.loads((FIXTURES / "v2" / "bert_config.json").read_text())
    config = {**bert, "model_type": "roformer", "norm_type": "rms_norm", "use_bias": False, "layer_norm_eps": 1e-7}
    (source / "config.json").write_text(json.dumps(config))
    convert_transformers_roformer(source, tmp_path / "out")
    model = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "out").eval()
    assert model.config.norm_type == "rms_norm"
    data = golden("v2")
    input_ids = torch.tensor(data["token_ids"])
    with torch.no_grad():
        probabilities = model(
            input_ids, token_type_ids=torch.tensor(data["segment_ids"]), attention_mask=input_ids != 0
        ).logits.softmax(-1)
    real = input_ids != 0
    torch.testing.assert_close(
        probabilities[real], torch.tensor(data["output/mlm_probabilities"])[real], atol=1e-4, rtol=0
    )
    state.pop("roformer.encoder.layer.1.output.dense.weight")
    save_file(state, source / "model.safetensors")
    with pytest.raises(ConversionError, match="roformer.encoder.layer.1.output.dense.weight"):
        convert_transformers_roformer(source, tmp_path / "out2")


# -- hub and cards -----------------------------------------------------------------------------------------------------


class RecordingApi:
    """Stands in for `HfApi`: records calls and the files of the uploaded folder; no network."""

    def __init__(self):
        self.calls = []

    def create_repo(self, repo_id, **kwargs):
        self.calls.append(("create_repo", repo_id, kwargs))

    def upload_folder(self, folder_path, repo_id, **kwargs):
        files = sorted(path.name for path in Path(folder_path).iterdir())
        self.calls.append(("upload_folder", repo_id, files))
        return f"https://huggingface.co/{repo_id}/commit/0"


def test_push_uploads_everything_a_remote_user_needs(tmp_path):
    output = convert("sim", tmp_path)
    api = RecordingApi()
    assert push_folder(output, "someone/roformer-sim", api=api).endswith("/commit/0")
    (_, repo, options), (_, upload_repo, files) = api.calls
    assert repo == upload_repo == "someone/roformer-sim" and options["exist_ok"]
    expected = {
        "model.safetensors", "config.json", "generation_config.json", "README.md", "conversion_report.json",
        "configuration_hf_roformer.py", "modeling_hf_roformer.py", "rotary_hf_roformer.py",
        "rope_scaling_hf_roformer.py", "linear_attention_hf_roformer.py", "rotary_kernels_hf_roformer.py",
        "tokenizer.json", "tokenizer_config.json",
    }  # fmt: skip
    assert expected <= set(files), expected - set(files)
    auto_map = json.loads((output / "config.json").read_text())["auto_map"]
    assert auto_map["AutoModelForCausalLM"] == "modeling_hf_roformer.HfRoFormerForCausalLM"


def test_card_metadata_and_snippets(tmp_path):
    output = convert("v2", tmp_path)
    card = (output / "README.md").read_text()
    for needle in ("language: zh", "license: apache-2.0", "pipeline_tag: fill-mask", "hf_roformer", "roformer-v2"):
        assert needle in card
    report = json.loads((output / "conversion_report.json").read_text())
    assert report["source_sha256"]["bert_model.ckpt.index"] in card
    snippets = card.split("```python\n")[1:3]
    for snippet in snippets:  # the installed and the remote-code snippet both load the converted model
        code = snippet.split("```")[0].replace('"hf-roformer/v2"', repr(str(output)))
        namespace = {}
        exec(code.replace(f'"{report["source"]}"', repr(str(output))), namespace)
        assert isinstance(namespace["model"], torch.nn.Module)


def test_released_cards_are_committed_and_current():
    for checkpoint in RELEASED:
        path = REPOSITORY / "model_cards" / checkpoint.file / "README.md"
        assert path.read_text() == str(render_card(checkpoint)), f"re-render {path}"
