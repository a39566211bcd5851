"""What a conversion read, checked, wrote and measured: `conversion_report.json` of every converted directory, read
by its model card and by a later `--force` run (which replaces only a directory that holds one, and in it only the
files the report lists)."""

from dataclasses import dataclass, field


CONVERTER_VERSION = "2"
REPORT_FILE = "conversion_report.json"


@dataclass
class ConversionReport:
    """What a conversion read, checked, wrote and measured (also saved as `conversion_report.json`)."""

    source: str
    family: str
    family_decided_by: str
    tokenizer: str
    source_sha256: dict[str, str]
    converted_tensors: int
    layer_norm_eps: float | None = None
    lm_head_layer_norm_eps: float | None = None
    verified_checksums: dict[str, int] = field(default_factory=dict)
    skipped_training_state: list[str] = field(default_factory=list)
    weights_max_abs_diff: float = 0.0
    reload_max_abs_diff: float = 0.0
    converter_version: str = CONVERTER_VERSION
    files: dict[str, int] = field(default_factory=dict)  # every file written beside the report: path -> bytes


__all__ = ["CONVERTER_VERSION", "REPORT_FILE", "ConversionReport"]
