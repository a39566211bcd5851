"""Optional features and the extras that install them (setup.cfg's `extras_require`, checked against this table by
the tests): a feature whose packages are missing stops with one line naming the extra, before any work."""

import importlib.util

from .errors import MissingExtraError


# extra -> (import name, distribution name) of each package a feature needs at run time.
EXTRAS = {
    "training": (
        ("accelerate", "accelerate"),
        ("datasets", "datasets"),
        ("sklearn", "scikit-learn"),
        ("scipy", "scipy"),
        ("jieba", "jieba"),
        ("seqeval", "seqeval"),
    ),
    "demo": (
        ("accelerate", "accelerate"),
        ("datasets", "datasets"),
        ("sklearn", "scikit-learn"),
        ("scipy", "scipy"),
        ("snownlp", "snownlp"),
    ),
    "plot": (("matplotlib", "matplotlib"),),
    "jieba": (("jieba", "jieba"),),
    "onnx": (("onnx", "onnx"), ("onnxscript", "onnxscript"), ("onnxruntime", "onnxruntime")),
}


def missing_packages(extra: str) -> list[str]:
    """The distribution names of `extra`'s packages that cannot be imported (found without importing them)."""
    return [distribution for module, distribution in EXTRAS[extra] if importlib.util.find_spec(module) is None]


def require_extra(extra: str, feature: str) -> None:
    """Raise `MissingExtraError` naming `extra` (and the missing packages) when `feature` cannot run for want of it."""
    missing = missing_packages(extra)
    if missing:
        raise MissingExtraError(
            f'{feature} needs the `{extra}` extra (missing: {", ".join(missing)}): pip install "hf_roformer[{extra}]"'
        )


__all__ = ["EXTRAS", "missing_packages", "require_extra"]
