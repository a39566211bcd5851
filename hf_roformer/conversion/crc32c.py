"""CRC-32C (Castagnoli), the checksum TensorFlow stores for every tensor and every index block of a checkpoint.

`crc32c(data)` uses the `google-crc32c` or `crc32c` package when one is installed (hardware-accelerated C), and
otherwise a NumPy implementation that is exact and fast enough for whole checkpoints: the data is cut into many equal
lanes whose CRCs are computed side by side, four bytes per step (slicing-by-4 tables), and combined with the linear
"advance over n zero bytes" operators of the CRC. `pip install "hf_roformer[conversion]"` installs `google-crc32c`.

TensorFlow stores checksums masked (`masked_crc32c`), as LevelDB does, so that a CRC of data containing CRCs is not
degenerate.
"""

import numpy as np


try:
    import google_crc32c
except ImportError:  # optional: the NumPy implementation below is exact, only slower
    google_crc32c = None
try:
    import crc32c as crc32c_package
except ImportError:
    crc32c_package = None


POLYNOMIAL = 0x82F63B78  # reflected Castagnoli polynomial
MASK_DELTA = 0xA282EAD8
LANES = 1 << 14  # parallel lanes of the NumPy implementation
SEQUENTIAL_BELOW = 256  # bytes handled one at a time in Python
CHUNK_BYTES = 1 << 20


def _byte_table() -> np.ndarray:
    table = np.arange(256, dtype=np.uint32)
    for _ in range(8):
        table = np.where(table & 1, (table >> 1) ^ np.uint32(POLYNOMIAL), table >> 1).astype(np.uint32)
    return table


TABLE = _byte_table()
# SLICE[k][b]: the register after byte b followed by k zero bytes (slicing-by-4).
SLICE = [TABLE]
for _ in range(3):
    SLICE.append((SLICE[-1] >> 8) ^ TABLE[SLICE[-1] & 0xFF])
SLICE = np.stack(SLICE)


class _ZeroAdvance:
    """The linear map of the CRC register over `n` zero bytes, applied to many registers at once through four
    256-entry tables (one per register byte)."""

    def __init__(self, columns: np.ndarray):
        # columns[bit] = image of the register with only `bit` set
        bits = (np.arange(256, dtype=np.uint32)[:, None] >> np.arange(8, dtype=np.uint32)) & 1
        self.tables = np.stack(
            [np.bitwise_xor.reduce(np.where(bits == 1, columns[8 * k : 8 * k + 8], 0), axis=1) for k in range(4)]
        ).astype(np.uint32)

    def __call__(self, registers: np.ndarray) -> np.ndarray:
        registers = np.asarray(registers, dtype=np.uint32)
        return (
            self.tables[0][registers & 0xFF]
            ^ self.tables[1][(registers >> 8) & 0xFF]
            ^ self.tables[2][(registers >> 16) & 0xFF]
            ^ self.tables[3][registers >> 24]
        )

    def then(self, other: "_ZeroAdvance") -> "_ZeroAdvance":
        """This advance followed by `other`."""
        return _ZeroAdvance(other(self(np.uint32(1) << np.arange(32, dtype=np.uint32))))


_ONE_ZERO_BYTE = _ZeroAdvance((lambda x: (x >> 8) ^ TABLE[x & 0xFF])(np.uint32(1) << np.arange(32, dtype=np.uint32)))
_POWERS_OF_TWO = [_ONE_ZERO_BYTE]  # advance over 2**k zero bytes


def _power_of_two_advance(exponent: int) -> _ZeroAdvance:
    """The advance over 2**exponent zero bytes (cached)."""
    while len(_POWERS_OF_TWO) <= exponent:
        _POWERS_OF_TWO.append(_POWERS_OF_TWO[-1].then(_POWERS_OF_TWO[-1]))
    return _POWERS_OF_TWO[exponent]


