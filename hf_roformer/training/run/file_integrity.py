"""Whether a file a resume reads is whole: a process killed while saving leaves a cut safetensors or torch file."""

import json
import os
import struct
import zipfile
from pathlib import Path


def safetensors_problem(path: Path) -> str | None:
    """Why a safetensors file is not whole (its header must parse and its data end where the file ends), or None."""
    try:
        with open(path, "rb") as handle:
            size = os.fstat(handle.fileno()).st_size
            (header_size,) = struct.unpack("<Q", handle.read(8))
            if header_size > size - 8:
                return f"{path.name} is truncated"
            header = json.loads(handle.read(header_size))
    except (OSError, struct.error, ValueError) as error:
        return f"{path.name} is unreadable ({error})"
    ends = [entry["data_offsets"][1] for name, entry in header.items() if name != "__metadata__"]
    if 8 + header_size + max(ends, default=0) != size:
        return f"{path.name} is truncated"
    return None


def torch_file_problem(path: Path) -> str | None:
    """Why a `torch.save` file (a zip archive) is not whole, or None: a truncated archive has no central directory."""
    try:
        with zipfile.ZipFile(path) as archive:
            archive.infolist()
    except (OSError, zipfile.BadZipFile) as error:
        return f"{path.name} is unreadable ({error})"
    return None
