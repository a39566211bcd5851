"""Read TensorFlow 1 name-based checkpoints (`model.ckpt.index` + `model.ckpt.data-00000-of-00001`) without TensorFlow.

The `.index` file is a LevelDB-style sorted table: data blocks of prefix-compressed `key -> value` entries, an index
block pointing at them, a metaindex block, and a 48-byte footer ending in a magic number. Every block is followed by a
type byte and the masked CRC-32C of its contents and type. Its first key, "", holds a `BundleHeaderProto`; every other
key is a tensor name whose value is a `BundleEntryProto` (dtype, shape, shard, offset, size, masked CRC-32C of the
tensor's bytes). Tensors are raw little-endian bytes in the data shards.

Written by hand because the only library that reads the format is TensorFlow itself. The reader trusts nothing: every
length, offset and count is checked against the file before use, the blocks must tile the index file, every block's
checksum is verified when the index is opened and every tensor's checksum when it is read, and any malformation or
mismatch raises `CheckpointError` naming the file (and the tensor).
"""

import mmap
import os
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch

from ..utils.errors import HfRoFormerError
from .crc32c import masked_crc32c


TABLE_MAGIC = 0xDB4775248B80FB57
FOOTER_LENGTH = 48
BLOCK_TRAILER_LENGTH = 5
# TensorFlow DataType enum values -> numpy dtypes (bfloat16 is read as raw 16-bit words, see `read`).
DTYPES = {
    1: np.float32,
    2: np.float64,
    3: np.int32,
    4: np.uint8,
    5: np.int16,
    6: np.int8,
    9: np.int64,
    10: np.bool_,
    14: np.uint16,  # bfloat16
    19: np.float16,
}
BFLOAT16 = 14


class CheckpointError(HfRoFormerError, ValueError):
    """A checkpoint file that is missing, truncated, malformed or uses a feature this reader does not support."""


@dataclass(frozen=True)
class TensorEntry:
    """Where one tensor lives: dtype enum, shape, shard, byte offset, byte size and masked CRC-32C of its bytes."""

    dtype: int
    shape: tuple[int, ...]
    shard: int
    offset: int
    size: int
    crc32c: int


class _Buffer:
    """Bounds-checked reading of a byte string; every failure is a `CheckpointError` naming `source`."""

    def __init__(self, data: bytes, source: str, start: int = 0, end: int | None = None):
        self.data, self.source = data, source
        self.position = start
        self.end = len(data) if end is None else end
        if not 0 <= start <= self.end <= len(data):
            raise CheckpointError(f"{source}: a length or offset points outside the file")

    def at_end(self) -> bool:
        return self.position >= self.end

    def take(self, count: int) -> bytes:
        if count < 0 or self.position + count > self.end:
            raise CheckpointError(f"{self.source}: truncated (needed {count} bytes at offset {self.position})")
        chunk = self.data[self.position : self.position + count]
        self.position += count
        return chunk

    def varint(self) -> int:
        value = 0
        for shift in range(0, 70, 7):
            byte = self.take(1)[0]
            value |= (byte & 0x7F) << shift
            if not byte & 0x80:
                return value
        raise CheckpointError(f"{self.source}: malformed varint at offset {self.position}")


def _parse_block_handle(buffer: _Buffer) -> tuple[int, int]:
    return buffer.varint(), buffer.varint()


def _read_block(data: bytes, offset: int, size: int, source: str) -> bytes:
    """The contents of one table block, after checking its bounds, its checksum and its compression type."""
    if offset < 0 or size < 0 or offset + size + BLOCK_TRAILER_LENGTH > len(data):
        raise CheckpointError(f"{source}: a block handle points outside the file (offset {offset}, size {size})")
    (stored,) = struct.unpack_from("<I", data, offset + size + 1)
    if masked_crc32c(data[offset : offset + size + 1]) != stored:
        raise CheckpointError(f"{source}: the block at byte {offset} fails its checksum: the file is corrupt")
    compression = data[offset + size]
    if compression != 0:
        raise CheckpointError(f"{source}: compressed blocks (type {compression}) are not supported")
    return data[offset : offset + size]


