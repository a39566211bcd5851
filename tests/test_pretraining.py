"""MLM pre-training: Chinese whole-word masking, packing, the People's Daily corpus, and a two-stage run that resumes
from a checkpoint exactly."""

import json
import re
import shutil

import pytest
import torch
from safetensors.torch import load_file
from test_fsdp import corpus, pretrain_arguments  # noqa: F401 (a fixture)

import hf_roformer_cli
from hf_roformer.remote_code.tokenization_hf_roformer import HfRoFormerTokenizer
from hf_roformer.training.tasks.pretraining.corpus import (
    char_vocabulary,
    peoples_daily_documents,
    read_documents,
    split_documents,
    strip_pos_tags,
)
from hf_roformer.training.tasks.pretraining.packing import encode_documents, pack_documents
from hf_roformer.training.tasks.pretraining.task import evaluate_mlm, parse_stages, stage_directory
from hf_roformer.training.tasks.pretraining.whole_word_masking import (
    IGNORE_INDEX,
    ChineseWholeWordMaskCollator,
    jieba_word_spans,
    token_word_ids,
)
from hf_roformer.utils.errors import DataError


@pytest.fixture(scope="module")
def documents():
    return peoples_daily_documents()


@pytest.fixture(scope="module")
def tokenizer(documents):
    return HfRoFormerTokenizer(char_vocabulary(documents[:3000], min_count=2), word_level=False)


@pytest.fixture(scope="module")
def blocks(documents, tokenizer):
    encoded = encode_documents(documents[:1500], tokenizer)
    return pack_documents(encoded, 128, tokenizer.cls_token_id, tokenizer.sep_token_id)


def test_peoples_daily_is_read_without_tags(documents):
    assert len(documents) > 19000
    assert documents[0] == "迈向充满希望的新世纪——一九九八年新年讲话（附图片１张）"
    assert not any("/n" in document or "]nt" in document for document in documents[:2000])
    assert strip_pos_tags("[中央/n  人民/n  广播/vn  电台/n]nt  报道/v") == "中央人民广播电台报道"


def test_validation_split_is_fixed_and_disjoint(documents):
    train, validation = split_documents(documents, 300, seed=0)
    again, validation_again = split_documents(documents, 300, seed=0)
    assert validation == validation_again and train == again
    assert len(train) + len(validation) == len(documents)
    assert split_documents(documents, 300, seed=1)[1] != validation
    with pytest.raises(ValueError, match="validation_size"):
        split_documents(documents[:10], 10)


def test_bad_text_files_are_named(tmp_path):
    (tmp_path / "bad.txt").write_bytes("第一行\n第二行\n".encode() + b"\xff\xfe broken\n")
    with pytest.raises(DataError, match=r"bad.txt: line 3 is not UTF-8"):
        read_documents([tmp_path / "bad.txt"])
    with pytest.raises(DataError, match="missing.txt: cannot read"):
        read_documents([tmp_path / "missing.txt"])
    (tmp_path / "empty.txt").write_text("\n  \n", encoding="utf-8")
    with pytest.raises(DataError, match="no text"):
        read_documents([tmp_path / "empty.txt"])


def test_stage_schedule_is_parsed_and_checked():
    assert [(s.max_length, s.batch_size, s.steps) for s in parse_stages("128:32:1000, 512:8:200")] == [
        (128, 32, 1000),
        (512, 8, 200),
    ]
    for bad in ("128:32", "128:32:x", "2:8:10", "128:0:10"):
        with pytest.raises(ValueError, match="--stages entry"):
            parse_stages(bad)


def test_tokens_get_the_id_of_their_jieba_word(tokenizer):
    text = "我们今天去公园散步"
    spans = jieba_word_spans(text)
    assert [text[start:end] for start, end in spans] == ["我们", "今天", "去", "公园", "散步"]
    offsets = tokenizer(text, return_offsets_mapping=True)["offset_mapping"]
    assert token_word_ids(offsets, spans) == [-1, 0, 0, 1, 1, 2, 3, 3, 4, 4, -1]


