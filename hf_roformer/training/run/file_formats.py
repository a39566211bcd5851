"""The file formats fine-tuning data comes in, each parsed once and strictly, for every task that reads it.

- Text: UTF-8, a byte-order mark at the start only; lines end with LF, CRLF or CR (all read as LF).
- JSON: one document, or JSON lines (one object a record; a record may span lines, as pretty-printed objects do, and
  is named by the line it starts on). NaN and Infinity, which are not JSON, are refused, as are numbers too large
  for a float.
- CSV and TSV: a header, then records with exactly the header's number of fields (CSV quoting as Python's `csv`
  writes it; TSV without quoting, as GLUE's files are); a record that repeats the header is refused.
- Values, by one rule per type in every reader: an integer (a class index, a position) is a JSON integer or a cell of
  digits, never a boolean or `1.5`; a score is a JSON number or a plain decimal cell (`3.8`, `-1`, `2e-1`), finite,
  never `1_0`, `nan` or a boolean.

Every problem is a `DataError` naming the file and the line (or the JSON path) and the value. Written by hand because
`datasets`' readers change what they read (pandas' index column, `float("1_0")`) and can take the process down (a
JSON file holding `null`), and Python's `json` and `csv` name no file and no record.
"""

import csv
import io
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from ...utils.errors import DataError


BYTE_ORDER_MARK = "\ufeff"
INTEGER = re.compile(r"[+-]?\d+")
DECIMAL = re.compile(r"[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?")


def read_text(path: Path) -> str:
    """The text of a UTF-8 file, without its byte-order mark and with every line ending as LF; `DataError` names a
    file that is missing, unreadable or not UTF-8 (with the line of the first bad byte), or that holds a byte-order
    mark after its start (two files joined)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise DataError(f"{path}: a directory, not a file") from None
    except OSError as error:
        raise DataError(f"{path}: cannot read ({error.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        line = raw[: error.start].replace(b"\r\n", b"\n").replace(b"\r", b"\n").count(b"\n") + 1
        raise DataError(f"{path}:{line}: not UTF-8 text ({error.reason})") from None
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    mark = text.find(BYTE_ORDER_MARK)
    if mark >= 0:
        line = text.count("\n", 0, mark) + 1
        raise DataError(f"{path}:{line}: a byte-order mark (U+FEFF) inside the file; it may start a file only")
    return text


def non_blank_lines(path: Path) -> list[tuple[int, str]]:
    """(line number, text) of the non-blank lines of a text file (`read_text`). Lines end at line endings only:
    U+2028, U+0085 and the other characters `str.splitlines` would also break at are valid inside JSON strings, as
    `json.dumps(..., ensure_ascii=False)` writes them, and inside TSV fields."""
    return [(number, line) for number, line in enumerate(read_text(path).split("\n"), start=1) if line.strip(" \t")]


class _NotFinite:
    """What the JSON decoder gives for NaN, Infinity and numbers beyond a float, to be refused with their place."""

    def __init__(self, text: str):
        self.text = text


def _number(text: str):
    value = float(text)
    return value if math.isfinite(value) else _NotFinite(text)


DECODER = json.JSONDecoder(parse_constant=_NotFinite, parse_float=_number)


def _first_not_finite(value, at: str = "") -> tuple[str, str] | None:
    """(JSON path, text) of the first NaN, Infinity or overflowing number inside `value`, or None."""
    if isinstance(value, _NotFinite):
        return at or "the value", value.text
    if isinstance(value, dict):
        items = ((f"{at}.{key}" if at else str(key), item) for key, item in value.items())
    elif isinstance(value, list):
        items = ((f"{at}[{index}]", item) for index, item in enumerate(value))
    else:
        return None
    for where, item in items:
        found = _first_not_finite(item, where)
        if found is not None:
            return found
    return None


def json_values(path: Path, text: str | None = None) -> list[tuple[int, object]]:
    """(line it starts on, value) of every top-level JSON value in the file (`text`: its contents, when the caller
    has read them already), in order: one for a JSON document, one per record for JSON lines. Values must be
    separated by a line break; `DataError` names the line where the file stops being JSON."""
    text = read_text(path) if text is None else text
    values, position, end = [], 0, len(text)
    line, counted = 1, 0  # the line of `counted`: lines are counted once, as the scan moves on
    while True:
        start = position
        while position < end and text[position] in " \t\n":
            position += 1
        if position >= end:
            return values
        line, counted = line + text.count("\n", counted, position), position
        if values and "\n" not in text[start:position]:
            raise DataError(f"{path}:{line}: a second JSON value on the line of the one before; one record a line")
        try:
            value, position = DECODER.raw_decode(text, position)
        except json.JSONDecodeError as error:
            # where it breaks; a value cut short at the end of the file breaks on its last line
            at = min(error.pos, len(text.rstrip()))
            broken = text.count("\n", 0, at) + 1
            shown = text.split("\n")[broken - 1].strip()[:60]
            raise DataError(f"{path}:{broken}: not valid JSON ({error.msg}): {shown!r}") from None
        except RecursionError:
            raise DataError(f"{path}:{line}: JSON nested too deeply to read") from None
        found = _first_not_finite(value)
        if found is not None:
            where, shown = found
            raise DataError(f"{path}:{line}: {where} is {shown}, not a finite number")
        values.append((line, value))


def json_array_lines(text: str) -> list[int]:
    """The line each element of a file's top-level JSON array starts on (a valid array: `json_values` has read it)."""
    decoder, lines = json.JSONDecoder(), []
    position = text.index("[") + 1
    line, counted = 1, 0
    while True:
        while position < len(text) and text[position] in " \t\n,":
            position += 1
        if position >= len(text) or text[position] == "]":
            return lines
        line, counted = line + text.count("\n", counted, position), position
        lines.append(line)
        _, position = decoder.raw_decode(text, position)


