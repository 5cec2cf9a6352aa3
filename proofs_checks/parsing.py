"""Strict parsing of vectors and matrices given on the command line or in files.

One grammar for every option that takes numbers (``--lambda`` and the like):

* ``"1,2,3"``: comma-separated numbers, a vector (read as a diagonal where a matrix is wanted);
* ``"2,0.5;0.5,1"``: rows separated by ``;``, a full matrix (every row the same length);
* a path to a file: ``.npy`` (a NumPy array, never pickled objects), ``.txt`` (numbers separated by
  whitespace, one row per line) or ``.csv`` (numbers separated by commas, one row per line);
  ``#`` starts a comment in text files.

Spaces around separators are allowed (``"1, 2, 3"``); spaces *between* two numbers are not
(``"1 2 3"`` is refused rather than guessed at). Empty fields (``"1,,2"``), stray separators
(``"1,2,"``), non-finite values (``nan``, ``inf``, ``1e400``), the empty string, object, string and
complex arrays are refused. Every refusal is an :class:`~theory.validation.InputError` whose
message starts with the option it came from, e.g. ``--lambda: empty field at position 2 in "1,,2"``;
the CLI prints it as one line and exits with code 2.

>>> parse_array("1, 2,3", "--lambda")
array([1., 2., 3.])
>>> parse_array("2,0.5;0.5,1", "--lambda")
array([[2. , 0.5],
       [0.5, 1. ]])
>>> parse_array("1,,2", "--lambda")
Traceback (most recent call last):
...
theory.validation.InputError: --lambda: empty field at position 2 in "1,,2"
>>> parse_array("1 2 3", "--lambda")
Traceback (most recent call last):
...
theory.validation.InputError: --lambda: numbers must be separated by commas (rows by ';'): "1 2 3"
"""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np

from theory.validation import InputError, as_spd_matrix

__all__ = ["MAX_COND", "parse_numbers", "parse_array", "load_array_file", "load_npz", "as_numeric_array",
           "parse_spd", "condition_number"]

#: Largest condition number accepted for a matrix that a check inverts or samples from: beyond it
#: float64 (unit roundoff 1.1e-16) leaves fewer than 4 significant digits in the solution, too few
#: to tell a 1 % discrepancy from rounding.
MAX_COND = 1e12

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_NONFINITE = re.compile(r"[+-]?(?:nan|inf|infinity)", re.IGNORECASE)
_LITERAL_CHARS = re.compile(r"[0-9eE+\-.,;\s]*")
_TEXT_SUFFIXES = (".txt", ".csv")
_FILE_SUFFIXES = (".npy",) + _TEXT_SUFFIXES


def _quote(text: str, limit: int = 60) -> str:
    t = text if len(text) <= limit else text[: limit - 1] + "…"
    return '"' + t + '"'


def _number(field: str, option: str, where: str, text: str) -> float:
    f = field.strip()
    if _NONFINITE.fullmatch(f):
        raise InputError(f"{option}: non-finite value {f!r} {where} in {_quote(text)}")
    if not _NUMBER.fullmatch(f):
        if re.search(r"\s", f) and all(_NUMBER.fullmatch(p) for p in f.split()):
            raise InputError(f"{option}: numbers must be separated by commas (rows by ';'): {_quote(text)}")
        raise InputError(f"{option}: {f!r} {where} is not a number (in {_quote(text)})")
    v = float(f)
    if not np.isfinite(v):
        raise InputError(f"{option}: {f!r} {where} overflows float64 (in {_quote(text)})")
    return v


def parse_numbers(text: str, option: str) -> list[float]:
    """A comma-separated list of finite numbers (at least one); positions are 1-based.

    >>> parse_numbers(" 1e-3 , -2 ", "--x")
    [0.001, -2.0]
    """
    if text.strip() == "":
        raise InputError(f"{option}: empty value (give numbers like \"1,2,3\" or a file)")
    return _fields(text, option, text, "")


def _fields(part: str, option: str, text: str, row: str) -> list[float]:
    """The comma-separated numbers of ``part`` (the whole ``text`` or one of its rows, named by
    ``row`` such as ``"row 2, "``); an empty field is refused with its position."""
    out = []
    for i, f in enumerate(part.split(","), 1):
        where = f"at {row}position {i}"
        if f.strip() == "":
            raise InputError(f"{option}: empty field {where} in {_quote(text)}")
        out.append(_number(f, option, where, text))
    return out


def _parse_literal(text: str, option: str) -> np.ndarray:
    if ";" not in text:
        return np.asarray(parse_numbers(text, option), dtype=np.float64)
    rows = text.split(";")
    out = []
    for r, row in enumerate(rows, 1):
        if row.strip() == "":
            raise InputError(f"{option}: empty row {r} in {_quote(text)} (rows are separated by ';')")
        vals = _fields(row, option, text, f"row {r}, ")
        if out and len(vals) != len(out[0]):
            raise InputError(f"{option}: row {r} has {len(vals)} numbers but row 1 has {len(out[0])} "
                             f"(in {_quote(text)})")
        out.append(vals)
    return np.asarray(out, dtype=np.float64)