def test_packing_never_joins_documents_without_a_separator(tokenizer):
    """Each document uses one character only, so a block's segments between [SEP]s must each be one character."""
    characters = "的一是在了不和有大这"
    documents = [
        character * length for character, length in zip(characters, [5, 40, 3, 90, 17, 1, 64, 8, 30, 2], strict=True)
    ]
    encoded = encode_documents(documents, tokenizer)
    for max_length in (16, 33, 128):
        packed = pack_documents(encoded, max_length, tokenizer.cls_token_id, tokenizer.sep_token_id)
        stream = []
        for ids, words in zip(packed["input_ids"], packed["word_ids"], strict=True):
            assert ids[0] == tokenizer.cls_token_id and words[0] == -1 and len(ids) <= max_length
            stream += ids[1:]
            for segment in tokenizer.decode(ids[1:]).replace(" ", "").split("[SEP]"):
                assert len(set(segment)) <= 1, segment
        assert tokenizer.decode(stream).replace(" ", "").split("[SEP]")[:-1] == documents
    words = pack_documents(encoded, 1000, tokenizer.cls_token_id, tokenizer.sep_token_id)["word_ids"][0]
    separators = [index for index, word in enumerate(words) if word == -1][1:]
    pieces = [set(words[start + 1 : end]) for start, end in zip([0, *separators], separators, strict=False)]
    assert all(not (left & right) for left, right in zip(pieces, pieces[1:], strict=False))


def test_whole_words_are_selected_together_at_the_right_rate(blocks, tokenizer):
    """Over ~1,000 blocks: every token of a selected word is predicted, 15% of word tokens are, split 80/10/10."""
    collator = ChineseWholeWordMaskCollator(tokenizer)
    torch.manual_seed(0)
    selected = maskable = masked = randomized = kept = 0
    multi_character_words = 0
    for ids, words in zip(blocks["input_ids"], blocks["word_ids"], strict=True):
        ids, words = torch.tensor(ids), torch.tensor(words)
        inputs, labels = collator.mask(ids, words)
        chosen = labels != IGNORE_INDEX
        assert torch.equal(labels[chosen], ids[chosen]) and not chosen[words < 0].any()
        for word in torch.unique(words[chosen]).tolist():
            assert chosen[words == word].all(), "a selected word is predicted whole"
            multi_character_words += int((words == word).sum() > 1)
        assert torch.equal(inputs[~chosen], ids[~chosen])
        selected += int(chosen.sum())
        maskable += int((words >= 0).sum())
        masked += int((inputs[chosen] == tokenizer.mask_token_id).sum())
        kept += int((inputs[chosen] == ids[chosen]).sum())
        randomized += int(((inputs[chosen] != ids[chosen]) & (inputs[chosen] != tokenizer.mask_token_id)).sum())
    assert multi_character_words > 1000
    assert selected / maskable == pytest.approx(0.15, abs=0.005)
    assert masked / selected == pytest.approx(0.8, abs=0.01)
    assert randomized / selected == pytest.approx(0.1, abs=0.01)
    assert kept / selected == pytest.approx(0.1, abs=0.01)


def test_collator_pads_and_keeps_premasked_labels(tokenizer):
    collator = ChineseWholeWordMaskCollator(tokenizer)
    batch = collator(
        [
            {"input_ids": [2, 10, 11, 3], "word_ids": [-1, 0, 0, -1]},
            {"input_ids": [2, 12, 4, 3, 14, 3], "labels": [-100, -100, 13, -100, -100, -100]},
        ]
    )
    assert batch["input_ids"].shape == (2, 6) and batch["attention_mask"].tolist()[0] == [1, 1, 1, 1, 0, 0]
    assert batch["labels"][1].tolist() == [-100, -100, 13, -100, -100, -100]
    assert batch["labels"][0, 4:].tolist() == [IGNORE_INDEX, IGNORE_INDEX]


def main(argv: list[str]) -> dict:
    """`hf-roformer pretrain mlm ARGV`, returning the last stage's metrics."""
    return hf_roformer_cli.run(["pretrain", "mlm", *argv])


SMOKE = [
    "--stages", "32:8:6,64:4:4",
    "--max_documents", "300", "--validation_size", "40",
    "--hidden_size", "32", "--num_hidden_layers", "2", "--num_attention_heads", "4", "--intermediate_size", "64",
    "--eval_steps", "2", "--save_steps", "2", "--logging_steps", "1", "--use_cpu", "--seed", "3",
    "--disable_tqdm", "true",
]  # fmt: skip