def json_lines(path: Path, values: list[tuple[int, object]] | None = None) -> list[tuple[int, dict]]:
    """(line, record) of a JSON-lines file: every top-level value an object."""
    values = json_values(path) if values is None else values
    for line, value in values:
        if not isinstance(value, dict):
            raise DataError(
                f"{path}:{line}: expected a JSON object, found {json.dumps(value, ensure_ascii=False)[:60]}"
            )
    return values


@dataclass(frozen=True)
class Table:
    """A CSV or TSV file read whole: its header, and each record's fields with the line it starts on."""

    path: Path
    header: list[str]
    rows: list[list[str]]
    lines: list[int]

    def column(self, name: str) -> list[str]:
        """Every record's field of column `name`."""
        index = self.header.index(name)
        return [row[index] for row in self.rows]

    def records(self) -> list[tuple[int, dict[str, str]]]:
        """(line, {column: field}) of every record."""
        return [
            (line, dict(zip(self.header, row, strict=True))) for line, row in zip(self.lines, self.rows, strict=True)
        ]


def csv_rows(path: Path, delimiter: str) -> list[tuple[int, list[str]]]:
    """(line it starts on, fields) of every non-blank record of a CSV (quoted as Python's `csv` writes it) or TSV
    (`delimiter` tab: no quoting) file."""
    quoting = csv.QUOTE_NONE if delimiter == "\t" else csv.QUOTE_MINIMAL
    reader = csv.reader(io.StringIO(read_text(path), newline=""), delimiter=delimiter, quoting=quoting, strict=True)
    rows, previous_end = [], 0
    while True:
        try:
            fields = next(reader)
        except StopIteration:
            return rows
        except csv.Error as error:
            raise DataError(
                f"{path}:{previous_end + 1}: not valid {'TSV' if delimiter == chr(9) else 'CSV'} ({error})"
            ) from None
        start, previous_end = previous_end + 1, reader.line_num
        if len(fields) > 1 or (fields and fields[0].strip(" \t")):
            rows.append((start, fields))