def parse_array(text: str, option: str) -> np.ndarray:
    """A vector (``"1,2,3"``), a matrix (``"2,0.5;0.5,1"``) or an array read from a file
    (see the module docstring). Returns a finite float64 array."""
    if text is None or text.strip() == "":
        raise InputError(f"{option}: empty value (give numbers like \"1,2,3\", rows like \"2,1;1,2\", or a file)")
    p = Path(text)
    if p.is_file():
        return load_array_file(p, option)
    if p.is_dir():
        raise InputError(f"{option}: {text} is a directory, not a file or a list of numbers")
    if p.suffix.lower() in _FILE_SUFFIXES:
        raise InputError(f"{option}: file not found: {text}")
    if "," not in text and ";" not in text and not _LITERAL_CHARS.fullmatch(text) \
            and not _NONFINITE.fullmatch(text.strip()):
        raise InputError(f"{option}: {text!r} is neither a list of numbers (\"1,2,3\") nor an existing "
                         f"file ({', '.join(_FILE_SUFFIXES)})")
    return _parse_literal(text, option)


def as_numeric_array(arr, option: str, what: str = "array") -> np.ndarray:
    """``arr`` as a finite float64 array; refuses object, string, boolean and complex dtypes."""
    a = np.asarray(arr) if not isinstance(arr, np.ndarray) else arr
    kind = a.dtype.kind
    if kind == "O":
        raise InputError(f"{option}: {what} holds Python objects (dtype object), not numbers")
    if kind in "USV":
        raise InputError(f"{option}: {what} holds text or raw bytes (dtype {a.dtype}), not numbers")
    if kind == "c":
        raise InputError(f"{option}: {what} is complex (dtype {a.dtype}); a real array is required")
    if kind == "b":
        raise InputError(f"{option}: {what} is boolean; a numeric array is required")
    if kind not in "iuf":
        raise InputError(f"{option}: {what} has unsupported dtype {a.dtype}")
    out = a.astype(np.float64)
    if out.size == 0:
        raise InputError(f"{option}: {what} is empty (shape {a.shape})")
    bad = ~np.isfinite(out)
    if bad.any():
        idx = tuple(int(i) for i in np.argwhere(bad)[0])
        raise InputError(f"{option}: {what} has a non-finite value ({out[idx]}) at index {idx}")
    return out


