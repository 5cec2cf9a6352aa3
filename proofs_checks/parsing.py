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
           "parse_spd", "condition_number", "names_array_file"]

#: Largest condition number accepted for a matrix that a check inverts or samples from: beyond it
#: float64 (unit roundoff 1.1e-16) leaves fewer than 4 significant digits in the solution, too few
#: to tell a 1 % discrepancy from rounding.
MAX_COND = 1e12

_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?", re.ASCII)  # (\d: any script's digits: 46a F3)
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
    if v == 0 and re.search(r"[1-9]", f.lower().partition("e")[0]):  # 1e-400: read as 0, silently (45a F9)
        raise InputError(f"{option}: {f!r} {where} is below float64's range and would be read as 0 (the smallest "
                         f"positive is about 4.9e-324; in {_quote(text)})")
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


def names_array_file(text: str) -> bool:
    """Whether :func:`parse_array` reads ``text`` as a file: by its suffix (.npy/.txt/.csv) alone, never because a file
    of that name exists."""
    return text.strip().lower().endswith(_FILE_SUFFIXES)


def parse_array(text: str, option: str) -> np.ndarray:
    """A vector (``"1,2,3"``), a matrix (``"2,0.5;0.5,1"``) or an array read from a file
    (see the module docstring). Returns a finite float64 array."""
    if text is None or text.strip() == "":
        raise InputError(f"{option}: empty value (give numbers like \"1,2,3\", rows like \"2,1;1,2\", or a file)")
    # A value is a file only when it names one by its suffix (.npy/.txt/.csv); anything else is a
    # literal, so a stray file called "1,2" cannot stand in for the numbers 1, 2.
    stripped = text.strip()
    if names_array_file(stripped):
        p = Path(stripped)
        try:
            exists, is_dir = p.exists(), p.is_dir()
        except OSError as exc:
            raise InputError(f"{option}: cannot use {_quote(text)} as a file: {exc.strerror or exc}") from None
        if is_dir:
            raise InputError(f"{option}: {stripped} is a directory, not a file or a list of numbers")
        if not exists:
            raise InputError(f"{option}: file not found: {stripped}")
        return load_array_file(p, option)
    if "," not in text and ";" not in text and len(stripped) < 4096:
        try:
            if Path(stripped).is_dir():
                raise InputError(f"{option}: {stripped} is a directory, not a file or a list of numbers")
        except OSError:
            pass
    if "," not in text and ";" not in text and not _LITERAL_CHARS.fullmatch(text) \
            and not _NONFINITE.fullmatch(stripped):
        try:
            is_dir, is_file = Path(stripped).is_dir(), Path(stripped).is_file()
        except OSError:
            is_dir = is_file = False
        if is_dir:
            raise InputError(f"{option}: {stripped} is a directory, not a file or a list of numbers")
        if is_file:
            raise InputError(f"{option}: {stripped} has suffix {Path(stripped).suffix or '(none)'!r}; expected one "
                             f"of {', '.join(_FILE_SUFFIXES)}")
        raise InputError(f"{option}: {_quote(text)} is neither a list of numbers (\"1,2,3\") nor an existing "
                         f"file ({', '.join(_FILE_SUFFIXES)})")
    return _parse_literal(text, option)


