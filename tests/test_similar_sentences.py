"""Similar-sentence generation with a converted RoFormer-Sim (the original's `gen_synonyms`): greedy generation equal
to bert4keras', batched equal to one at a time, all candidates of a text from one `generate` call, ranking by the
sentence encoder's cosine similarity, and the `hf-roformer similar` command."""

import json
from pathlib import Path

import pytest
import torch
import transformers
from conftest import cli_failure

from hf_roformer.apps.similar_sentences import generate_candidates, generate_similar, sentence_vectors
from hf_roformer.conversion.convert import convert_tf_checkpoint
from hf_roformer_cli import main


pytestmark = pytest.mark.releases("remote_code.modeling_hf_roformer")  # see setup.cfg


FIXTURES = Path(__file__).resolve().parent / "fixtures" / "original_checkpoints"
ERA = "bert4keras-0.11.5"
TEXTS = ["今天天气很好", "我们在北京测试roformer！", "明天天气不好。"]


@pytest.fixture(scope="module")
def sim(tmp_path_factory):
    """The Sim fixture of bert4keras 0.11.5 converted: (directory, model, tokenizer)."""
    output = tmp_path_factory.mktemp("sim") / "sim"
    convert_tf_checkpoint(FIXTURES / ERA / "sim", output, family="sim", layer_norm_eps=1e-7)
    model = transformers.AutoModelForCausalLM.from_pretrained(output).eval()
    return output, model, transformers.AutoTokenizer.from_pretrained(output)


def test_greedy_paraphrase_equals_the_original(sim):
    """Greedy generation of the target segment after `[CLS] text [SEP]` gives the tokens bert4keras' decoding loop
    gave (it re-encodes the whole sequence every step; here the UniLM cache is used)."""
    _, model, tokenizer = sim
    original = json.loads((FIXTURES / ERA / "sim" / "golden_text.json").read_text(encoding="utf-8"))
    for case in original["paraphrases"]:
        inputs = tokenizer(case["text"], return_tensors="pt")
        steps = len(case["output_ids"])
        output = model.generate(
            inputs["input_ids"], do_sample=False, max_new_tokens=steps, eos_token_id=tokenizer.sep_token_id
        )
        assert output[0, inputs["input_ids"].shape[1] :].tolist() == case["output_ids"]
        greedy = generate_candidates(model, tokenizer, [case["text"]], n=1, do_sample=False, max_new_tokens=steps)
        assert greedy == [[case["decoded"]]]  # decoded as the original decodes (no spaces between characters)


def test_batched_generation_equals_one_text_at_a_time(sim):
    """Under greedy decoding, texts of different lengths generated in one left-padded batch give what each gives
    alone."""
    _, model, tokenizer = sim
    batched = generate_candidates(model, tokenizer, TEXTS, n=2, do_sample=False, max_new_tokens=8)
    alone = [generate_candidates(model, tokenizer, [text], n=2, do_sample=False, max_new_tokens=8)[0] for text in TEXTS]
    assert batched == alone
    assert all(len(candidates) == 2 and candidates[0] == candidates[1] for candidates in batched)


def test_fifty_candidates_come_from_one_generate_call(sim, monkeypatch):
    """`n` candidates per text, for every text, from a single batched `generate` call; ranked best first by the cosine
    similarity of the Sim sentence vectors, without duplicates or the source."""
    _, model, tokenizer = sim
    calls = []
    generate = model.generate

    def counting_generate(*args, **kwargs):
        sequences = generate(*args, **kwargs)
        calls.append(sequences.shape[0])
        return sequences

    monkeypatch.setattr(model, "generate", counting_generate)
    torch.manual_seed(0)
    results = generate_similar(model, tokenizer, TEXTS[0], n=50, max_new_tokens=8)
    assert calls == [50]
    texts = [result.text for result in results]
    assert len(texts) == len(set(texts)) and TEXTS[0] not in texts and len(texts) > 10
    similarities = [result.similarity for result in results]
    assert similarities == sorted(similarities, reverse=True)
    vectors = sentence_vectors(model.roformer, tokenizer, [TEXTS[0], *texts])
    torch.testing.assert_close(torch.tensor(similarities), vectors[1:] @ vectors[0], atol=1e-6, rtol=0)

    calls.clear()
    torch.manual_seed(0)
    batch = generate_similar(model, tokenizer, TEXTS, n=20, k=5, max_new_tokens=8)
    assert calls == [60] and [len(results) for results in batch] == [5, 5, 5]


def test_ranking_needs_a_pooler(sim, tmp_path):
    _, model, tokenizer = sim
    gpt = tmp_path / "gpt"
    convert_tf_checkpoint(FIXTURES / ERA / "gpt", gpt, family="gpt", layer_norm_eps=1e-7)
    without_pooler = transformers.AutoModelForCausalLM.from_pretrained(gpt)
    with pytest.raises(ValueError, match="ranking needs a model with a pooler"):
        generate_similar(without_pooler, tokenizer, TEXTS[0], n=2)


def test_similar_command(sim, capsys):
    directory, _, _ = sim
    main(["similar", TEXTS[0], TEXTS[1], "-n", "6", "-k", "3", "--model_name_or_path", str(directory), "--seed", "0"])
    lines = capsys.readouterr().out.splitlines()
    assert lines[0] == TEXTS[0]
    second = lines.index(TEXTS[1])
    assert 1 <= second - 1 <= 3 and 1 <= len(lines) - second - 1 <= 3
    for line in lines[1:second] + lines[second + 1 :]:
        similarity, text = line.split("\t")
        assert -1.0 <= float(similarity) <= 1.0 and text
    main(["similar", TEXTS[0], "--num-candidates", "2", "--model-name-or-path", str(directory), "--greedy"])
    assert capsys.readouterr().out.splitlines()[0] == TEXTS[0]
    assert cli_failure(capsys, ["similar", TEXTS[0], "--model_name_or_path", str(directory / "nope")]) == (
        f"error: --model_name_or_path {directory / 'nope'}: no such directory\n"
    )