def read_table(path: Path, delimiter: str, header: list[str] | None = None, rows=None) -> Table:
    """A CSV/TSV file as a `Table`: its first record is the header unless `header` names the columns (a file without
    one); every record has exactly as many fields as the header (or the first record), and none repeats the header.
    `rows`: the file's `csv_rows`, when the caller has read them already."""
    rows = csv_rows(path, delimiter) if rows is None else rows
    if not rows:
        raise DataError(f"{path}: empty file" + ("" if header else " (no header)"))
    first_line = rows[0][0]
    if header is None:
        (_, header), rows = rows[0], rows[1:]
        unnamed = [index + 1 for index, name in enumerate(header) if not name.strip()]
        if unnamed:
            raise DataError(
                f"{path}:{first_line}: column {unnamed[0]} of the header has no name; the header is {header}"
            )
        repeated = sorted({name for name in header if header.count(name) > 1})
        if repeated:
            raise DataError(f"{path}:{first_line}: repeated column name(s) {repeated} in the header {header}")
        for line, fields in rows:
            if fields == header:
                raise DataError(f"{path}:{line}: the header repeated as a record")
    for line, fields in rows:
        if len(fields) != len(header):
            raise DataError(f"{path}:{line}: expected {len(header)} fields, found {len(fields)}")
    return Table(path, list(header), [fields for _, fields in rows], [line for line, _ in rows])


def parse_integer(value, where: str, what: str = "value") -> int:
    """An integer written as one: a JSON integer or a cell of digits (`2`, `-1`); never a boolean, `1.5` or `1.0`."""
    if isinstance(value, bool) or not isinstance(value, (int, str)):
        raise DataError(f"{where}: the {what} {json.dumps(value, ensure_ascii=False)} is not an integer")
    if isinstance(value, str):
        if not INTEGER.fullmatch(value.strip()):
            raise DataError(f"{where}: the {what} {value!r} is not an integer")
        return int(value.strip())
    return value


def parse_score(value, where: str, score_range: tuple[float, float] | None = None, what: str = "score") -> float:
    """A score: a JSON number or a plain decimal number in a cell (`3.8`, `-1`, `2e-1`), finite and, when the task
    defines one, inside its range. Python's `float` also takes `4_2`, `nan`, `inf` and `True`; a data file does not."""
    if isinstance(value, str):
        if not DECIMAL.fullmatch(value.strip()):
            raise DataError(f"{where}: the {what} {value!r} is not a number")
        number = float(value.strip())
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
    else:
        raise DataError(f"{where}: the {what} {json.dumps(value, ensure_ascii=False)} is not a number")
    if not math.isfinite(number):
        raise DataError(f"{where}: the {what} {value!r} is not a finite number")
    if score_range is not None and not score_range[0] <= number <= score_range[1]:
        raise DataError(f"{where}: the {what} {value!r} is outside [{score_range[0]:g}, {score_range[1]:g}]")
    return number


def blank_lines_inside(path: str | Path) -> list[int]:
    """The numbers of the blank lines of a text file that come before its last non-blank line (those at its end are
    what editors leave, not worth a word)."""
    lines = non_blank_lines(Path(path))
    kept = {number for number, _ in lines}
    return [number for number in range(1, lines[-1][0]) if number not in kept] if lines else []


def describe_blank_lines(paths) -> list[str]:
    """A summary line for each TSV file among `paths` with blank lines between its records, which the readers skip:
    `train.tsv: 2 blank lines between records, skipped (lines 3, 9)`."""
    notes = []
    for path in paths:
        if path is None or Path(path).suffix.lower() != ".tsv" or not Path(path).is_file():
            continue
        blank = blank_lines_inside(path)
        if blank:
            shown = ", ".join(map(str, blank[:5])) + (", ..." if len(blank) > 5 else "")
            plural = "s" if len(blank) > 1 else ""
            notes.append(f"{path}: {len(blank)} blank line{plural} between records, skipped (line{plural} {shown})")
    return notes


__all__ = [
    "Table",
    "blank_lines_inside",
    "describe_blank_lines",
    "json_array_lines",
    "json_lines",
    "json_values",
    "non_blank_lines",
    "parse_integer",
    "parse_score",
    "read_table",
    "read_text",
]
