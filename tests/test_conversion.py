"""Conversion of the original checkpoints: equal to the original implementation in both bert4keras eras (golden
outputs), a verified TF-free reader (checksums, fuzzed), a converter that checks its sources before any work and
writes all or nothing, transformers-format sources, hub upload, model cards."""

import errno
import json
import os
import shutil
import signal
import struct
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import numpy as np
import pytest
import torch
import transformers
from conftest import cli_failure

import hf_roformer
from hf_roformer.conversion import crc32c as crc
from hf_roformer.conversion.convert import ConversionError, convert_tf_checkpoint, convert_transformers_roformer
from hf_roformer.conversion.families import RELEASED
from hf_roformer.conversion.hub import push_folder
from hf_roformer.conversion.model_card import render_card
from hf_roformer.conversion.output import REPLACED_MARK, STAGING_MARK
from hf_roformer.conversion.tf_checkpoint import TABLE_MAGIC, CheckpointError, TFCheckpoint
from hf_roformer.utils.directory_locks import held_elsewhere, is_zombie
from hf_roformer.utils.errors import OutputDirectoryError
from hf_roformer_cli import main


FIXTURES = Path(__file__).resolve().parent / "fixtures" / "original_checkpoints"
ERAS = {"bert4keras-0.11.3": None, "bert4keras-0.11.5": 1e-7}  # era -> --layer-norm-eps reproducing it
RELEASE_ERA = "bert4keras-0.11.3"
FAMILIES = ["v1", "gpt", "sim", "v2"]
REPOSITORY = Path(__file__).resolve().parents[1]
FP32_FLOOR = 2e-6


def source(family: str, era: str = RELEASE_ERA) -> Path:
    return FIXTURES / era / family


def golden(family: str, era: str = RELEASE_ERA) -> dict[str, np.ndarray]:
    with np.load(source(family, era) / "golden.npz") as data:
        return {key: data[key] for key in data.files}


def golden_text(family: str, era: str = RELEASE_ERA) -> dict:
    return json.loads((source(family, era) / "golden_text.json").read_text(encoding="utf-8"))


def convert(family: str, tmp_path: Path, source_dir: Path | None = None, era: str = RELEASE_ERA, **kwargs) -> Path:
    """Convert a fixture (or `source_dir`) with the family given, as the fixtures' directories are not release names."""
    output = tmp_path / f"converted-{family}"
    kwargs.setdefault("layer_norm_eps", ERAS[era])
    convert_tf_checkpoint(source_dir or source(family, era), output, family=family, **kwargs)
    return output


@pytest.fixture(scope="module")
def converted(tmp_path_factory):
    """Each fixture converted once, for the tests that only read the result: `converted(family, era)`."""
    cache = {}

    def get(family: str, era: str = RELEASE_ERA) -> Path:
        if (family, era) not in cache:
            cache[family, era] = convert(family, tmp_path_factory.mktemp(f"{era}-{family}"), era=era)
        return cache[family, era]

    return get


def leftovers(directory: Path) -> list[str]:
    """Staging or set-aside directories of the converter left in `directory`."""
    return sorted(path.name for path in directory.iterdir() if STAGING_MARK in path.name or REPLACED_MARK in path.name)


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
    if wire_type == 5:
        return tag + struct.pack("<I", payload)
    return tag + _varint(len(payload)) + payload


def _block(entries: list[tuple[bytes, bytes]]) -> bytes:
    body = b"".join(_varint(0) + _varint(len(k)) + _varint(len(v)) + k + v for k, v in entries)
    return body + struct.pack("<II", 0, 1)


def _trailer(block: bytes, compression: int = 0) -> bytes:
    return bytes([compression]) + struct.pack("<I", crc.masked_crc32c(block + bytes([compression])))


def write_tf_checkpoint(
    prefix: Path, tensors: dict[str, np.ndarray], compression: int = 0, dtype_enum: int = 1
) -> None:
    """Write float32 tensors as a TF1 bundle with TensorFlow's checksums: one data shard, one sorted data block, a
    metaindex and an index block, the footer. `compression` and `dtype_enum` let a test declare what the reader must
    refuse."""
    data, entries = bytearray(), [(b"", _field(1, 0, 1))]
    for name in sorted(tensors):
        array = np.ascontiguousarray(tensors[name], dtype="<f4")
        shape = b"".join(_field(2, 2, _field(1, 0, size)) for size in array.shape)
        entry = _field(1, 0, dtype_enum) + _field(2, 2, shape) + _field(4, 0, len(data)) + _field(5, 0, array.nbytes)
        entry += _field(6, 5, crc.masked_crc32c(array.tobytes()))
        entries.append((name.encode(), entry))
        data += array.tobytes()
    data_block = _block(entries)
    meta_offset = len(data_block) + 5
    meta_block = _block([])
    index_offset = meta_offset + len(meta_block) + 5
    index_block = _block([(entries[-1][0] + b"\xff", _varint(0) + _varint(len(data_block)))])
    footer = _varint(meta_offset) + _varint(len(meta_block)) + _varint(index_offset) + _varint(len(index_block))
    footer = footer.ljust(40, b"\0") + struct.pack("<Q", TABLE_MAGIC)
    Path(str(prefix) + ".index").write_bytes(
        data_block + _trailer(data_block, compression) + meta_block + _trailer(meta_block) + index_block
        + _trailer(index_block) + footer
    )  # fmt: skip
    Path(str(prefix) + ".data-00000-of-00001").write_bytes(bytes(data))


def fixture_copy(family: str, directory: Path, change=None, era: str = RELEASE_ERA) -> Path:
    """A copy of a fixture directory whose checkpoint is rewritten after `change(tensors)`."""
    shutil.copytree(source(family, era), directory)
    with TFCheckpoint(directory / "bert_model.ckpt") as checkpoint:
        tensors = {name: value.numpy() for name, value in checkpoint.read_all().items()}
    if change is not None:
        change(tensors)
        for path in directory.glob("bert_model.ckpt.*"):
            path.unlink()
        write_tf_checkpoint(directory / "bert_model.ckpt", tensors)
    return directory