def _block_entries(block: bytes, source: str) -> list[tuple[bytes, bytes]]:
    """Decode the prefix-compressed `(key, value)` entries of a block."""
    if len(block) < 4:
        raise CheckpointError(f"{source}: block too short")
    (restarts,) = struct.unpack_from("<I", block, len(block) - 4)
    entries_end = len(block) - 4 * (restarts + 1)
    if restarts == 0 or entries_end < 0:
        raise CheckpointError(f"{source}: malformed block (restart count {restarts})")
    buffer = _Buffer(block, source, 0, entries_end)
    entries, key = [], b""
    while not buffer.at_end():
        shared, unshared, value_length = buffer.varint(), buffer.varint(), buffer.varint()
        if shared > len(key):
            raise CheckpointError(f"{source}: malformed block entry (shares {shared} bytes of a {len(key)}-byte key)")
        key = key[:shared] + buffer.take(unshared)
        entries.append((key, buffer.take(value_length)))
    return entries


def _message_fields(payload: bytes, source: str) -> list[tuple[int, int, object]]:
    """Decode a protobuf message into `(field number, wire type, value)`; nested messages stay bytes."""
    buffer = _Buffer(payload, source)
    fields = []
    while not buffer.at_end():
        tag = buffer.varint()
        number, wire_type = tag >> 3, tag & 7
        if wire_type == 0:
            value = buffer.varint()
        elif wire_type == 1:
            value = struct.unpack("<Q", buffer.take(8))[0]
        elif wire_type == 2:
            value = buffer.take(buffer.varint())
        elif wire_type == 5:
            value = struct.unpack("<I", buffer.take(4))[0]
        else:
            raise CheckpointError(f"{source}: unsupported protobuf wire type {wire_type}")
        fields.append((number, wire_type, value))
    return fields


def _signed64(value: int) -> int:
    return value - (1 << 64) if value >= 1 << 63 else value


def _parse_shape(payload: bytes, source: str) -> tuple[int, ...]:
    dims = []
    for number, wire_type, value in _message_fields(payload, source):
        if number == 2 and wire_type == 2:
            size = 0
            for dim_number, dim_wire, dim_value in _message_fields(value, source):
                if dim_number == 1 and dim_wire == 0:
                    size = _signed64(dim_value)
            if size < 0:
                raise CheckpointError(f"{source}: negative dimension {size}")
            dims.append(size)
        elif number == 3 and value:
            raise CheckpointError(f"{source}: tensors of unknown rank are not supported")
    return tuple(dims)


def _parse_entry(name: str, payload: bytes, source: str) -> TensorEntry:
    dtype = shard = offset = size = 0
    crc = None
    shape: tuple[int, ...] = ()
    for number, wire_type, value in _message_fields(payload, source):
        if number == 1 and wire_type == 0:
            dtype = value
        elif number == 2 and wire_type == 2:
            shape = _parse_shape(value, source)
        elif number == 3 and wire_type == 0:
            shard = value
        elif number == 4 and wire_type == 0:
            offset = _signed64(value)
        elif number == 5 and wire_type == 0:
            size = _signed64(value)
        elif number == 6 and wire_type == 5:
            crc = value
        elif number == 7:
            raise CheckpointError(f"{source}: tensor {name!r} is stored in slices, which are not supported")
    if dtype not in DTYPES:
        raise CheckpointError(f"{source}: tensor {name!r} has an unsupported dtype (TensorFlow enum {dtype})")
    if offset < 0 or size < 0:
        raise CheckpointError(f"{source}: tensor {name!r} has a negative offset or size")
    count = int(np.prod(shape, dtype=np.float64)) if shape else 1
    if count * np.dtype(DTYPES[dtype]).itemsize != size:
        raise CheckpointError(
            f"{source}: tensor {name!r} of shape {shape} needs {count * np.dtype(DTYPES[dtype]).itemsize} bytes, "
            f"the index says {size}"
        )
    if crc is None:
        raise CheckpointError(f"{source}: tensor {name!r} has no checksum, so its bytes cannot be verified")
    return TensorEntry(dtype, shape, shard, offset, size, crc)


