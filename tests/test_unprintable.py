"""A user's exception (or exit code) whose ``__str__``/``__repr__`` raises is reported under its own class,
its text ``<unprintable …>``, never as the formatting error (hostile pass 42a: "the code raised RuntimeError:
str boom" for a ``BadStr`` raised by the forward)."""

import pytest

from numerics.attention_rules import exc_text
from proofs_checks.sanity._loader import UserCodeError, describe_exception, user_code
from proofs_checks.sanity._modconfig_core import _short_exc
from theory.validation import exception_text, printable


class BadStr(Exception):
    def __str__(self):
        raise RuntimeError("str boom")

    def __repr__(self):
        raise RuntimeError("repr boom")


class Unprintable:
    def __str__(self):
        raise SystemExit(3)  # even an exit inside the formatting is not what is reported

    __repr__ = __str__


class NotAString(Exception):
    def __str__(self):
        return 42  # str() raises TypeError on it


@pytest.mark.parametrize("fmt", [exception_text, describe_exception, exc_text, _short_exc])
def test_the_real_class_is_named(fmt):
    assert fmt(BadStr()) == "BadStr: <unprintable BadStr>"
    assert fmt(NotAString()) == "NotAString: <unprintable NotAString>"
    assert fmt(ValueError("a\n  b")) == "ValueError: a b"


def test_printable_falls_back_and_keeps_ctrl_c():
    assert printable(Unprintable(), repr) == "<unprintable Unprintable>"
    assert printable([1, "x"], repr) == "[1, 'x']"

    class Interrupting:
        def __repr__(self):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        printable(Interrupting(), repr)


def test_user_code_reports_the_exit_and_the_class():
    with pytest.raises(UserCodeError, match=r"called sys\.exit\(<unprintable Unprintable>\)"):
        with user_code("--module", "forward"):
            raise SystemExit(Unprintable())
    with pytest.raises(UserCodeError, match=r"forward raised BadStr: <unprintable BadStr>$"):
        with user_code("--module", "forward"):
            raise BadStr()