# -- equality with the original ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("family", FAMILIES)
def test_reader_equals_tensorflow(family, era):
    expected = {k.removeprefix("variable/"): v for k, v in golden(family, era).items() if k.startswith("variable/")}
    with TFCheckpoint(source(family, era) / "bert_model.ckpt") as checkpoint:
        assert checkpoint.names() == sorted(expected)
        for name, value in expected.items():
            assert checkpoint.shape(name) == value.shape
            assert np.array_equal(checkpoint.read(name).numpy(), value), name


def original_outputs_differences(output: Path, family: str, era: str) -> dict[str, float]:
    """Max |difference| to bert4keras' hidden states, pooler output and MLM logits on the fixture's padded batch."""
    data = golden(family, era)
    input_ids = torch.tensor(data["token_ids"])
    inputs = dict(input_ids=input_ids, token_type_ids=torch.tensor(data["segment_ids"]), attention_mask=input_ids != 0)
    real = inputs["attention_mask"]
    head_class = transformers.AutoModelForCausalLM if family in ("gpt", "sim") else transformers.AutoModelForMaskedLM
    model = head_class.from_pretrained(output).eval()
    base = transformers.AutoModel.from_pretrained(output).eval()
    with torch.no_grad():
        logits = model(**inputs, use_cache=False).logits
        outputs = base(**inputs)
    differences = {
        "hidden": (outputs.last_hidden_state[real] - torch.tensor(data["output/hidden"])[real]).abs().max(),
        "mlm_logits": (logits[real] - torch.tensor(data["output/mlm_logits"])[real]).abs().max(),
    }
    if "output/pooler" in data:
        differences["pooler"] = (outputs.pooler_output - torch.tensor(data["output/pooler"])).abs().max()
    else:
        assert outputs.pooler_output is None
    return {key: float(value) for key, value in differences.items()}


@pytest.mark.parametrize("era", ERAS)
@pytest.mark.parametrize("family", FAMILIES)
def test_converted_model_equals_bert4keras(family, era, converted):
    """Release-time bert4keras (1e-12 everywhere) with the default, 0.11.5 (1e-7 in the embedding and encoder norms,
    1e-12 in the MLM head) with `layer_norm_eps=1e-7`: hidden states, pooler and MLM logits at the float32 floor."""
    output = converted(family, era)
    differences = original_outputs_differences(output, family, era)
    assert max(differences.values()) < FP32_FLOOR, differences
    assert ("pooler" in differences) == (family in ("v1", "sim"))
    report = json.loads((output / "conversion_report.json").read_text())
    assert report["family"] == family and report["weights_max_abs_diff"] == 0.0 and report["reload_max_abs_diff"] == 0.0
    assert report["layer_norm_eps"] == (ERAS[era] or 1e-12)
    assert report["lm_head_layer_norm_eps"] == (None if family == "v2" else 1e-12)


@pytest.mark.parametrize("era", ERAS)
def test_the_other_eras_epsilon_is_visible(era, tmp_path):
    """The fidelity test can fail: converted with the other era's epsilon, hidden states (and for v1 the logits) move
    well past the float32 floor, so the fixtures do measure each norm's epsilon."""
    other = 1e-7 if ERAS[era] is None else None
    for family in ("v1", "v2"):
        output = convert(family, tmp_path / family, era=era, layer_norm_eps=other)
        differences = original_outputs_differences(output, family, era)
        assert differences["hidden"] > 10 * FP32_FLOOR, (family, differences)


def test_mlm_head_epsilon_is_its_own(converted, tmp_path):
    """bert4keras >= 0.11.4 keeps the MLM head's norm at 1e-12: giving it the encoder's 1e-7 moves the logits."""
    output = converted("v1", "bert4keras-0.11.5")
    config = hf_roformer.HfRoFormerConfig.from_pretrained(output)
    assert (config.layer_norm_eps, config.lm_head_layer_norm_eps) == (1e-7, 1e-12)
    model = transformers.AutoModelForMaskedLM.from_pretrained(output).eval()
    head_norm = model.cls.predictions.transform.LayerNorm
    assert head_norm.eps == 1e-12 and model.roformer.embeddings.LayerNorm.eps == 1e-7
    data = golden("v1", "bert4keras-0.11.5")
    input_ids = torch.tensor(data["token_ids"])
    real = input_ids != 0
    with torch.no_grad():
        head_norm.eps = 1e-7
        logits = model(input_ids, token_type_ids=torch.tensor(data["segment_ids"]), attention_mask=real).logits
    assert float((logits[real] - torch.tensor(data["output/mlm_logits"])[real]).abs().max()) > 10 * FP32_FLOOR


def test_family_layouts(converted):
    v2 = hf_roformer.HfRoFormerForMaskedLM.from_pretrained(converted("v2"))
    assert v2.config.norm_type == "rms_norm" and not v2.config.use_bias and v2.config.hidden_act == "relu"
    assert sum(1 for _ in v2.named_parameters()) == 14  # 2 embeddings + 6 kernels per layer; the head is tied
    assert v2.cls.predictions.decoder.weight.data_ptr() == v2.roformer.embeddings.word_embeddings.weight.data_ptr()
    sim = hf_roformer.HfRoFormerForCausalLM.from_pretrained(converted("sim"))
    assert sim.config.unilm and sim.config.is_decoder and sim.config.pooler_activation == "linear"
    assert transformers.GenerationConfig.from_pretrained(converted("sim")).eos_token_id == 3
    v1 = hf_roformer.HfRoFormerConfig.from_pretrained(converted("v1"))
    assert v1.pooler_activation == "tanh" and not v1.is_decoder


def test_char_tokenizer_is_the_original(converted):
    """The saved tokenizer is `HfRoFormerTokenizer` in char mode, truncating at the model's trained length, and
    encodes texts and pairs as bert4keras' tokenizer does."""
    for era in ERAS:
        tokenizer = transformers.AutoTokenizer.from_pretrained(converted("sim", era))
        assert isinstance(tokenizer, hf_roformer.HfRoFormerTokenizer) and not tokenizer.word_level
        assert tokenizer.model_max_length == 512
        original = json.loads((FIXTURES / era / "tokenizer_golden.json").read_text(encoding="utf-8"))
        for case in original["encoded"]:
            encoding = tokenizer(case["text"])
            assert encoding["input_ids"] == case["token_ids"] and encoding["token_type_ids"] == case["segment_ids"]
        for case in original["pairs"]:
            encoding = tokenizer(*case["texts"])
            assert encoding["input_ids"] == case["token_ids"] and encoding["token_type_ids"] == case["segment_ids"]
        for case in original["decoded"]:
            assert tokenizer.decode(case["token_ids"], skip_special_tokens=True) == case["text"]
    assert len(tokenizer("字" * 600, truncation=True)["input_ids"]) == 512