class TFCheckpoint:
    """A TensorFlow 1 checkpoint read without TensorFlow: names, shapes and verified tensors.

    `prefix` is the checkpoint path as TensorFlow names it (`.../bert_model.ckpt`); a path to the `.index` file works
    too. Opening checks the whole index (structure, block checksums, that every tensor lies inside its data shard);
    `read` checks each tensor's checksum. Data shards are memory-mapped, not loaded.
    """

    def __init__(self, prefix: str | Path):
        prefix = str(prefix)
        if prefix.endswith(".index"):
            prefix = prefix[: -len(".index")]
        self.prefix = prefix
        self.index_path = Path(prefix + ".index")
        source = str(self.index_path)
        try:
            data = self.index_path.read_bytes()
        except OSError as error:
            raise CheckpointError(f"{source}: cannot read ({error.strerror or error})") from None
        if len(data) < FOOTER_LENGTH:
            raise CheckpointError(f"{source}: truncated (shorter than the {FOOTER_LENGTH}-byte footer)")
        (magic,) = struct.unpack_from("<Q", data, len(data) - 8)
        if magic != TABLE_MAGIC:
            raise CheckpointError(f"{source}: not a TensorFlow checkpoint index (wrong magic number)")
        footer_start = len(data) - FOOTER_LENGTH
        footer = _Buffer(data, source, footer_start, len(data) - 8)
        meta_handle = _parse_block_handle(footer)
        index_handle = _parse_block_handle(footer)
        if any(data[footer.position : len(data) - 8]):
            raise CheckpointError(f"{source}: malformed footer (non-zero padding): the file is corrupt")
        _read_block(data, *meta_handle, source)  # unused, but verified like every other block
        self.num_shards = 1
        self.entries: dict[str, TensorEntry] = {}
        handles = [meta_handle, index_handle]
        for _, handle in _block_entries(_read_block(data, *index_handle, source), source):
            block_offset, block_size = _parse_block_handle(_Buffer(handle, source))
            handles.append((block_offset, block_size))
            for key, value in _block_entries(_read_block(data, block_offset, block_size, source), source):
                if key == b"":
                    self._read_header(value, source)
                    continue
                try:
                    name = key.decode("utf-8")
                except UnicodeDecodeError:
                    raise CheckpointError(f"{source}: a tensor name is not UTF-8") from None
                self.entries[name] = _parse_entry(name, value, source)
        self._check_blocks_tile(handles, footer_start, source)
        self.index_blocks = len(handles)
        self._shards: dict[int, tuple[memoryview | bytes, str]] = {}
        self._check_shard_sizes()

    @staticmethod
    def _check_blocks_tile(handles: list[tuple[int, int]], footer_start: int, source: str) -> None:
        """Every byte before the footer belongs to exactly one block (so every byte is under some checksum)."""
        position = 0
        for offset, size in sorted(handles):
            if offset != position:
                raise CheckpointError(f"{source}: the blocks do not tile the file (gap or overlap at byte {position})")
            position = offset + size + BLOCK_TRAILER_LENGTH
        if position != footer_start:
            raise CheckpointError(f"{source}: the blocks do not tile the file (they end at byte {position})")

    def _read_header(self, payload: bytes, source: str) -> None:
        for number, wire_type, value in _message_fields(payload, source):
            if number == 1 and wire_type == 0:
                self.num_shards = value
            elif number == 2 and wire_type == 0 and value != 0:
                raise CheckpointError(f"{source}: big-endian checkpoints are not supported")
        if not 1 <= self.num_shards <= 100000:
            raise CheckpointError(f"{source}: implausible shard count {self.num_shards}")

    def shard_path(self, shard: int) -> str:
        """Path of data shard `shard`."""
        return f"{self.prefix}.data-{shard:05d}-of-{self.num_shards:05d}"

    def _check_shard_sizes(self) -> None:
        """Every tensor lies inside its data shard (checked from the file sizes, before anything is read)."""
        sizes = {}
        for name in self.names():
            entry = self.entries[name]
            if not 0 <= entry.shard < self.num_shards:
                raise CheckpointError(f"{self.index_path}: shard {entry.shard} outside 0..{self.num_shards - 1}")
            path = self.shard_path(entry.shard)
            if entry.shard not in sizes:
                try:
                    sizes[entry.shard] = os.stat(path).st_size
                except OSError as error:
                    raise CheckpointError(f"{path}: cannot read ({error.strerror or error})") from None
            if entry.offset + entry.size > sizes[entry.shard]:
                raise CheckpointError(
                    f"{path}: truncated (tensor {name!r} ends at byte {entry.offset + entry.size}, "
                    f"the file has {sizes[entry.shard]})"
                )

    def names(self) -> list[str]:
        """Tensor names, sorted."""
        return sorted(self.entries)

    def shape(self, name: str) -> tuple[int, ...]:
        """Shape of a tensor."""
        return self._entry(name).shape

    def nbytes(self, names=None) -> int:
        """Bytes the tensors `names` (default: all) occupy."""
        return sum(self._entry(name).size for name in (self.names() if names is None else names))

    def _entry(self, name: str) -> TensorEntry:
        if name not in self.entries:
            raise CheckpointError(f"{self.index_path}: no tensor named {name!r}")
        return self.entries[name]

    def _shard(self, shard: int) -> tuple[memoryview | bytes, str]:
        path = self.shard_path(shard)
        if shard not in self._shards:
            try:
                with open(path, "rb") as handle:
                    size = os.fstat(handle.fileno()).st_size
                    data = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) if size else b""
            except OSError as error:
                raise CheckpointError(f"{path}: cannot read ({error.strerror or error})") from None
            self._shards[shard] = (data, path)
        return self._shards[shard]

    def read(self, name: str) -> torch.Tensor:
        """The tensor `name`, as a torch tensor of its stored dtype, after checking its bytes against the index's
        checksum."""
        entry = self._entry(name)
        dtype = np.dtype(DTYPES[entry.dtype])
        count = int(np.prod(entry.shape, dtype=np.float64)) if entry.shape else 1
        data, path = self._shard(entry.shard)
        if entry.offset + entry.size > len(data):
            raise CheckpointError(f"{path}: truncated (tensor {name!r} ends at byte {entry.offset + entry.size})")
        raw = memoryview(data)[entry.offset : entry.offset + entry.size]
        if masked_crc32c(raw) != entry.crc32c:
            raise CheckpointError(
                f"{path}: tensor {name!r} fails its checksum (the bytes at {entry.offset}..{entry.offset + entry.size} "
                "differ from what the index recorded): the file is corrupt"
            )
        array = np.frombuffer(raw, dtype=dtype.newbyteorder("<"), count=count)
        tensor = torch.from_numpy(array.astype(dtype.newbyteorder("="), copy=True).reshape(entry.shape))
        del raw, array
        if entry.dtype == BFLOAT16:
            tensor = tensor.view(torch.bfloat16)
        return tensor

    def read_all(self) -> dict[str, torch.Tensor]:
        """Every tensor, by name."""
        return {name: self.read(name) for name in self.names()}

    def close(self) -> None:
        """Unmap the data shards."""
        for data, _ in self._shards.values():
            if isinstance(data, mmap.mmap):
                try:
                    data.close()
                except BufferError:  # a view is still referenced (e.g. by a traceback): unmapped when collected
                    pass
        self._shards.clear()

    def __enter__(self) -> "TFCheckpoint":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


__all__ = ["CheckpointError", "TFCheckpoint", "TensorEntry"]
