"""proofs_checks.parsing (one grammar for vectors and matrices on the command line and in files)
and proofs_checks.guards (memory refusal, progress with ETA)."""

from __future__ import annotations

import io

import numpy as np
import pytest

from proofs_checks import guards
from proofs_checks.parsing import (MAX_COND, as_numeric_array, load_array_file, load_npz, parse_array, parse_numbers,
                                   parse_spd)
from theory.validation import InputError


@pytest.mark.parametrize("text, expected", [
    ("1,2,3", [1.0, 2.0, 3.0]),
    (" 1 , 2 ,3 ", [1.0, 2.0, 3.0]),
    ("-1.5e-3,+2,.5,3.", [-1.5e-3, 2.0, 0.5, 3.0]),
    ("7", [7.0]),
])
def test_vectors(text, expected):
    assert parse_array(text, "--x").tolist() == expected


def test_matrix_rows():
    assert parse_array("2,0.5;0.5,1", "--lambda").tolist() == [[2.0, 0.5], [0.5, 1.0]]
    assert parse_array("1; 2", "--lambda").shape == (2, 1)


@pytest.mark.parametrize("text, fragment", [
    ("1 2 3", "numbers must be separated by commas"),
    ("1,,2", 'empty field at position 2 in "1,,2"'),
    ("1,2,", "empty field at position 3"),
    (",1", "empty field at position 1"),
    ("", "empty value"),
    ("   ", "empty value"),
    ("nan,1", "non-finite value 'nan' at position 1"),
    ("1,inf", "non-finite value 'inf' at position 2"),
    ("1e400", "overflows float64"),
    ("a,b", "'a' at position 1 is not a number"),
    ("1_0", "neither a list of numbers"),
    ("0x10", "neither a list of numbers"),
    ("1;2,3", "row 2 has 2 numbers but row 1 has 1"),
    ("1,2;3,4;", "empty row 3"),
    ("1,2;;3,4", "empty row 2"),
    ("1,2; 3,,4", "empty field at row 2, position 2"),
    ("missing.npy", "file not found: missing.npy"),
    (".", "is a directory"),
])
def test_malformed_values_name_the_option_and_the_problem(text, fragment):
    with pytest.raises(InputError) as exc:
        parse_array(text, "--lambda")
    msg = str(exc.value)
    assert msg.startswith("--lambda") and fragment in msg, msg
    assert "\n" not in msg


def test_parse_numbers_positions():
    assert parse_numbers("3, 4", "--v") == [3.0, 4.0]
    with pytest.raises(InputError, match=r"--v: empty field at position 2"):
        parse_numbers("3,", "--v")


def test_files(tmp_path):
    np.save(tmp_path / "m.npy", np.array([[2.0, 0.1], [0.1, 1.0]]))
    assert load_array_file(tmp_path / "m.npy", "--lambda").shape == (2, 2)
    (tmp_path / "m.txt").write_text("# a covariance\n2 0.1\n0.1 1\n\n")
    assert parse_array(str(tmp_path / "m.txt"), "--lambda").tolist() == [[2.0, 0.1], [0.1, 1.0]]
    (tmp_path / "m.csv").write_text("2, 0.1\n0.1, 1\n")
    assert parse_array(str(tmp_path / "m.csv"), "--lambda").tolist() == [[2.0, 0.1], [0.1, 1.0]]
    (tmp_path / "v.txt").write_text("1 2 3\n")
    assert parse_array(str(tmp_path / "v.txt"), "--lambda").tolist() == [1.0, 2.0, 3.0]


@pytest.mark.parametrize("name, content, fragment", [
    ("text.npy", b"1 2\n3 4\n", "is not a NumPy .npy file (no NumPy header); a text matrix must be named .txt"),
    ("bad.csv", b"1,,2\n", "empty field at position 2 (bad.csv, line 1)"),
    ("ragged.txt", b"1 2\n3\n", "line 2 has 1 numbers but line 1 has 2"),
    ("commas.txt", b"1,2\n", "a .txt matrix separates numbers by spaces"),
    ("nan.txt", b"1 nan\n", "non-finite value 'nan'"),
    ("empty.txt", b"# nothing\n", "holds no numbers"),
    ("binary.txt", b"\xff\xfe\x00\x81", "is not a text file"),
    ("weird.dat", b"1", "has suffix '.dat'; expected one of .npy, .txt, .csv"),
])
def test_bad_files(tmp_path, name, content, fragment):
    (tmp_path / name).write_bytes(content)
    with pytest.raises(InputError) as exc:
        parse_array(str(tmp_path / name), "--lambda")
    assert str(exc.value).startswith("--lambda") and fragment in str(exc.value), str(exc.value)


