"""The shipped pre-trained checkpoint: it loads through the Auto classes (installed and as remote code), is small, has
its card, and predicts masked characters of held-out People's Daily text better than a unigram guess."""

import collections
import json
from pathlib import Path

import pytest
import torch
from conftest import run_without_the_package
from huggingface_hub import ModelCard
from transformers import AutoModelForMaskedLM, AutoTokenizer

import hf_roformer
from hf_roformer.training.tasks.pretraining.corpus import peoples_daily_documents, split_documents


pytestmark = pytest.mark.releases("remote_code.saving_hf_roformer")  # see setup.cfg


CHECKPOINT = hf_roformer.pretrained_checkpoint()
MAX_BYTES = 25 * 2**20


@pytest.fixture(scope="module")
def model():
    return AutoModelForMaskedLM.from_pretrained(CHECKPOINT).eval()


@pytest.fixture(scope="module")
def tokenizer():
    return AutoTokenizer.from_pretrained(CHECKPOINT)


def test_checkpoint_is_small_and_documented(model, tokenizer):
    assert isinstance(model, hf_roformer.HfRoFormerForMaskedLM)
    assert isinstance(tokenizer, hf_roformer.HfRoFormerTokenizer) and tokenizer.nfkc_normalize
    assert (CHECKPOINT / "model.safetensors").stat().st_size <= MAX_BYTES
    card = ModelCard.load(CHECKPOINT / "README.md")
    assert card.data.pipeline_tag == "fill-mask" and card.data.library_name == "transformers"
    assert "hf-roformer pretrain mlm" in card.text
    with pytest.raises(FileNotFoundError, match="unknown shipped checkpoint .missing.. Valid: roformer-zh-char-small."):
        hf_roformer.pretrained_checkpoint("missing")