def test_two_stage_run_resumes_from_its_checkpoint(tmp_path):
    """A run interrupted in stage 2 (after its checkpoint at step 2) and started again skips stage 1, resumes stage 2
    and ends with the weights of the uninterrupted run."""
    output = tmp_path / "run"
    metrics = main(["--output_dir", str(output), *SMOKE])
    assert 0.0 <= metrics["eval_accuracy"] <= 1.0
    stages = json.loads((output / "pretraining_stages.json").read_text())
    assert [stage["max_length"] for stage in stages] == [32, 64]
    first, second = (stage_directory(output, i, parse_stages("32:8:6,64:4:4")[i]) for i in range(2))
    history = json.loads((second / "checkpoint-4" / "trainer_state.json").read_text())["log_history"]
    assert any("eval_accuracy" in entry for entry in history) and any("loss" in entry for entry in history)
    assert json.loads((output / "config.json").read_text())["max_position_embeddings"] == 64
    uninterrupted = load_file(output / "model.safetensors")

    # What a crash in stage 2 after its checkpoint at step 2 leaves: no stage-2 or run marker, no later files.
    shutil.rmtree(second / "final")
    shutil.rmtree(second / "checkpoint-4")
    for marker in (second / "finished.json", output / "finished.json", output / "model.safetensors"):
        marker.unlink()
    assert (first / "finished.json").exists()
    stage_one = (first / "final" / "model.safetensors").stat().st_mtime
    main(["--output_dir", str(output), *SMOKE])
    assert (first / "final" / "model.safetensors").stat().st_mtime == stage_one  # not retrained
    resumed = load_file(output / "model.safetensors")
    assert resumed.keys() == uninterrupted.keys()
    for name, tensor in uninterrupted.items():
        torch.testing.assert_close(resumed[name], tensor, msg=name)


def test_bert_baseline_and_length_evaluation(tmp_path, documents):
    output = tmp_path / "bert"
    main(["--output_dir", str(output), "--architecture", "bert", *SMOKE])
    assert json.loads((output / "config.json").read_text())["model_type"] == "bert"
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    model = AutoModelForMaskedLM.from_pretrained(output)
    tokenizer = AutoTokenizer.from_pretrained(output)
    result = evaluate_mlm(model, tokenizer, documents[-200:], max_length=64, max_blocks=8)
    assert result["blocks"] == 8 and 0.0 <= result["accuracy"] <= 1.0 and result["loss"] > 0


def test_continuing_past_the_trained_length_says_so_once_and_saves_the_new_length(corpus, tmp_path, capsys):  # noqa: F811
    """A checkpoint trained at 32 tokens, pre-trained further in a stage of 64: one note at the start, and the saved
    model records 64 as its trained length, its tokenizer truncating there."""
    output = tmp_path / "out"
    hf_roformer_cli.main(pretrain_arguments(corpus, output, "32:4:1,64:2:1"))
    printed = capsys.readouterr().out
    assert printed.count("note: ") == 1
    assert (
        "note: inputs up to 64 tokens: the checkpoint was trained at 32 tokens. RoPE has no position table, so the "
        "model runs at any length, but distances past 32 are new to it; rope scaling maps them into the trained range"
    ) in printed
    assert json.loads((output / "config.json").read_text())["max_position_embeddings"] == 64
    assert json.loads((output / "tokenizer_config.json").read_text())["model_max_length"] == 64


def test_loss_lines_reach_a_pipe_in_a_short_run_without_logging_steps(tmp_path, capsys):
    """Without --logging_steps, each stage logs its loss at every twentieth of its steps (every step of a 6-step
    stage), as fine-tuning does; a fixed interval of 50 steps printed nothing in a short run."""
    argv = SMOKE[: SMOKE.index("--logging_steps")] + SMOKE[SMOKE.index("--logging_steps") + 2 :]
    hf_roformer_cli.main(["pretrain", "mlm", "--output_dir", str(tmp_path / "run"), *argv])
    lines = capsys.readouterr().out.splitlines()
    for steps in (6, 4):  # the two stages of SMOKE
        loss_line = re.compile(rf"step \d/{steps} \(epoch [\d.]+\): loss \d\.\d{{4}}, .*")
        logged = [line for line in lines if loss_line.fullmatch(line)]
        assert len(logged) == steps, lines