@pytest.mark.parametrize("era", ERAS)
def test_gpt_generates_through_the_text_generation_pipeline(era, converted):
    """A converted RoFormer-GPT continues `[CLS] text` (no `[SEP]`, as the original prompts it) in
    `pipeline("text-generation")`, and the text is decoded as the original decodes it (Chinese without spaces)."""
    output = converted("gpt", era)
    tokenizer = transformers.AutoTokenizer.from_pretrained(output)
    tokens = tokenizer.convert_ids_to_tokens(tokenizer("今天", "天气")["input_ids"])
    assert tokens == ["[CLS]", "今", "天", "[SEP]", "天", "气"]
    generator = transformers.pipeline("text-generation", model=str(output), tokenizer=tokenizer)
    for case in golden_text("gpt", era)["continuations"]:
        assert tokenizer(case["text"])["input_ids"] == case["prompt_ids"]
        result = generator(case["text"], do_sample=False, max_new_tokens=len(case["output_ids"]))
        assert result[0]["generated_text"] == case["text"] + case["decoded"]


def test_sim_generation_with_cache_equals_recomputation(converted):
    """RoFormer-Sim generates the target segment after the source under the UniLM mask; the cache is exact."""
    model = hf_roformer.HfRoFormerForCausalLM.from_pretrained(converted("sim")).eval()
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


# -- sentence-transformers ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("era", ERAS)
def test_sentence_transformer_returns_the_original_sentence_vector(era, converted):
    """`SentenceTransformer(converted Sim)` gives roformer-sim's sentence vector (the [CLS] state through the linear
    pooler) and `similarity` its cosine similarity, as bert4keras computed them for the same texts."""
    from sentence_transformers import SentenceTransformer

    data = golden("sim", era)
    texts = json.loads((FIXTURES / era / "tokenizer_golden.json").read_text(encoding="utf-8"))["texts"]
    model = SentenceTransformer(str(converted("sim", era)))
    vectors = model.encode(texts, convert_to_tensor=True)
    torch.testing.assert_close(vectors, torch.tensor(data["sentences/pooler"]), atol=1e-5, rtol=0)
    similarity = model.similarity(vectors, vectors)
    torch.testing.assert_close(similarity, torch.tensor(data["sentences/similarity"]), atol=1e-5, rtol=0)


def test_sentence_transformers_files_only_with_a_pooler(converted):
    for family in ("sim", "v1"):
        files = json.loads((converted(family) / "modules.json").read_text())
        assert [module["type"] for module in files] == ["sentence_transformers.base.modules.transformer.Transformer"]
        config = json.loads((converted(family) / "sentence_bert_config.json").read_text())
        assert config["modality_config"]["text"]["method_output_name"] == "pooler_output"
    for family in ("gpt", "v2"):
        assert not (converted(family) / "modules.json").exists()


# -- verified reads ----------------------------------------------------------------------------------------------------


def test_crc32c_is_castagnoli():
    """Known values (RFC 3720), and the NumPy implementation equals a bitwise reference across its lane layouts."""
    assert crc.crc32c_numpy(b"123456789") == 0xE3069283
    assert crc.crc32c_numpy(b"") == 0 and crc.crc32c_numpy(bytes(32)) == 0x8A9136AA
    assert crc.crc32c_numpy(b"\xff" * 32) == 0x62A8AB43

    def bitwise(data: bytes) -> int:
        register = 0xFFFFFFFF
        for byte in data:
            register ^= byte
            for _ in range(8):
                register = (register >> 1) ^ (0x82F63B78 if register & 1 else 0)
        return register ^ 0xFFFFFFFF

    rng = np.random.default_rng(0)
    for length in (1, 255, 256, 257, 1000, 4099, 65536 + 7, 300_001):
        data = rng.integers(0, 256, length, dtype=np.uint8).tobytes()
        assert crc.crc32c_numpy(data) == bitwise(data) == crc.crc32c(data), length


def test_flipped_byte_in_a_tensor_is_refused_naming_it(tmp_path):
    """One flipped byte in any tensor of the data file is a `CheckpointError` naming the tensor and the file, and
    the conversion writes nothing."""
    data_name = "bert_model.ckpt.data-00000-of-00001"
    with TFCheckpoint(source("sim") / "bert_model.ckpt") as checkpoint:
        entries = dict(checkpoint.entries)
    original = (source("sim") / data_name).read_bytes()
    directory = tmp_path / "sim"
    shutil.copytree(source("sim"), directory)
    for name, entry in entries.items():
        for position in (entry.offset, entry.offset + entry.size - 1):
            flipped = bytearray(original)
            flipped[position] ^= 0x01
            (directory / data_name).write_bytes(bytes(flipped))
            with TFCheckpoint(directory / "bert_model.ckpt") as checkpoint:
                with pytest.raises(
                    CheckpointError, match=rf"{directory / data_name}: tensor '{name}' fails its checksum"
                ):
                    checkpoint.read(name)
    with pytest.raises(CheckpointError, match="fails its checksum"):
        convert("sim", tmp_path, source_dir=directory)
    assert not (tmp_path / "converted-sim").exists() and leftovers(tmp_path) == []


def test_every_flipped_byte_of_the_index_is_refused(tmp_path):
    """Every byte of the index file is under a checksum, the magic number or a structural check."""
    index = (source("v2") / "bert_model.ckpt.index").read_bytes()
    directory = tmp_path / "v2"
    shutil.copytree(source("v2"), directory)
    path = directory / "bert_model.ckpt.index"
    for position in range(len(index)):
        flipped = bytearray(index)
        flipped[position] ^= 0x20
        path.write_bytes(bytes(flipped))
        with pytest.raises(CheckpointError, match=str(path)):
            TFCheckpoint(directory / "bert_model.ckpt")
    flipped = bytearray(index)
    flipped[100] ^= 0x01  # inside the data block that lists the tensors
    path.write_bytes(bytes(flipped))
    with pytest.raises(CheckpointError, match=rf"{path}: the block at byte 0 fails its checksum"):
        convert("v2", tmp_path, source_dir=directory)
    assert not (tmp_path / "converted-v2").exists() and leftovers(tmp_path) == []