def _advance(register: int, length: int) -> int:
    """A register advanced over `length` zero bytes (one cached power of two per set bit of `length`)."""
    for exponent in range(length.bit_length()):
        if length >> exponent & 1:
            register = int(_power_of_two_advance(exponent)(np.uint32(register)))
    return register


def _register_sequential(data: np.ndarray, register: int = 0) -> int:
    for byte in data.tolist():
        register = (register >> 8) ^ int(TABLE[(register ^ byte) & 0xFF])
    return register


def _register(data: np.ndarray) -> int:
    """The CRC register after `data` from a zero register (no initial value, no final xor): linear in the data.

    The longest prefix of `lanes * 2**m` words is computed lane by lane in parallel and combined pairwise; the rest
    recursively: register(A + B) = advance_|B|(register(A)) ^ register(B)."""
    if data.size < SEQUENTIAL_BELOW:
        return _register_sequential(data)
    lanes = 1 << min(LANES.bit_length() - 1, (data.size // 64).bit_length() - 1)
    words_exponent = (data.size // (4 * lanes)).bit_length() - 1
    words_per_lane = 1 << words_exponent
    prefix = lanes * words_per_lane * 4
    # (word, lane) layout so each step reads a contiguous row
    words = np.ascontiguousarray(data[:prefix].view("<u4").reshape(lanes, words_per_lane).T)
    registers = np.zeros(lanes, dtype="<u4")
    register_bytes = registers.view(np.uint8).reshape(lanes, 4)  # little-endian: byte 0 is the low byte
    low, mid_low, mid_high, high = (SLICE[3 - k] for k in range(4))
    for row in words:
        registers ^= row
        registers[:] = (
            low[register_bytes[:, 0]]
            ^ mid_low[register_bytes[:, 1]]
            ^ mid_high[register_bytes[:, 2]]
            ^ high[register_bytes[:, 3]]
        )
    exponent = words_exponent + 2  # lane length in bytes: 4 * 2**words_exponent
    combined = registers
    while combined.size > 1:
        combined = _power_of_two_advance(exponent)(combined[0::2]) ^ combined[1::2]
        exponent += 1
    register = int(combined[0])
    tail = data[prefix:]
    if tail.size:
        register = _advance(register, tail.size) ^ _register(tail)
    return register


def crc32c_numpy(data) -> int:
    """CRC-32C of bytes-like `data` in NumPy (exact; used when no CRC-32C package is installed)."""
    array = np.frombuffer(data, dtype=np.uint8)
    return _advance(0xFFFFFFFF, array.size) ^ _register(array) ^ 0xFFFFFFFF


def _google_crc32c(data) -> int:
    """google-crc32c takes only `bytes`: other buffers are fed in 1 MB copies, which stay in cache."""
    if isinstance(data, bytes):
        return google_crc32c.value(data)
    view = memoryview(data).cast("B")
    checksum = google_crc32c.Checksum()
    for start in range(0, len(view), CHUNK_BYTES):
        checksum.update(view[start : start + CHUNK_BYTES].tobytes())
    return int.from_bytes(checksum.digest(), "big")


def crc32c(data) -> int:
    """CRC-32C of bytes-like `data` (bytes, memoryview, mmap slice)."""
    if google_crc32c is not None:
        return _google_crc32c(data)
    if crc32c_package is not None:
        return crc32c_package.crc32c(data)
    return crc32c_numpy(data)


def masked_crc32c(data) -> int:
    """The CRC as TensorFlow (and LevelDB) store it: rotated right by 15 bits plus a constant."""
    crc = crc32c(data)
    return (((crc >> 15) | (crc << 17)) + MASK_DELTA) & 0xFFFFFFFF


def implementation() -> str:
    """Which implementation `crc32c` uses."""
    if google_crc32c is not None:
        return f"google-crc32c ({google_crc32c.implementation})"
    if crc32c_package is not None:
        return "crc32c"
    return "numpy"


__all__ = ["crc32c", "crc32c_numpy", "implementation", "masked_crc32c"]