def test_object_complex_and_truncated_arrays_refused(tmp_path):
    np.save(tmp_path / "obj.npy", np.array([1, "a"], dtype=object), allow_pickle=True)
    with pytest.raises(InputError, match="holds Python objects"):
        load_array_file(tmp_path / "obj.npy", "--lambda")
    np.save(tmp_path / "c.npy", np.array([1 + 1j, 2]))
    with pytest.raises(InputError, match="is complex"):
        load_array_file(tmp_path / "c.npy", "--lambda")
    raw = (tmp_path / "c.npy").read_bytes()
    (tmp_path / "t.npy").write_bytes(raw[:-5])
    with pytest.raises(InputError, match="damaged .npy"):
        load_array_file(tmp_path / "t.npy", "--lambda")
    for arr, frag in ((np.array([True]), "boolean"), (np.array(["x"]), "text"), (np.zeros(0), "empty")):
        with pytest.raises(InputError, match=frag):
            as_numeric_array(arr, "--x")


def test_npz(tmp_path):
    np.savez(tmp_path / "ok.npz", X=np.ones((2, 3)), y=np.arange(3))
    d = load_npz(tmp_path / "ok.npz", "--data", keys=("X", "y"))
    assert d["y"].dtype == np.float64
    with pytest.raises(InputError, match=r"--data: .* lacks array\(s\) z \(found X, y\)"):
        load_npz(tmp_path / "ok.npz", "--data", keys=("X", "z"))
    np.savez(tmp_path / "obj.npz", X=np.array([None, 1], dtype=object))
    with pytest.raises(InputError, match="array 'X' .* holds Python objects"):
        load_npz(tmp_path / "obj.npz", "--data")
    (tmp_path / "text.npz").write_text("hello")
    with pytest.raises(InputError, match="not a .npz archive"):
        load_npz(tmp_path / "text.npz", "--data")
    np.save(tmp_path / "one.npy", np.ones(2))
    (tmp_path / "one.npz").write_bytes((tmp_path / "one.npy").read_bytes())
    with pytest.raises(InputError, match="holds one array"):
        load_npz(tmp_path / "one.npz", "--data")
    (tmp_path / "pk.npz").write_bytes(b"PK\x03\x04garbage")
    with pytest.raises(InputError, match="damaged .npz"):
        load_npz(tmp_path / "pk.npz", "--data")


def test_spd_and_condition_number():
    L, cond = parse_spd("1,100", "--lambda")
    assert np.allclose(L, np.diag([1.0, 100.0])) and cond == pytest.approx(100.0)
    _, cond = parse_spd("2,1;1,2", "--lambda")
    assert cond == pytest.approx(3.0)
    for text, frag in (("1e-300,1", "condition number 1e+300 exceeds 1e+12"), ("1e300,1", "entry 1e+300 is too large"),
                       ("1,-2", "--lambda is not positive definite"), ("1,2;3,4", "--lambda is not symmetric")):
        with pytest.raises(InputError) as exc:
            parse_spd(text, "--lambda")
        assert frag in str(exc.value) and "weights" not in str(exc.value), str(exc.value)
    parse_spd(f"1,{MAX_COND / 2:g}", "--lambda")  # just inside


# ------------------------------------------------------------------------------------------------
# guards


def test_memory_guard_refuses_with_the_estimate():
    est = guards.Estimate(5 * guards.GB, 1.0, {"big tensor": 4 * guards.GB, "small": guards.GB})
    guards.check_memory(est, 6.0)
    with pytest.raises(InputError) as exc:
        guards.check_memory(est, 2.0, hint="lower --seeds")
    msg = str(exc.value)
    assert "5 GB" in msg and "largest: big tensor, 4 GB" in msg and "2 GB" in msg and "--max-memory 2" in msg
    assert msg.endswith("lower --seeds")
    assert guards.available_memory() > 0
    limit, why = guards.memory_limit(None)
    assert 0 < limit <= guards.available_memory() and "--max-memory" in why


def test_progress_lines_with_eta_after_the_delay():
    now = [0.0]
    out = io.StringIO()
    p = guards.Progress("check x", delay=2.0, every=5.0, stream=out, clock=lambda: now[0], estimate=100.0)
    p.update(0.1)  # before the delay: silent
    assert out.getvalue() == ""
    now[0] = 3.0
    p.phase("training", 0.0, 0.5).sub(0.5)  # 25 % of the whole after 3 s: about 9 s left
    now[0] = 4.0
    p.update(0.9)  # within `every` of the last line: silent
    now[0] = 10.0
    p.update(0.0)  # nothing measurable yet: the up-front estimate
    p.done()
    lines = out.getvalue().splitlines()
    assert lines[0] == "check x: training 25% (3 s elapsed, about 9 s left)", lines
    assert "up-front estimate" in lines[1] and lines[-1].startswith("check x: done in")
    quiet = io.StringIO()
    q = guards.Progress("check x", enabled=False, stream=quiet, clock=lambda: 100.0)
    q.update(0.5)
    q.note("x")
    q.done()
    assert quiet.getvalue() == ""