def test_reader_errors_name_the_file(tmp_path):
    index = (source("v1") / "bert_model.ckpt.index").read_bytes()
    cases = {
        "truncated": index[:20],
        "magic": index[:-8] + b"\0" * 8,
        "offsets": index[:-48] + _varint(10**9) + _varint(10) + index[-48 + 2 :],
    }
    for name, content in cases.items():
        directory = tmp_path / name
        shutil.copytree(source("v1"), directory)
        (directory / "bert_model.ckpt.index").write_bytes(content)
        with pytest.raises(CheckpointError, match=str(directory / "bert_model.ckpt.index")):
            TFCheckpoint(directory / "bert_model.ckpt").read_all()
    directory = tmp_path / "short-data"
    shutil.copytree(source("v1"), directory)
    data = directory / "bert_model.ckpt.data-00000-of-00001"
    data.write_bytes(data.read_bytes()[:1000])
    with pytest.raises(
        CheckpointError, match=rf"{data}: truncated \(tensor '.*' ends at byte \d+, the file has 1000\)"
    ):
        TFCheckpoint(directory / "bert_model.ckpt")  # refused when opened, before anything is read
    with pytest.raises(CheckpointError, match="nope.ckpt.index"):
        TFCheckpoint(tmp_path / "nope.ckpt")


def test_reader_refuses_compressed_blocks_unknown_dtypes_and_missing_checksums(tmp_path):
    prefix = tmp_path / "model.ckpt"
    write_tf_checkpoint(prefix, {"a": np.ones((2, 3), np.float32)})
    assert TFCheckpoint(prefix).read("a").shape == (2, 3)  # the writer makes valid checkpoints
    write_tf_checkpoint(prefix, {"a": np.ones((2, 3), np.float32)}, compression=1)
    with pytest.raises(CheckpointError, match=r"model.ckpt.index: compressed blocks \(type 1\)"):
        TFCheckpoint(prefix)
    write_tf_checkpoint(prefix, {"a": np.ones(2, np.float32)}, dtype_enum=7)
    with pytest.raises(CheckpointError, match=r"model.ckpt.index: tensor 'a' has an unsupported dtype"):
        TFCheckpoint(prefix)


def mutate(target: bytearray, rng) -> None:
    """Truncate, overwrite, insert or stamp 0xff bytes at random."""
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


def test_fuzzed_checkpoints_are_refused_exactly_when_changed(tmp_path):
    """1,200 truncated or mutated index/data files: every changed file raises `CheckpointError` naming it (block and
    tensor checksums leave no silent change), every unchanged one reads."""
    rng = np.random.default_rng(0)
    originals = {
        family: (
            (source(family) / "bert_model.ckpt.index").read_bytes(),
            (source(family) / "bert_model.ckpt.data-00000-of-00001").read_bytes(),
        )
        for family in FAMILIES
    }
    prefix = tmp_path / "fuzz.ckpt"
    outcomes = {"read": 0, "refused": 0, "checksum": 0}
    for trial in range(1200):
        index, data = (bytearray(content) for content in originals[FAMILIES[trial % 4]])
        mutate(index if rng.random() < 0.7 else data, rng)
        Path(str(prefix) + ".index").write_bytes(bytes(index))
        Path(str(prefix) + ".data-00000-of-00001").write_bytes(bytes(data))
        changed = (bytes(index), bytes(data)) != originals[FAMILIES[trial % 4]]
        try:
            with TFCheckpoint(prefix) as checkpoint:
                checkpoint.read_all()
            outcomes["read"] += 1
            assert not changed, f"trial {trial}: a changed checkpoint was read"
        except CheckpointError as error:
            assert "fuzz.ckpt" in str(error) and changed
            outcomes["refused"] += 1
            outcomes["checksum"] += "checksum" in str(error)
    assert sum(outcomes.values()) - outcomes["checksum"] == 1200 and outcomes["checksum"] > 300, outcomes


# -- checked sources -------------------------------------------------------------------------------------------------


def test_vocabulary_must_match_the_embedding_rows(tmp_path):
    for name, edit in {
        "short": lambda lines: lines[:-1],
        "long": lambda lines: [*lines, "extra"],
    }.items():
        directory = fixture_copy("v1", tmp_path / name)
        lines = (directory / "vocab.txt").read_text(encoding="utf-8").splitlines()
        (directory / "vocab.txt").write_text("\n".join(edit(lines)) + "\n", encoding="utf-8")
        with pytest.raises(ConversionError, match=r"vocab.txt: \d+ tokens, but bert/embeddings/word_embeddings in "):
            convert("v1", tmp_path, source_dir=directory)
    directory = fixture_copy("v1", tmp_path / "repeated")
    lines = (directory / "vocab.txt").read_text(encoding="utf-8").splitlines()
    (directory / "vocab.txt").write_text("\n".join([*lines[:-1], lines[5]]) + "\n", encoding="utf-8")
    with pytest.raises(ConversionError) as error:
        convert("v1", tmp_path, source_dir=directory)
    assert str(error.value) == (
        f"{directory / 'vocab.txt'}: 1 token(s) listed on more than one line: '，' on lines 6 and 76; each token must "
        "have one line, whose number gives its id."
    )
    directory = fixture_copy("v1", tmp_path / "no-vocab")
    (directory / "vocab.txt").unlink()
    with pytest.raises(ConversionError, match="vocab.txt: file not found"):
        convert("v1", tmp_path, source_dir=directory)
    directory = fixture_copy("v1", tmp_path / "no-sep")
    (directory / "vocab.txt").write_text(
        (directory / "vocab.txt").read_text(encoding="utf-8").replace("[SEP]", "[SEP2]"), encoding="utf-8"
    )
    with pytest.raises(ConversionError, match=r"lacks the special token\(s\) \['\[SEP\]'\]"):
        convert("v1", tmp_path, source_dir=directory)
    assert not (tmp_path / "converted-v1").exists() and leftovers(tmp_path) == []