def masked_positions(documents, count: int):
    """`count` (document, character index) pairs spread over the documents: Chinese characters only."""
    positions = []
    for document in documents:
        chinese = [i for i, character in enumerate(document) if "\u4e00" <= character <= "\u9fff"]
        if len(document) <= 120 and chinese:
            positions.append((document, chinese[len(chinese) // 2]))
    step = max(1, len(positions) // count)
    return positions[::step][:count]


def test_fill_mask_beats_a_unigram_guess_on_held_out_text(model, tokenizer):
    """Top-5 predictions for one masked character in 200 held-out sentences contain it at least twice as often as the
    five most frequent characters of the training text do (the guess that ignores context). The checkpoint and the
    sentences are fixed, so the rates are too (18.5% against 7.0% when it was shipped)."""
    train, held_out = split_documents(peoples_daily_documents(), 500, seed=0)
    counts = collections.Counter(c for document in train for c in document if "\u4e00" <= c <= "\u9fff")
    unigram_top5 = {character for character, _ in counts.most_common(5)}
    model_hits = unigram_hits = 0
    positions = masked_positions(held_out, 200)
    for document, index in positions:
        masked = document[:index] + tokenizer.mask_token + document[index + 1 :]
        encoded = tokenizer(masked, return_tensors="pt")
        where = encoded["input_ids"][0].tolist().index(tokenizer.mask_token_id)
        with torch.no_grad():
            top5 = model(**encoded).logits[0, where].topk(5).indices.tolist()
        model_hits += document[index] in tokenizer.convert_ids_to_tokens(top5)
        unigram_hits += document[index] in unigram_top5
    model_rate, unigram_rate = model_hits / len(positions), unigram_hits / len(positions)
    print(f"top-5 hit rate: model {model_rate:.1%}, unigram {unigram_rate:.1%} ({len(positions)} held-out masks)")
    assert len(positions) == 200
    assert model_rate >= 2 * unigram_rate, (model_rate, unigram_rate)


REMOTE_SCRIPT = """
import json
import torch
import transformers

folder, text, output = sys.argv[1:]
config = json.load(open(f"{folder}/config.json"))
tokenizer_class = json.load(open(f"{folder}/tokenizer_config.json"))["auto_map"]["AutoTokenizer"][0]
tokenizer = transformers.AutoTokenizer.from_pretrained(folder, trust_remote_code=True)
assert type(tokenizer).__module__.startswith("transformers_modules."), type(tokenizer).__module__
assert type(tokenizer).__name__ == tokenizer_class.rpartition(".")[2]
classes = {}
for auto_class, target in config["auto_map"].items():
    loaded = getattr(transformers, auto_class).from_pretrained(folder, trust_remote_code=True)
    assert type(loaded).__module__.startswith("transformers_modules."), (auto_class, type(loaded).__module__)
    classes[auto_class] = type(loaded).__name__
model = transformers.AutoModelForMaskedLM.from_pretrained(folder, trust_remote_code=True).eval()
with torch.no_grad():
    logits = model(**tokenizer(text, return_tensors="pt")).logits
json.dump({"classes": classes, "logits": logits[0].tolist()}, open(output, "w"))
"""


def test_the_shipped_folder_itself_loads_as_remote_code_without_the_package(model, tokenizer, tmp_path):
    """The shipped folder, not a copy: every Auto class its `auto_map` lists (and the tokenizer's) loads it with
    `trust_remote_code` alone in an interpreter without the package, as transformers' example scripts load it, and
    the masked-LM head predicts what the package's own class predicts."""
    text = "中国人民[MASK]放军"
    run_without_the_package(tmp_path, REMOTE_SCRIPT, CHECKPOINT, text, "loaded.json")
    loaded = json.loads((tmp_path / "loaded.json").read_text())
    auto_map = json.loads((CHECKPOINT / "config.json").read_text())["auto_map"]
    assert loaded["classes"] == {auto_class: target.rpartition(".")[2] for auto_class, target in auto_map.items()}
    with torch.no_grad():
        expected = model(**tokenizer(text, return_tensors="pt")).logits[0]
    torch.testing.assert_close(torch.tensor(loaded["logits"]), expected)


def test_the_shipped_folder_carries_exactly_the_code_its_auto_map_needs():
    """The folder's code files are the modules its `auto_map` names with everything they import relatively (what
    `save_pretrained` copies), each the very file of `remote_code/` (a link to it, so the two cannot differ)."""
    from transformers.dynamic_module_utils import get_relative_import_files

    remote_code = Path(hf_roformer.__file__).parent / "remote_code"
    auto_map = json.loads((CHECKPOINT / "config.json").read_text())["auto_map"]
    tokenizer_map = json.loads((CHECKPOINT / "tokenizer_config.json").read_text())["auto_map"]
    targets = [*auto_map.values(), *(name for name in tokenizer_map["AutoTokenizer"] if name)]
    needed = set()
    for module in {target.rpartition(".")[0] for target in targets}:
        imported = get_relative_import_files(remote_code / f"{module}.py")
        needed |= {module + ".py", *(Path(path).name for path in imported)}
    assert sorted(path.name for path in CHECKPOINT.glob("*.py")) == sorted(needed)
    for name in needed:
        assert (CHECKPOINT / name).resolve() == (remote_code / name).resolve(), name


def test_tokenizer_truncates_at_the_trained_length(tokenizer, model):
    """`model_max_length` is the model's trained length, so `truncation=True` alone cuts a long text to it."""
    assert tokenizer.model_max_length == model.config.max_position_embeddings == 512
    assert len(tokenizer("今" * 2000, truncation=True)["input_ids"]) == 512


def test_shipped_name_resolves_locally_and_other_names_pass_through():
    from hf_roformer.pretrained import resolve_checkpoint

    assert resolve_checkpoint("shipped:roformer-zh-char-small") == str(CHECKPOINT)
    assert resolve_checkpoint("junnyu/roformer_chinese_base") == "junnyu/roformer_chinese_base"
    close_match = r"'roformer-base'. Did you mean 'roformer-zh-char-small'\? Valid: roformer"
    with pytest.raises(FileNotFoundError, match=close_match):
        resolve_checkpoint("shipped:roformer-base")