def _read_text_matrix(p: Path, option: str) -> np.ndarray:
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise InputError(f"{option}: {p} is not a text file (name a NumPy array .npy)") from None
    except OSError as exc:
        raise InputError(f"{option}: cannot read {p}: {exc.strerror or exc}") from None
    csv = p.suffix.lower() == ".csv"
    rows: list[list[float]] = []
    first_len_line = 0
    for ln, raw in enumerate(text.splitlines(), 1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{p.name}, line {ln}"
        if csv:
            fields = line.split(",")
            vals = []
            for i, f in enumerate(fields, 1):
                if f.strip() == "":
                    raise InputError(f"{option}: empty field at position {i} ({where})")
                vals.append(_number(f, option, f"at position {i} ({where})", line))
        else:
            if "," in line or ";" in line:
                raise InputError(f"{option}: {where}: a .txt matrix separates numbers by spaces "
                                 "(name the file .csv for commas)")
            vals = [_number(f, option, f"at position {i} ({where})", line) for i, f in enumerate(line.split(), 1)]
        if rows and len(vals) != len(rows[0]):
            raise InputError(f"{option}: {where} has {len(vals)} numbers but line {first_len_line} has {len(rows[0])}")
        if not rows:
            first_len_line = ln
        rows.append(vals)
    if not rows:
        raise InputError(f"{option}: {p} holds no numbers")
    a = np.asarray(rows, dtype=np.float64)
    return a[0] if a.shape[0] == 1 else a


def load_array_file(path, option: str) -> np.ndarray:
    """Read a ``.npy`` / ``.txt`` / ``.csv`` file as a finite float64 array (see module docstring)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{option}: file not found: {p}")
    if p.is_dir():
        raise InputError(f"{option}: {p} is a directory, not a file")
    suffix = p.suffix.lower()
    if suffix == ".npy":
        try:
            with open(p, "rb") as fh:
                magic = fh.read(6)
        except OSError as exc:
            raise InputError(f"{option}: cannot read {p}: {exc.strerror or exc}") from None
        if magic != b"\x93NUMPY":
            raise InputError(f"{option}: {p} is not a NumPy .npy file (no NumPy header); "
                             "a text matrix must be named .txt (spaces) or .csv (commas)")
        try:
            arr = np.load(p, allow_pickle=False)
        except ValueError as exc:
            if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
                raise InputError(f"{option}: {p} holds Python objects (dtype object), not numbers") from None
            raise InputError(f"{option}: {p} is a damaged .npy file: {exc}") from None
        except Exception as exc:  # truncated or corrupt header / data
            raise InputError(f"{option}: {p} is a damaged .npy file ({type(exc).__name__}: {exc})") from None
        return as_numeric_array(arr, option, str(p))
    if suffix in _TEXT_SUFFIXES:
        return _read_text_matrix(p, option)
    raise InputError(f"{option}: {p} has suffix {p.suffix or '(none)'!r}; expected one of {', '.join(_FILE_SUFFIXES)}")


def load_npz(path, option: str, keys: tuple[str, ...] | None = None) -> dict[str, np.ndarray]:
    """Read a ``.npz`` archive (never pickled objects) as ``{name: finite float64 array}``;
    with ``keys``, only those (a missing one is an error naming what is there)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{option}: file not found: {p}")
    if p.is_dir():
        raise InputError(f"{option}: {p} is a directory, not a file")
    try:
        with open(p, "rb") as fh:
            magic = fh.read(6)
    except OSError as exc:
        raise InputError(f"{option}: cannot read {p}: {exc.strerror or exc}") from None
    if magic == b"\x93NUMPY":
        raise InputError(f"{option}: {p} holds one array (.npy format), not a .npz archive of named arrays "
                         "(save with numpy.savez)")
    if magic[:4] != b"PK\x03\x04":
        raise InputError(f"{option}: {p} is not a .npz archive (no zip header; save with numpy.savez)")
    try:
        data = np.load(p, allow_pickle=False)
    except Exception as exc:  # zipfile.BadZipFile, zlib errors, truncated files
        raise InputError(f"{option}: {p} is a damaged .npz archive ({type(exc).__name__}: {exc})") from None
    if not hasattr(data, "files"):
        raise InputError(f"{option}: {p} holds one array, not a .npz archive of named arrays")
    with data:
        names = list(data.files)
        want = names if keys is None else list(keys)
        missing = [k for k in want if k not in names]
        if missing:
            raise InputError(f"{option}: {p} lacks array(s) {', '.join(missing)} (found {', '.join(names) or 'none'})")
        out = {}
        for k in want:
            try:
                raw = data[k]
            except ValueError as exc:
                if "allow_pickle" in str(exc) or "Object arrays" in str(exc):
                    raise InputError(f"{option}: array {k!r} in {p} holds Python objects (dtype object), not numbers") from None
                raise InputError(f"{option}: array {k!r} in {p} cannot be read: {exc}") from None
            except Exception as exc:  # a damaged member (zipfile / zlib errors)
                raise InputError(f"{option}: array {k!r} in {p} cannot be read ({type(exc).__name__}: {exc})") from None
            out[k] = as_numeric_array(raw, option, f"array {k!r}")
        return out


def condition_number(a: np.ndarray) -> float:
    """2-norm condition number of a symmetric positive-definite matrix (``inf`` when singular).

    >>> condition_number(np.diag([1.0, 100.0]))
    100.0
    """
    ev = np.linalg.eigvalsh(np.asarray(a, dtype=np.float64))
    return float(ev[-1] / ev[0]) if ev[0] > 0 else float("inf")


def parse_spd(text: str, option: str, *, max_cond: float = MAX_COND) -> tuple[np.ndarray, float]:
    """A symmetric positive-definite matrix from :func:`parse_array` (a vector is a diagonal),
    and its condition number; refuses ``cond > max_cond``. Messages name ``option``.

    >>> parse_spd("1,4", "--lambda")[1]
    4.0
    >>> parse_spd("1e-300,1", "--lambda")
    Traceback (most recent call last):
    ...
    theory.validation.InputError: --lambda: condition number 1e+300 exceeds 1e+12, beyond what float64 can check (eigenvalues 1e-300 … 1)
    """
    arr = parse_array(text, option)
    if arr.ndim not in (1, 2):
        raise InputError(f"{option}: expected a vector (a diagonal) or a square matrix, got shape {arr.shape}")
    try:
        mat = as_spd_matrix(arr, option)
    except InputError as exc:
        msg = str(exc)
        raise InputError(msg if msg.startswith(option) else f"{option}: {msg}") from None
    ev = np.linalg.eigvalsh(mat)
    cond = float(ev[-1] / ev[0]) if ev[0] > 0 else float("inf")
    if not cond <= max_cond:
        raise InputError(f"{option}: condition number {cond:.3g} exceeds {max_cond:.0e}, beyond what float64 can "
                         f"check (eigenvalues {ev[0]:.3g} … {ev[-1]:.3g})")
    return mat, cond