def vocabulary_listed_twice(directory: Path) -> str:
    """Write `directory`'s vocab.txt with every token twice (which loaded with every token mapped to one id, and
    ended the conversion in a traceback); return the one-line error `hf-roformer convert` must print."""
    path = directory / "vocab.txt"
    lines = path.read_text(encoding="utf-8").splitlines()
    path.write_text("\n".join(lines * 2) + "\n", encoding="utf-8")
    count = len(lines)
    return (
        f"error: {path}: {count} token(s) listed on more than one line: '[PAD]' on lines 1 and {count + 1}, '[UNK]' "
        f"on lines 2 and {count + 2}, '[CLS]' on lines 3 and {count + 3}, '[SEP]' on lines 4 and {count + 4}, "
        f"'[MASK]' on lines 5 and {count + 5} (and {count - 5} more); each token must have one line, whose number "
        "gives its id."
    )


def test_vocabulary_listed_twice_ends_the_command_in_one_line(tmp_path, capsys):
    directory = fixture_copy("v1", tmp_path / "twice")
    message = vocabulary_listed_twice(directory)
    assert cli_failure(capsys, ["convert", str(directory), str(tmp_path / "out"), "--family", "v1"]) == message + "\n"
    torch.manual_seed(0)
    config = transformers.RoFormerConfig(
        vocab_size=76, hidden_size=32, num_hidden_layers=1, num_attention_heads=4, intermediate_size=48
    )
    transformers.RoFormerForMaskedLM(config).save_pretrained(tmp_path / "junnyu")
    shutil.copy(source("v1") / "vocab.txt", tmp_path / "junnyu" / "vocab.txt")
    message = vocabulary_listed_twice(tmp_path / "junnyu")
    assert cli_failure(capsys, ["convert", str(tmp_path / "junnyu"), str(tmp_path / "out")]) == message + "\n"
    assert not (tmp_path / "out").exists() and leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("hidden_size", "32", r"`hidden_size` must be an integer, got '32'"),
        ("num_attention_heads", None, r"`num_attention_heads` must be an integer, got None"),
        ("hidden_size", 1e6, r"`hidden_size` must be an integer, got 1000000.0"),
        ("intermediate_size", True, r"`intermediate_size` must be an integer, got True"),
        ("vocab_size", -3, r"`vocab_size` must be positive, got -3"),
        ("hidden_dropout_prob", "0.1", r"`hidden_dropout_prob` must be a number"),
        ("hidden_act", 1, r"`hidden_act` must be a string, got 1"),
        ("num_hidden_layers", 1_000_000_000, r"`num_hidden_layers` is 1000000000, the checkpoint .* holds 2 layer"),
        ("hidden_size", 1_000_000, r"the config does not describe the checkpoint: .*needs \(1000000, 1000000\)"),
        ("vocab_size", 10**12, r"the config does not describe the checkpoint: bert/embeddings/word_embeddings"),
    ],
)
def test_bad_bert_config_is_refused_before_any_allocation(key, value, message, tmp_path):
    """Wrong types and values are named; sizes that do not fit the checkpoint are refused by comparing shapes on a
    model without memory (a real allocation for hidden_size 1e6 would need terabytes)."""
    directory = fixture_copy("v1", tmp_path / "v1")
    config = json.loads((directory / "bert_config.json").read_text())
    config[key] = value
    (directory / "bert_config.json").write_text(json.dumps(config))
    with pytest.raises(ConversionError, match=message):
        convert("v1", tmp_path, source_dir=directory)


def test_missing_bert_config_keys_are_named(tmp_path):
    directory = fixture_copy("v1", tmp_path / "v1")
    (directory / "bert_config.json").write_text('{"hidden_size": 32}')
    with pytest.raises(ConversionError, match=r"bert_config.json: missing key\(s\)"):
        convert("v1", tmp_path, source_dir=directory)


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
        (reshape, r"bert/pooler/dense/kernel has shape \(32, 16\), roformer.pooler.dense.weight needs \(32, 32\)"),
    ]
    for index, (change, message) in enumerate(cases):
        directory = fixture_copy("v1", tmp_path / f"source-{index}", change)
        with pytest.raises(ConversionError, match=message):
            convert("v1", tmp_path, source_dir=directory)
        assert not (tmp_path / "converted-v1").exists() and leftovers(tmp_path) == []


def test_training_state_is_skipped_and_reported(tmp_path):
    def add(tensors):
        tensors["global_step"] = np.zeros((), np.float32)
        tensors["bert/encoder/layer_0/output/dense/kernel/adam_m"] = np.zeros((48, 32), np.float32)

    output = convert("v1", tmp_path, source_dir=fixture_copy("v1", tmp_path / "v1", add))
    report = json.loads((output / "conversion_report.json").read_text())
    assert report["skipped_training_state"] == ["bert/encoder/layer_0/output/dense/kernel/adam_m", "global_step"]


# -- family ------------------------------------------------------------------------------------------------------------