def as_numeric_array(arr, option: str, what: str = "array") -> np.ndarray:
    """``arr`` as a finite float64 array; refuses object, string, boolean and complex dtypes. A torch tensor is read by
    :func:`tensor_to_numpy` (detached, on the CPU, bfloat16 and half widened; a tensor of the API's ``lambdas``
    in bfloat16 raised NumPy's TypeError through the check, hostile pass 16b F5)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(arr, torch.Tensor):
        arr = tensor_to_numpy(arr, option, what)
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


def require_regular_file(path, option: str) -> None:
    """Refuse a path that exists but is not a regular file or folder (a FIFO, a device, a socket):
    reading a FIFO nobody writes to blocks forever.

        >>> require_regular_file("/dev/null", "--patterns")
        Traceback (most recent call last):
        ...
        theory.validation.InputError: --patterns: /dev/null is not a regular file (a FIFO, device or socket); save the data to a file
    """
    import stat

    try:
        mode = Path(path).stat().st_mode
    except OSError:
        return  # missing or unreadable: the caller's own message
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        raise InputError(f"{option}: {path} is not a regular file (a FIFO, device or socket); save the data to a file")


def _file_head(p: Path, option: str, n: int) -> bytes:
    """The first ``n`` bytes of the regular file ``p`` (its magic number); an unreadable file is one
    line naming ``option``."""
    require_regular_file(p, option)
    try:
        with open(p, "rb") as fh:
            return fh.read(n)
    except OSError as exc:
        raise InputError(f"{option}: cannot read {p}: {exc.strerror or exc}") from None


#: the largest text matrix read (a Λ or a pattern table of a million entries is ~20 MB of text; a 1 TB file was read
#: whole and ended in a MemoryError traceback: hostile pass 22a F10)
MAX_TEXT_BYTES = 256 * 1024**2


def _read_text_matrix(p: Path, option: str) -> np.ndarray:
    require_regular_file(p, option)
    try:
        size = p.stat().st_size
    except OSError as exc:
        raise InputError(f"{option}: cannot read {p}: {exc.strerror or exc}") from None
    if size > MAX_TEXT_BYTES:
        raise InputError(f"{option}: {p} is {size / 1024**2:.0f} MB of text; a text matrix may be at most "
                         f"{MAX_TEXT_BYTES // 1024**2} MB (name a NumPy array .npy for larger data)")
    try:
        text = p.read_text(encoding="utf-8-sig")  # a byte-order mark (Excel's "CSV UTF-8") is not data
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


def load_array_file(path, option: str, max_memory: float | None = None) -> np.ndarray:
    """Read a ``.npy`` / ``.txt`` / ``.csv`` file as a finite float64 array (see module docstring)."""
    p = Path(path)
    if not p.exists():
        raise InputError(f"{option}: file not found: {p}")
    if p.is_dir():
        raise InputError(f"{option}: {p} is a directory, not a file")
    suffix = p.suffix.lower()
    if suffix == ".npy":
        arr = load_npy(p, option, max_memory)
        return as_numeric_array(arr, option, str(p))
    if suffix in _TEXT_SUFFIXES:
        return _read_text_matrix(p, option)
    raise InputError(f"{option}: {p} has suffix {p.suffix or '(none)'!r}; expected one of {', '.join(_FILE_SUFFIXES)}")


def input_file(path, option: str) -> Path:
    """``path`` as a file to read: one line (:class:`InputError`) when it is missing, a folder, or a name the system
    cannot look up (a name over 255 bytes raised ``OSError: File name too long`` with a traceback, hostile pass
    14b F5)."""
    p = Path(path)
    try:
        exists, folder = p.exists(), p.is_dir()
    except (OSError, ValueError) as exc:
        raise InputError(f"{option}: cannot use {_quote(str(path))} as a file: "
                         f"{getattr(exc, 'strerror', None) or exc}") from None
    if not exists:
        raise InputError(f"{option}: file not found: {path}")
    if folder:
        raise InputError(f"{option}: {path} is a directory, not a file")
    return p


def load_npz(path, option: str, keys: tuple[str, ...] | None = None, max_memory: float | None = None,
             expect=None) -> dict[str, np.ndarray]:
    """Read a ``.npz`` archive (never pickled objects) as ``{name: finite float64 array}``;
    with ``keys``, only those (a missing one is an error naming what is there)."""
    p = input_file(path, option)
    magic = _file_head(p, option, 6)
    if magic == b"\x93NUMPY":
        raise InputError(f"{option}: {p} holds one array (.npy format), not a .npz archive of named arrays "
                         "(save with numpy.savez)")
    if magic[:4] == b"PK\x05\x06":  # a zip's end record first: an archive with no member
        raise InputError(f"{option}: {p} is an empty .npz archive (no arrays in it; numpy.savez was given none)")
    if magic[:4] != b"PK\x03\x04":
        raise InputError(f"{option}: {p} is not a .npz archive (no zip header; save with numpy.savez)")
    headers = npz_headers(p, option, max_memory)  # before anything is decompressed
    if expect is not None:
        expect(headers)  # the caller's shape checks, still before decompression
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
        extra = [k for k in names if k not in want]
        if extra:  # never read silently as something else, nor ignored (hostile pass 9, N5)
            raise InputError(f"{option}: {p} also holds array(s) {', '.join(extra[:5])}{' …' if len(extra) > 5 else ''}, "
                             f"which are not read (it reads {', '.join(want)}): save those alone")
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
    return spd_from_array(parse_array(text, option), option, max_cond=max_cond)


def spd_from_array(arr, option: str, *, max_cond: float = MAX_COND) -> tuple[np.ndarray, float]:
    """:func:`parse_spd` on an array already read (the Python API's lists and arrays get the same
    checks as the command line's text): a vector is a diagonal; size, overflow, symmetry, positive
    definiteness and the condition number are checked, each failure one line naming ``option``."""
    import sys

    torch = sys.modules.get("torch")
    if torch is not None and isinstance(arr, torch.Tensor):  # its values (one requiring grad: hostile pass 13b F3;
        arr = tensor_to_numpy(arr, option, "the matrix")  # bfloat16: 16b F5)
    if isinstance(arr, (str, bytes, bool)) or (isinstance(arr, (list, tuple)) and any(
            isinstance(v, (str, bytes, bool)) for v in np.ravel(np.asarray(arr, dtype=object)))):
        raise InputError(f"{option}: expected numbers, got {arr!r:.80}")
    arr = as_numeric_array(np.asarray(arr), option, "the matrix") if not isinstance(arr, np.ndarray) else \
        as_numeric_array(arr, option, "the matrix")
    if arr.ndim not in (1, 2):
        raise InputError(f"{option}: expected a vector (a diagonal) or a square matrix, got shape {arr.shape}")
    d = int(arr.shape[0])
    if arr.ndim == 1 and d > 1:
        from proofs_checks import guards

        need = 3 * 8.0 * d * d  # the dense matrix, its symmetrised copy and the eigensolver's work array
        avail = guards.available_memory()
        if need > avail:
            raise InputError(f"{option}: a diagonal of {d} entries makes a {d} × {d} matrix: about "
                             f"{guards.fmt_bytes(need)} to check, more than the {guards.fmt_bytes(avail)} of memory "
                             "available")
    big = float(np.max(np.abs(arr))) if arr.size else 0.0
    if big > 1e154:  # its square, in every product of two entries, overflows float64 (max ≈ 1.8e308)
        raise InputError(f"{option}: entry {big:.3g} is too large: products of two entries overflow float64 "
                         "(|entries| ≤ 1e154; rescale)")
    if arr.ndim == 1 and arr.size:  # a diagonal: its entries are its eigenvalues (no O(d³) factorisation)
        ev = np.sort(arr.astype(np.float64))
        if not ev[0] > 0:
            raise InputError(f"{option} is not positive definite (smallest eigenvalue {ev[0]:.3g})")
        mat = np.diag(arr.astype(np.float64))
    else:
        try:
            mat = as_spd_matrix(arr, option)
        except InputError as exc:
            msg = str(exc)
            raise InputError(msg if msg.startswith(option) else f"{option}: {msg}") from None
        ev = np.linalg.eigvalsh(mat)
    with np.errstate(over="ignore"):  # a subnormal eigenvalue: the condition number is inf, said below
        cond = float(ev[-1] / ev[0]) if ev[0] > 0 else float("inf")
    if not cond <= max_cond:
        raise InputError(f"{option}: condition number {cond:.3g} exceeds {max_cond:.0e}, beyond what float64 can "
                         f"check (eigenvalues {ev[0]:.3g} … {ev[-1]:.3g})")
    return mat, cond


# ------------------------------------------------------------------------------------------------
# files validated before they are loaded: .npy headers, zip members of .npz / .pt, torch tensors

__all__ += ["npy_header", "load_npy", "npz_headers", "zip_members", "load_torch_file", "tensor_to_numpy",
            "named_arrays"]

#: A member of a .pt archive larger than this, stored compressed, is refused: torch.save never
#: compresses, so such a member is a crafted archive (a zip bomb), not a checkpoint.
PT_COMPRESSED_LIMIT = 1 << 20


def _first_sentence(text: str, limit: int = 300) -> str:
    """The first line of an exception message, whole (cut only at a sentence end when too long)."""
    line = " ".join((str(text).strip().splitlines() or [""])[0].split())
    if len(line) <= limit:
        return line
    cut = line.rfind(". ", 0, limit)
    return line[: cut + 1] if cut > 40 else line[:limit].rsplit(" ", 1)[0] + " …"


def _check_dtype(dtype: np.dtype, option: str, what: str) -> None:
    kind = dtype.kind
    if kind == "O" or dtype.hasobject:
        raise InputError(f"{option}: {what} holds Python objects (dtype object), not numbers")
    if dtype.names is not None:
        raise InputError(f"{option}: {what} is a structured array (fields {', '.join(dtype.names)}), not a plain "
                         "numeric array (save one field, e.g. arr['" + dtype.names[0] + "'])")
    if kind in "USV":
        raise InputError(f"{option}: {what} holds text or raw bytes (dtype {dtype}), not numbers")
    if kind == "c":
        raise InputError(f"{option}: {what} is complex (dtype {dtype}); a real array is required")
    if kind not in "biuf":
        raise InputError(f"{option}: {what} has unsupported dtype {dtype}")


def _read_header(fh, option: str, what: str) -> tuple[tuple[int, ...], np.dtype]:
    from numpy.lib import format as npf

    try:
        version = npf.read_magic(fh)
        if version == (1, 0):
            shape, _fortran, dtype = npf.read_array_header_1_0(fh)
        elif version in ((2, 0), (3, 0)):
            shape, _fortran, dtype = npf.read_array_header_2_0(fh)
        else:
            raise ValueError(f"unsupported .npy format version {version}")
    except Exception as exc:  # ValueError for a bad header, EOFError / zipfile errors for a short one
        raise InputError(f"{option}: {what} has a damaged .npy header ({_first_sentence(exc)})") from None
    if not all(isinstance(n, int) and n >= 0 for n in shape):
        raise InputError(f"{option}: {what} has an invalid shape {shape} in its header")
    return tuple(shape), dtype


def _nbytes(shape, dtype) -> float:
    n = 1.0
    for s in shape:
        n *= float(s)
    return n * dtype.itemsize


def npy_header(path, option: str, max_memory: float | None = None) -> tuple[tuple[int, ...], np.dtype]:
    """Shape and dtype of a ``.npy`` file read from its header (``numpy.lib.format``) without
    loading it; refuses a file that is not ``.npy``, object/text/complex dtypes, a header that
    claims more data than the file holds, and an array over the memory limit (``max_memory`` GB)."""
    from proofs_checks.guards import require_memory

    p = Path(path)
    require_regular_file(p, option)
    try:
        size = p.stat().st_size
        with open(p, "rb") as fh:
            if fh.read(6) != b"\x93NUMPY":
                raise InputError(f"{option}: {p} is not a NumPy .npy file (no NumPy header); a text matrix "
                                 "must be named .txt (spaces) or .csv (commas)")
            fh.seek(0)
            shape, dtype = _read_header(fh, option, str(p))
            offset = fh.tell()
    except OSError as exc:
        raise InputError(f"{option}: cannot read {p}: {exc.strerror or exc}") from None
    need = _nbytes(shape, dtype)
    if need > size - offset and not dtype.hasobject:
        raise InputError(f"{option}: {p} is a damaged .npy file (truncated: its header says shape {shape} of "
                         f"{dtype}, {need:.0f} bytes, but the file holds {max(size - offset, 0)} bytes of data)")
    _check_dtype(dtype, option, str(p))
    require_memory(need, max_memory, f"{option} {p} (shape {shape})", final=False)
    return shape, dtype


def load_npy(path, option: str, max_memory: float | None = None) -> np.ndarray:
    """A ``.npy`` array, its header checked first (:func:`npy_header`); never unpickled."""
    shape, dtype = npy_header(path, option, max_memory)
    try:
        return np.load(path, allow_pickle=False)
    except MemoryError:  # within a raised --max-memory but not what the machine can give: not a damaged file
        from proofs_checks.guards import fmt_bytes

        raise InputError(f"{option}: {path} (shape {shape}) needs about {fmt_bytes(_nbytes(shape, dtype))} of "
                         "memory, which this machine could not allocate (the file itself is not damaged)") from None
    except Exception as exc:
        raise InputError(f"{option}: {path} is a damaged .npy file ({_first_sentence(exc)})") from None


def zip_members(path, option: str, max_memory: float | None = None, kind: str = "archive") -> list:
    """The members of a zip archive (``.npz``, ``.pt``) after checking, before anything is
    decompressed: no duplicated names, and the declared uncompressed sizes within the memory limit."""
    import zipfile

    from proofs_checks.guards import require_memory

    require_regular_file(path, option)
    try:
        with zipfile.ZipFile(path) as zf:
            infos = zf.infolist()
    except (zipfile.BadZipFile, OSError, ValueError, EOFError) as exc:
        raise InputError(f"{option}: {path} is a damaged {kind} ({_first_sentence(exc)})") from None
    names = [i.filename for i in infos]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"{option}: {path} holds the member name(s) {', '.join(dup[:3])} more than once "
                         "(which one would be read is undefined)")
    total = float(sum(i.file_size for i in infos))
    require_memory(total, max_memory, f"{option} {path} (decompressed size of its {len(infos)} member(s))",
                   final=False)
    return infos


def npz_headers(path, option: str, max_memory: float | None = None) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
    """``{name: (shape, dtype)}`` of the arrays in a ``.npz``, read from each member's header
    (only the header is decompressed); dtype, size and memory checked as in :func:`npy_header`."""
    import zipfile

    from proofs_checks.guards import require_memory

    infos = zip_members(path, option, max_memory, ".npz archive")
    out, total = {}, 0.0
    try:
        with zipfile.ZipFile(path) as zf:
            for info in infos:
                name = info.filename[:-4] if info.filename.endswith(".npy") else info.filename
                what = f"array {name!r} in {path}"
                with zf.open(info) as fh:
                    shape, dtype = _read_header(fh, option, what)
                _check_dtype(dtype, option, what)
                need = _nbytes(shape, dtype)
                if need > info.file_size:
                    raise InputError(f"{option}: {what} is truncated: its header says shape {shape} "
                                     f"({need:.0f} bytes) but the member holds {info.file_size} bytes")
                total += need
                out[name] = (shape, dtype)
    except (zipfile.BadZipFile, OSError, EOFError) as exc:
        raise InputError(f"{option}: {path} is a damaged .npz archive ({_first_sentence(exc)})") from None
    require_memory(total, max_memory, f"{option} {path} (its arrays)", final=False)
    return out


#: the magic number torch.save's legacy format pickles first (0x1950a86a20f9469cfc6c, a LONG1 of 10 bytes)
_LEGACY_MAGIC = b"\x8a\x0a" + (0x1950A86A20F9469CFC6C).to_bytes(10, "little")


def load_torch_file(path, option: str, max_memory: float | None = None):
    """``torch.load(path, weights_only=True)`` after checks: a zip archive as torch.save writes it
    (no compressed member over 1 MB: torch.save stores, never compresses), declared sizes within the
    memory limit. Tensors are memory-mapped, so their shapes can be checked before their data is
    read. Errors are one complete line naming ``option``."""
    import zipfile

    p = Path(path)
    first = _file_head(p, option, 32)
    head = first[:4]
    if head[:1] == b"\x80" and _LEGACY_MAGIC in first:  # torch.save's legacy format (hostile pass 55b F4)
        raise InputError(f"{option}: {p} is in torch.save's legacy (non-zip) format, which is not read (its tensors "
                         "cannot be sized before they are read); save it again in the default format: "
                         "torch.save(torch.load(FILE, weights_only=True), FILE)")
    if head[:1] == b"\x80":  # any other pickle was called torch's legacy file, with advice that fails on it (56b F3)
        raise InputError(f"{option}: {p} is a Python pickle that torch.save did not write (no torch magic number, no "
                         "zip header), and pickles are never loaded: save the tensors with torch.save")
    if head != b"PK\x03\x04":
        raise InputError(f"{option}: {p} is not a file written by torch.save (no zip header)")
    infos = zip_members(p, option, max_memory, "torch file")
    for i in infos:
        if i.compress_type != zipfile.ZIP_STORED and i.file_size > PT_COMPRESSED_LIMIT:
            raise InputError(f"{option}: {p} has a compressed member {i.filename!r} that would expand to "
                             f"{i.file_size} bytes; torch.save never compresses, so this is not a checkpoint "
                             "(refused before decompressing)")
    import torch

    try:
        return torch.load(p, map_location="cpu", weights_only=True, mmap=True)
    except Exception as exc:  # torch raises many types for a bad file
        if type(exc).__name__ == "UnpicklingError" or "weights_only" in str(exc).lower():
            raise InputError(f"{option}: {p} holds objects other than tensors and plain containers, which "
                             "torch.load(weights_only=True) refuses to unpickle (save a dict of tensors, "
                             "e.g. model.state_dict())") from None
        if "mmap" in str(exc).lower():
            try:
                return torch.load(p, map_location="cpu", weights_only=True)
            except Exception as exc2:
                exc = exc2
        raise InputError(f"{option}: cannot read {p} ({type(exc).__name__}: {_first_sentence(exc)})") from None


def tensor_to_numpy(t, option: str, what: str) -> np.ndarray:
    """A dense real tensor (any device) as a NumPy array; refuses sparse, meta, quantized, nested
    and complex tensors with one line (a bfloat16/half tensor is widened to float64)."""
    import torch

    if not isinstance(t, torch.Tensor):
        return np.asarray(t)
    if t.is_meta or t.device.type == "meta":
        raise InputError(f"{option}: {what} is a meta tensor (a shape without data); save the tensor itself")
    if t.layout != torch.strided:
        raise InputError(f"{option}: {what} is a sparse tensor ({str(t.layout).replace('torch.', '')}); "
                         "save it dense (tensor.to_dense())")
    if getattr(t, "is_nested", False) or t.is_quantized:
        raise InputError(f"{option}: {what} is a {'nested' if getattr(t, 'is_nested', False) else 'quantized'} "
                         "tensor; save a plain dense tensor")
    if t.is_complex():
        raise InputError(f"{option}: {what} is complex ({str(t.dtype).replace('torch.', '')}); a real tensor is "
                         "required")
    t = t.detach().cpu()
    if t.dtype in (torch.bfloat16, torch.float16) or t.dtype.is_floating_point and t.dtype not in (
            torch.float32, torch.float64):
        t = t.to(torch.float64)
    try:
        return t.numpy()
    except (TypeError, RuntimeError) as exc:
        raise InputError(f"{option}: {what} cannot be read as numbers ({_first_sentence(exc)})") from None


def named_arrays(obj, option: str, path) -> dict[str, object]:
    """The tensors of a loaded ``.pt`` object by their full names (``attn.W``): a tensor alone is
    ``{"": t}``; a module's ``state_dict``; nested dicts joined with dots. Non-tensor leaves are kept
    as they are (the caller refuses them with their name)."""
    if hasattr(obj, "state_dict") and callable(obj.state_dict):
        obj = obj.state_dict()
    if hasattr(obj, "shape") and not isinstance(obj, dict):
        return {"": obj}
    if not isinstance(obj, dict):
        raise InputError(f"{option}: {path} holds a {type(obj).__name__}, not a tensor or a dict of tensors")
    out: dict[str, object] = {}

    def walk(d, prefix):
        for k, v in d.items():
            name = f"{prefix}{k}"
            if isinstance(v, dict):
                walk(v, name + ".")
            else:
                if name in out:
                    raise InputError(f"{option}: {path} holds the name {name!r} twice")
                out[name] = v

    walk(obj, "")
    return out