def test_family_is_never_guessed(tmp_path, capsys):
    """v1, GPT and Sim hold the same variables: `auto` refuses them unless the directory is named after a release;
    RoFormer-V2 is known by its variables. The report and card say how the family was decided."""
    renamed = tmp_path / "my-encoder"
    shutil.copytree(source("sim"), renamed)
    with pytest.raises(ConversionError, match=r"cannot tell the family .* pass --family v1 .*--family sim"):
        convert_tf_checkpoint(renamed, tmp_path / "out")
    assert cli_failure(capsys, ["convert", str(renamed), str(tmp_path / "out")]) == (
        f"error: {renamed}: cannot tell the family of 'my-encoder': v1, GPT and Sim checkpoints hold the same "
        "variables and the directory is not named after a release; pass --family v1 (masked LM), --family gpt "
        "(causal LM) or --family sim (RoFormer-Sim: UniLM mask, linear pooler)\n"
    )
    assert not (tmp_path / "out").exists()

    release = tmp_path / "chinese_roformer-sim-char_L-12_H-768_A-12"
    shutil.copytree(source("sim"), release)
    convert_tf_checkpoint(release, tmp_path / "released")
    report = json.loads((tmp_path / "released" / "conversion_report.json").read_text())
    assert report["family"] == "sim"
    assert report["family_decided_by"] == "the directory name: the release chinese_roformer-sim-char_L-12_H-768_A-12"
    card = (tmp_path / "released" / "README.md").read_text()
    assert "Family: sim, decided by the directory name: the release chinese_roformer-sim" in card

    convert_tf_checkpoint(source("v2"), tmp_path / "v2")
    report = json.loads((tmp_path / "v2" / "conversion_report.json").read_text())
    assert (report["family"], report["family_decided_by"]) == (
        "v2",
        "its variables: no norm or bias variables (RoFormer-V2)",
    )
    with pytest.raises(ConversionError, match=r"--family v2 does not fit the checkpoint: its variables"):
        convert_tf_checkpoint(renamed, tmp_path / "out", family="v2")
    with pytest.raises(ConversionError, match=r"--family sim does not fit the checkpoint"):
        convert_tf_checkpoint(source("v2"), tmp_path / "out", family="sim")
    convert_tf_checkpoint(renamed, tmp_path / "out", family="sim")
    report = json.loads((tmp_path / "out" / "conversion_report.json").read_text())
    assert (report["family"], report["family_decided_by"]) == ("sim", "--family sim")


# -- all or nothing --------------------------------------------------------------------------------------------------


def test_output_is_replaced_only_with_force(tmp_path, capsys):
    output = convert("v2", tmp_path)
    marker = output / "marker.txt"
    marker.write_text("keep me")
    with pytest.raises(OutputDirectoryError, match="--force"):
        convert("v2", tmp_path)
    assert marker.read_text() == "keep me"
    assert cli_failure(capsys, ["convert", str(source("v2")), str(output)]) == (
        f"error: {output} holds an earlier conversion; pass --force to replace it\n"
    )
    broken = fixture_copy("v2", tmp_path / "broken", lambda tensors: tensors.pop("bert/embeddings/word_embeddings"))
    with pytest.raises(ConversionError):
        convert("v2", tmp_path, source_dir=broken, force=True)
    assert marker.read_text() == "keep me"  # a failed forced conversion leaves the old output as it was
    convert("v2", tmp_path, force=True)
    assert marker.read_text() == "keep me" and (output / "model.safetensors").exists()  # not the conversion's file
    assert leftovers(tmp_path) == []


def test_force_replaces_only_the_files_the_earlier_conversion_wrote(tmp_path, capsys):
    """The report lists every file the conversion wrote; `convert --force` replaces those, and a file and a folder the
    user put into the output stay as they were (a file the new conversion would also write is refused, naming it,
    before anything changes)."""
    output = tmp_path / "out"
    main(["convert", str(source("v2")), str(output), "--family", "v2"])
    listed = json.loads((output / "conversion_report.json").read_text())["files"]
    assert {"model.safetensors", "config.json", "README.md", "vocab.txt"} <= listed.keys()
    assert listed == {name: (output / name).stat().st_size for name in listed}
    assert set(listed) | {"conversion_report.json"} == {
        path.relative_to(output).as_posix() for path in output.rglob("*") if path.is_file()
    }
    (output / "notes.txt").write_text("mine")
    (output / "mydata").mkdir()
    (output / "mydata" / "x.csv").write_text("a,b\n1,2\n")
    (output / "vocab.txt").rename(output / "vocab-old.txt")  # a file of the conversion, renamed: no longer listed
    main(["convert", str(source("v2")), str(output), "--family", "v2", "--force"])
    assert (output / "notes.txt").read_text() == "mine" and (output / "mydata" / "x.csv").read_text() == "a,b\n1,2\n"
    assert (output / "vocab-old.txt").exists() and (output / "vocab.txt").exists() and leftovers(tmp_path) == []
    capsys.readouterr()
    report = json.loads((output / "conversion_report.json").read_text())
    report["files"].pop("README.md")  # as if the user had written a README.md of their own
    (output / "conversion_report.json").write_text(json.dumps(report))
    before = tree_digest(output)
    assert cli_failure(capsys, ["convert", str(source("v2")), str(output), "--family", "v2", "--force"]) == (
        f"error: {output / 'README.md'} is not a file of the earlier conversion, and the new one writes a file of "
        f"that name; move it out of {output} and run again (--force replaces only the earlier conversion's files)\n"
    )
    assert tree_digest(output) == before and leftovers(tmp_path) == []


def test_existing_output_is_refused_before_any_work(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine")
    for force in (False, True):
        with pytest.raises(OutputDirectoryError, match="exists and is not an output of hf-roformer convert"):
            convert_tf_checkpoint(tmp_path / "no-such-source", tmp_path / "out", family="v1", force=force)
    assert (tmp_path / "out" / "notes.txt").read_text() == "mine"


def tree_digest(directory: Path) -> dict[str, bytes]:
    """Every file under `directory` (relative path -> bytes), to show a command left it byte-identical."""
    files = sorted(path for path in directory.rglob("*") if path.is_file())
    return {str(path.relative_to(directory)): path.read_bytes() for path in files}


@pytest.mark.parametrize("kind", ["tf", "transformers"])
def test_no_flag_lets_an_output_overlap_the_source(kind, tmp_path, capsys):
    """`convert SRC SRC --force`, `convert SRC <parent of SRC> --force` and an output inside the source are refused
    whatever the flags, before any work: the source (and everything beside it) stays byte-identical."""
    parent = tmp_path / "checkpoints"
    if kind == "tf":
        src = fixture_copy("v1", parent / "chinese_roformer_L-6_H-384_A-6")
    else:
        src = parent / "junnyu"
        transformers.RoFormerForMaskedLM(
            transformers.RoFormerConfig(vocab_size=76, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=48)  # fmt: skip
        ).save_pretrained(src)
    (parent / "other-notes.txt").write_text("beside the source")
    before = tree_digest(parent)
    for output, relation in ((src, "is"), (parent, "contains"), (src / "converted", "lies inside")):
        message = cli_failure(capsys, ["convert", str(src), str(output), "--force"])
        assert message == (
            f"error: output directory {output} {relation} the source checkpoint {src}; give an output directory "
            "apart from the inputs\n"
        )
    assert tree_digest(parent) == before


@pytest.mark.parametrize(
    "failing, error, reason",
    [
        ("safetensors", "SafetensorError", "No space left on device"),
        ("tokenizer", errno.ENOSPC, "No space left on device"),
        ("staging", errno.EROFS, "Read-only file system"),
    ],
)
def test_full_or_read_only_disk_is_a_clean_error(failing, error, reason, tmp_path, monkeypatch):
    """A write that fails for lack of space or permission is a `ConversionError` naming the output and the system's
    reason; nothing is left behind and an existing output is kept."""
    from safetensors import SafetensorError

    def fail(*args, **kwargs):
        if error == "SafetensorError":  # how safetensors reports a full disk
            raise SafetensorError("Error while serializing: I/O error: No space left on device (os error 28)")
        raise OSError(error, os.strerror(error))

    target = {
        "safetensors": (transformers.modeling_utils, "safe_save_file"),
        "tokenizer": (transformers.PreTrainedTokenizerBase, "save_pretrained"),
        "staging": (__import__("tempfile"), "mkdtemp"),
    }[failing]
    output = tmp_path / "out"
    output.mkdir()
    (output / "marker.txt").write_text("keep me")
    (output / "conversion_report.json").write_text("{}")  # an earlier conversion, which --force may replace
    monkeypatch.setattr(*target, fail)
    with pytest.raises(ConversionError, match=rf"{output}: cannot write .*\({reason}\); nothing was written"):
        convert_tf_checkpoint(source("v2"), output, family="v2", force=True)
    monkeypatch.undo()
    assert (output / "marker.txt").read_text() == "keep me" and leftovers(tmp_path) == []


def test_not_enough_free_space_is_refused_before_reading(tmp_path, monkeypatch):
    monkeypatch.setattr(shutil, "disk_usage", lambda path: shutil._ntuple_diskusage(10**9, 10**9 - 1000, 1000))
    with pytest.raises(ConversionError, match=r"not enough disk space \(the conversion needs about [\d.]+ MB, 0.0 MB"):
        convert("v2", tmp_path)
    assert not list(tmp_path.iterdir())


KILLED_CONVERSION = """
import sys, time
import hf_roformer.conversion.convert as convert
def hang(*args):
    print("writing", flush=True)
    time.sleep(600)
convert.write_report_and_card = hang  # the staging directory is complete but for the card when the kill comes
convert.convert_tf_checkpoint(sys.argv[1], sys.argv[2], family="v2")
"""


@pytest.mark.launched
def test_interrupted_conversion_leaves_nothing_after_the_next_run(tmp_path):
    """A conversion killed (SIGKILL) while writing leaves its staging directory; the next run into the same output
    removes it (its process is gone) and converts."""
    output = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED_CONVERSION), str(source("v2")), str(output)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
    )
    try:
        while (line := process.stdout.readline()) and line.strip() != b"writing":  # past what libraries print first
            pass
        assert line.strip() == b"writing"
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=60)
    finally:
        process.kill()
    assert len(leftovers(tmp_path)) == 1 and not output.exists()
    convert_tf_checkpoint(source("v2"), output, family="v2")
    assert leftovers(tmp_path) == [] and (output / "conversion_report.json").exists()


@pytest.mark.launched
def test_staging_of_a_killed_but_unreaped_conversion_is_removed(tmp_path):
    """The staging directory of a conversion killed while writing is removed by the next conversion into the same
    place even while the killed process is a zombie (not reaped yet, so its process id still answers), and a
    directory of another output, or one named like staging but not by the converter, is left alone."""
    output = tmp_path / "out"
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(KILLED_CONVERSION), str(source("v2")), str(output)],
        stdout=subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(REPOSITORY)},
    )
    try:
        while (line := process.stdout.readline()) and line.strip() != b"writing":
            pass
        assert line.strip() == b"writing"
        process.send_signal(signal.SIGKILL)
        staging = tmp_path / leftovers(tmp_path)[0]
        deadline = time.monotonic() + 60
        while not (is_zombie(process.pid) and held_elsewhere(staging) is False):  # its last thread has exited
            assert time.monotonic() < deadline
            time.sleep(0.05)
        os.kill(process.pid, 0)  # the zombie's id still answers, as a live process's would
        other = tmp_path / f".other.{STAGING_MARK}-{process.pid}-x1"  # another output's staging
        other.mkdir()
        unlike = tmp_path / f".out.{STAGING_MARK}-mine"  # not a name the converter makes
        unlike.mkdir()
        assert len(leftovers(tmp_path)) == 3
        convert_tf_checkpoint(source("v2"), output, family="v2")
        assert leftovers(tmp_path) == sorted([other.name, unlike.name])
        assert (output / "conversion_report.json").exists()
    finally:
        process.kill()
        process.wait(timeout=60)


def test_a_replacement_killed_after_the_swap_brings_the_users_files_along(tmp_path):
    """A `--force` run killed after moving the new output in but before carrying the user's files over: the next run
    carries them into the output before anything else."""
    output = convert("v2", tmp_path)
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    aside = tmp_path / f".{output.name}.{REPLACED_MARK}-{int(finished.stdout)}-q7"
    shutil.copytree(output, aside / "previous")
    (aside / "previous" / "notes.txt").write_text("mine")
    (aside / "previous" / "mydata").mkdir()
    (aside / "previous" / "mydata" / "x.csv").write_text("1,2\n")
    with pytest.raises(OutputDirectoryError, match="holds an earlier conversion; pass --force"):
        convert("v2", tmp_path)
    assert (output / "notes.txt").read_text() == "mine" and (output / "mydata" / "x.csv").read_text() == "1,2\n"
    assert leftovers(tmp_path) == []


def test_output_set_aside_by_a_killed_replacement_is_restored(tmp_path):
    """A `--force` run killed between moving the old output aside and moving the new one in: the next run puts the
    old output back (so it is not lost) before deciding anything."""
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(finished.stdout)
    aside = tmp_path / f".out.{REPLACED_MARK}-{dead_pid}-x1y2"
    (aside / "previous").mkdir(parents=True)
    (aside / "previous" / "marker.txt").write_text("old output")
    (aside / "previous" / "conversion_report.json").write_text("{}")  # an earlier conversion's output
    staging = tmp_path / f".out.{STAGING_MARK}-{dead_pid}-z3"
    staging.mkdir()
    with pytest.raises(OutputDirectoryError, match="holds an earlier conversion; pass --force"):
        convert_tf_checkpoint(source("v2"), tmp_path / "out", family="v2")
    assert (tmp_path / "out" / "marker.txt").read_text() == "old output" and leftovers(tmp_path) == []
    live = tmp_path / f".out.{STAGING_MARK}-{os.getppid()}-w4"  # a live process's staging is left alone
    live.mkdir()
    convert_tf_checkpoint(source("v2"), tmp_path / "out", family="v2", force=True)
    assert leftovers(tmp_path) == [live.name]


# -- transformers-format sources --------------------------------------------------------------------------------------


def test_transformers_roformer_directory_converts_with_equal_outputs(tmp_path):
    torch.manual_seed(0)
    config = transformers.RoFormerConfig(
        vocab_size=76, hidden_size=32, num_hidden_layers=2, num_attention_heads=4, intermediate_size=48
    )
    reference = transformers.RoFormerForMaskedLM(config).eval()
    reference.save_pretrained(tmp_path / "junnyu")
    shutil.copy(source("v1") / "vocab.txt", tmp_path / "junnyu" / "vocab.txt")
    main(["convert", str(tmp_path / "junnyu"), str(tmp_path / "out")])
    converted = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "out").eval()
    assert isinstance(converted, hf_roformer.HfRoFormerForMaskedLM)
    input_ids = torch.randint(1, 76, (2, 9))
    with torch.no_grad():
        torch.testing.assert_close(converted(input_ids).logits, reference(input_ids).logits, atol=1e-5, rtol=0)
    assert (tmp_path / "out" / "README.md").exists()
    assert transformers.AutoTokenizer.from_pretrained(tmp_path / "out").model_max_length == 1536


def test_v2_in_transformers_format_loads_into_v2(tmp_path):
    """A `roformer`-type directory of RoFormer-V2 (keys without biases and norms, written by hand from the V2 fixture)
    converts into the V2 architecture and reproduces bert4keras' outputs."""
    from safetensors.torch import save_file

    tensors = TFCheckpoint(source("v2") / "bert_model.ckpt").read_all()
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
    directory = tmp_path / "roformer_v2_chinese_char_small"
    directory.mkdir()
    save_file(state, directory / "model.safetensors")
    bert = json.loads((source("v2") / "bert_config.json").read_text())
    config = {**bert, "model_type": "roformer", "norm_type": "rms_norm", "use_bias": False}
    (directory / "config.json").write_text(json.dumps(config))
    convert_transformers_roformer(directory, tmp_path / "out")
    model = transformers.AutoModelForMaskedLM.from_pretrained(tmp_path / "out").eval()
    assert model.config.norm_type == "rms_norm"
    data = golden("v2")
    input_ids = torch.tensor(data["token_ids"])
    with torch.no_grad():
        logits = model(
            input_ids, token_type_ids=torch.tensor(data["segment_ids"]), attention_mask=input_ids != 0
        ).logits
    real = input_ids != 0
    torch.testing.assert_close(logits[real], torch.tensor(data["output/mlm_logits"])[real], atol=FP32_FLOOR, rtol=0)
    state.pop("roformer.encoder.layer.1.output.dense.weight")
    save_file(state, directory / "model.safetensors")
    with pytest.raises(ConversionError, match="roformer.encoder.layer.1.output.dense.weight"):
        convert_transformers_roformer(directory, tmp_path / "out2")


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


def test_push_uploads_everything_a_remote_user_needs(converted):
    output = converted("sim")
    api = RecordingApi()
    assert push_folder(output, "someone/roformer-sim", api=api).endswith("/commit/0")
    (_, repo, options), (_, upload_repo, files) = api.calls
    assert repo == upload_repo == "someone/roformer-sim" and options["exist_ok"]
    expected = {
        "model.safetensors", "config.json", "generation_config.json", "README.md", "conversion_report.json",
        "configuration_hf_roformer.py", "modeling_hf_roformer.py", "rotary_hf_roformer.py",
        "linear_attention_hf_roformer.py", "rotary_kernels_hf_roformer.py",
        "sentence_transformers_hf_roformer.py", "tokenization_hf_roformer.py", "tokenizer.json",
        "tokenizer_config.json", "vocab.txt", "modules.json", "sentence_bert_config.json",
        "config_sentence_transformers.json",
    }  # fmt: skip
    assert expected <= set(files), expected - set(files)
    auto_map = json.loads((output / "config.json").read_text())["auto_map"]
    assert auto_map["AutoModelForCausalLM"] == "modeling_hf_roformer.HfRoFormerForCausalLM"


def test_card_metadata_and_snippets(converted):
    output = converted("v2")
    card = (output / "README.md").read_text()
    for needle in ("language: zh", "license: apache-2.0", "pipeline_tag: fill-mask", "hf_roformer", "roformer-v2"):
        assert needle in card
    report = json.loads((output / "conversion_report.json").read_text())
    assert report["source_sha256"]["bert_model.ckpt.index"] in card
    assert report["verified_checksums"] == {"tensors": 14, "index_blocks": 3}
    assert "Integrity: the CRC-32C of 14 tensors and 3 index blocks matched." in card
    assert "Family: v2, decided by --family v2." in card
    snippets = card.split("```python\n")[1:3]
    for snippet in snippets:  # the installed and the remote-code snippet both load the converted model
        code = snippet.split("```")[0]
        namespace = {}
        exec(code.replace(f'"hf-roformer/{report["source"]}"', repr(str(output))), namespace)
        assert isinstance(namespace["model"], torch.nn.Module)


def test_released_cards_are_committed_and_current():
    for checkpoint in RELEASED:
        path = REPOSITORY / "model_cards" / checkpoint.file / "README.md"
        assert path.read_text() == str(render_card(checkpoint)), f"re-render {path}"
