"""A user's system for ``tverify check lyapunov``, parsed as data (never evaluated): the expression's syntax tree
checked against the allowed operations, names, nesting, degree and float64 coefficients before SymPy sees it.
Part of :mod:`theory.lyapunov`."""

from __future__ import annotations

import ast
import keyword
import math
import re

import sympy as sp

from theory.validation import InputError
from theory.lyapunov_conditions import Candidate, MAX_DEGREE, MAX_TERMS, MAX_VARS


# --------------------------------------------------------------------------------------------
# parsing a user's system (tverify check lyapunov)

_ALLOWED_BINOPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.Pow)


#: deepest expression tree --f/--V may have (SymPy's parser recursed past Python's limit near 1000)
MAX_NESTING = 500


def _ast_depth(tree) -> int:
    """Depth of an expression tree, counted without recursion."""
    deepest, todo = 0, [(tree.body, 1)]
    while todo:
        node, d = todo.pop()
        deepest = max(deepest, d)
        todo.extend((child, d + 1) for child in ast.iter_child_nodes(node) if not isinstance(child, ast.expr_context))
    return deepest


def _underscored_number(text: str) -> bool:
    """A number token of Python's holding ``_`` (``1_0``, ``1e0_1``, ``0x1_0``), found by Python's own tokenizer: a
    pattern missed the digits after a letter (hostile pass 48b F4)."""
    import io
    import tokenize

    try:
        return any(t.type == tokenize.NUMBER and "_" in t.string
                   for t in tokenize.generate_tokens(io.StringIO(text).readline))
    except (tokenize.TokenError, SyntaxError, ValueError):  # malformed text: the parser below says why
        return False


def _check_ast(text: str, option: str, names: set | None) -> set:
    """Whitelist the syntax of one expression: numbers, names, + − * / ** and parentheses; integer
    exponents 0..MAX_DEGREE. Returns the names used."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:  # a byte that is not UTF-8 (carried as a lone surrogate): the parser's traceback (20a F5)
        raise InputError(f"{option}: holds a byte that is not UTF-8 text: {text.encode('utf-8', 'backslashreplace').decode()!r}") from None
    if "^" in text:
        raise InputError(f"{option}: use ** for powers, not ^: {text!r}")
    if "#" in text:  # Python's parser drops the rest as a comment: 'x**2 # + y**2' was certified as x**2 (hostile pass 10)
        raise InputError(f"{option}: '#' is not allowed (Python would read the rest as a comment and drop it): {text!r}")
    if _underscored_number(text):  # Python reads 1_0 as 10, 1e0_1 as 10, 0x1_0 as 16: a typo taken for a number
        raise InputError(f"{option}: write numbers without '_' (Python would read 1_0 as 10): {text!r}")
    try:
        tree = ast.parse(text.strip(), mode="eval")
    except RecursionError:  # thousands of nested signs: Python's own parser gives up before any depth count
        raise InputError(f"{option}: the expression is nested deeper than Python's parser allows (a chain of "
                         f"signs or operations); at most {MAX_NESTING} levels are supported: expand or shorten it") from None
    except SyntaxError as exc:
        if "nested parentheses" in str(exc.msg):  # Python's parser stops at 200 levels of brackets
            raise InputError(f"{option}: {exc.msg} (Python's parser allows 200 levels); expand or shorten "
                             f"the expression ({len(text)} characters)") from None
        raise InputError(f"{option}: cannot parse {text!r} (allowed: numbers, the variables, + - * / ** and parentheses)") from None
    depth = _ast_depth(tree)
    if depth > MAX_NESTING:  # SymPy's parser recurses once per level (a RecursionError, a 1000-line traceback)
        raise InputError(f"{option}: the expression's tree is {depth} levels deep (a chain of operations or "
                         f"signs nested that deep); at most {MAX_NESTING} levels are supported: expand or shorten it")
    used: set = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Expression, ast.operator, ast.unaryop, ast.Load)):
            continue
        if isinstance(node, ast.BinOp):
            if not isinstance(node.op, _ALLOWED_BINOPS):
                raise InputError(f"{option}: operator not allowed in {text!r} (allowed: + - * / **)")
            if isinstance(node.op, ast.Pow):
                e = node.right
                neg = isinstance(e, ast.UnaryOp) and isinstance(e.op, ast.USub)
                inner = e.operand if neg else e
                if isinstance(inner, ast.Constant) and type(inner.value) is not int:
                    raise InputError(f"{option}: exponents must be whole numbers, got {inner.value!r} in {text!r}")
                if not isinstance(inner, ast.Constant):
                    raise InputError(f"{option}: an exponent must be a plain whole number (0 to {MAX_DEGREE}), not the "
                                     f"expression {ast.unparse(inner)[:40]!r}, in {text!r}")
                if neg:
                    raise InputError(f"{option}: not a polynomial (negative exponent) in {text!r}")
                if inner.value > MAX_DEGREE:
                    numeric = not any(isinstance(n, ast.Name) for n in ast.walk(node.left))
                    power = _short(ast.get_source_segment(text.strip(), node) or ast.unparse(node))
                    raise InputError(
                        f"{option}: exponent {inner.value} in {power} is above {MAX_DEGREE}, the largest exponent "
                        "allowed" + (" (a number raised to a power too: write its value instead)" if numeric
                                     else f" (polynomials up to degree {MAX_DEGREE})"))
            continue
        if isinstance(node, ast.UnaryOp):
            if not isinstance(node.op, (ast.USub, ast.UAdd)):
                raise InputError(f"{option}: operator not allowed in {text!r}")
            continue
        if isinstance(node, ast.Constant):
            if type(node.value) not in (int, float):
                raise InputError(f"{option}: only numbers and variables are allowed, got {node.value!r}")
            if not _fits_float64(node.value):
                number = ast.get_source_segment(text.strip(), node) or repr(node.value)
                raise InputError(f"{option}: the number {_short(number)} overflows float64 (largest about 1.8e308): "
                                 "a coefficient too large for float64 cannot be checked numerically; rescale it")
            number = ast.get_source_segment(text.strip(), node) or ""
            if node.value == 0 and isinstance(node.value, float) and _nonzero_text(number):  # 1e-400: Python reads
                raise InputError(f"{option}: the number {_short(number)} is below float64's range (it would read as "  # 0
                                 "0; smallest about 4.9e-324): rescale the system")  # (hostile pass 45a F4)
            continue
        if isinstance(node, ast.Name):
            if node.id in RESERVED_NAMES:
                raise InputError(f"{option}: {node.id!r} is not allowed (nan, inf, oo, zoo and I are not numbers a "
                                 "polynomial can have, nor variable names): use finite real numbers")
            if node.id in PARSER_NAMES:
                raise InputError(f"{option}: {node.id!r} is not allowed as a variable name (SymPy's parser writes the "
                                 "numbers with it): rename it in --f, --V and --vars")
            if names is not None and node.id not in names:
                raise InputError(f"{option}: unknown name {node.id!r} (the variables are {', '.join(sorted(names))})")
            used.add(node.id)
            continue
        what = "function calls" if isinstance(node, ast.Call) else type(node).__name__
        raise InputError(f"{option}: {what} not allowed in {text!r} (allowed: numbers, the variables, + - * / **)")
    bound = _ast_degree(tree)
    if bound > 4 * MAX_DEGREE:  # refuse before SymPy expands, e.g., ((x + y)**12)**12
        raise InputError(f"{option}: degree up to {bound} exceeds the largest supported degree {MAX_DEGREE}")
    terms = math.comb(len(used) + bound, len(used))
    if bound > MAX_DEGREE and terms > MAX_TERMS:  # ((x1+…+x6)**12)**4: minutes and GBs of expansion (44a F10)
        raise InputError(f"{option}: degree up to {bound} in {len(used)} variables: expanded it may have {terms:,} "
                         f"terms, more than the largest supported polynomial (degree {MAX_DEGREE} in {MAX_VARS} "
                         f"variables: {MAX_TERMS:,}); write it expanded, of degree at most {MAX_DEGREE}")
    return used


#: names SymPy or NumPy read as non-finite or non-real constants: refused as numbers and as variables
RESERVED_NAMES = frozenset({"nan", "NaN", "inf", "Inf", "infinity", "Infinity", "oo", "zoo", "I"})
#: the names SymPy's parser writes numbers with (auto_number, rationalize): a variable of one of them was called
#: (``-x*0.5`` → "'Symbol' object is not callable", blamed on a component that is fine: hostile pass 44a F8)
PARSER_NAMES = frozenset({"Integer", "Float", "Rational", "Symbol"})


def _nonzero_text(number: str) -> bool:
    """Whether a numeric literal's text is a number other than zero (``1e-400``, not ``0.0e5``)."""
    from decimal import Decimal, InvalidOperation

    try:
        return Decimal(number.replace("_", "")) != 0
    except (InvalidOperation, ValueError):
        return False


def _fits_float64(value) -> bool:
    """Whether a number (an int of any size, a float, a SymPy number) is finite as a float64."""
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _short(text: str) -> str:
    return text if len(text) <= 40 else f"{text[:20]}…{text[-8:]} ({len(text)} characters)"


def check_float64_coefficients(expr: sp.Expr, syms, what: str) -> None:
    """Refuse a polynomial with a coefficient that is not a finite float64 (the numeric checks
    evaluate it in float64: an int past 1.8e308 would stop them with an OverflowError), or a non-zero one below
    float64's range, which the checks would read as 0 (``-x*1e-300*1e-300``: "inconclusive", hostile pass 56b F4)."""
    for c in sp.Poly(expr, *syms).coeffs() if expr != 0 else ():
        if not _fits_float64(c):
            raise InputError(f"{what}: a coefficient ({_short(str(c))}) is too large for float64 (largest about "
                             "1.8e308): rescale the system")
        if c != 0 and float(c) == 0.0:
            raise InputError(f"{what}: a coefficient ({_short(str(c))}) is below float64's range once expanded (it "
                             "would read as 0; smallest about 4.9e-324): rescale the system")


def _ast_degree(node) -> int:
    """An upper bound on the total degree of a whitelisted expression (before SymPy expands it)."""
    if isinstance(node, ast.Expression):
        return _ast_degree(node.body)
    if isinstance(node, ast.Name):
        return 1
    if isinstance(node, ast.Constant):
        return 0
    if isinstance(node, ast.UnaryOp):
        return _ast_degree(node.operand)
    if isinstance(node, ast.BinOp):
        a, b = _ast_degree(node.left), _ast_degree(node.right)
        if isinstance(node.op, (ast.Add, ast.Sub)):
            return max(a, b)
        if isinstance(node.op, ast.Pow):
            return a * int(node.right.value)
        return a + b  # Mult, and Div (a non-constant divisor is refused later as non-polynomial)
    return 0


def _split_components(text: str, option: str) -> list[str]:
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch == "(":
            depth += 1
        elif ch == ")":
            depth -= 1
        if ch == "," and depth == 0:
            parts.append("".join(cur))
            cur = []
        else:
            cur.append(ch)
    parts.append("".join(cur))
    for k, p in enumerate(parts, 1):
        if not p.strip():
            raise InputError(f"{option}: empty component {k} in {text!r}")
    return parts


def natural_key(name: str) -> tuple:
    """Names in natural order: ``x2`` before ``x10`` (digit runs compare as numbers).

    >>> sorted(["x10", "x2", "x1", "y"], key=natural_key)
    ['x1', 'x2', 'x10', 'y']
    """
    return tuple(int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name))


def parse_system(f_text: str, V_text: str, vars_text: str | None = None) -> Candidate:
    """Parse a user's polynomial system and candidate (``tverify check lyapunov``).

    ``f_text``: the components of ``f`` separated by commas (``"-x**3 - y, x - y**3"``);
    ``V_text``: one expression; ``vars_text``: the variables separated by commas (default: the
    names used, in natural order: ``x1, x2, x10``; names must be ASCII). Only numbers, the variables, ``+ - * / **`` and parentheses
    are allowed (checked on the syntax tree before SymPy's parser sees it, with a namespace that
    holds only the variables); decimals become exact rationals. Every mistake (a parse error, an
    unknown name, a non-polynomial, a dimension mismatch, ``f(0) ≠ 0``, too many variables or too
    high a degree) is an :class:`InputError` naming it.

    >>> c = parse_system("-x**3 - y, x - y**3", "x**2 + y**2")
    >>> c.vars, c.vdot()
    ((x, y), -2*x**4 - 2*y**4)
    >>> parse_system("-x, -y", "x**2 - y**2", "x,y,z")
    Traceback (most recent call last):
    ...
    theory.validation.InputError: --f has 2 components but there are 3 variables (x, y, z)
    """
    from sympy.parsing.sympy_parser import parse_expr, rationalize, standard_transformations

    for opt, text in (("--f", f_text), ("--V", V_text)):
        if not isinstance(text, str) or not text.strip():
            raise InputError(f"{opt}: empty expression")
        if len(text) > 4000:
            raise InputError(f"{opt}: expression longer than 4000 characters")
    names = None
    if vars_text is not None:
        names_list = [v.strip() for v in vars_text.split(",")]
        for k, v in enumerate(names_list, 1):
            if not v:
                raise InputError(f"--vars: empty name at position {k} in {vars_text!r}")
            if not v.isidentifier() or keyword.iskeyword(v) or not v.isascii():
                why = "variable names are ASCII identifiers" if v.isidentifier() and not v.isascii() else \
                    "a variable name is an identifier (letters, digits, _), not a Python keyword"
                raise InputError(f"--vars: {v!r} is not a valid variable name ({why}): rename it in --f, --V and --vars")
            if v in RESERVED_NAMES:
                raise InputError(f"--vars: {v!r} is not allowed as a variable name (SymPy reads it as a constant)")
            if v in PARSER_NAMES:
                raise InputError(f"--vars: {v!r} is not allowed as a variable name (SymPy's parser writes the numbers "
                                 "with it): rename it in --f, --V and --vars")
        if len(set(names_list)) != len(names_list):
            raise InputError(f"--vars: repeated name in {vars_text!r}")
        names = set(names_list)
    comps = _split_components(f_text, "--f")
    used: set = set()
    for k, comp in enumerate(comps, 1):
        used |= _check_ast(comp, f"--f (component {k})", names)
    used |= _check_ast(V_text, "--V", names)
    if names is None:
        odd = sorted(v for v in used if not v.isascii())
        if odd:  # no evident order of Greek and Latin letters, and --vars takes ASCII names only
            raise InputError(f"--f/--V: variable names must be ASCII identifiers, got {', '.join(map(repr, odd))}: rename them "
                             "(and give --vars in the order of --f's components)")
        names_list = sorted(used, key=natural_key)
        if not names_list:
            raise InputError("no variables: --f and --V are constants (name them with --vars)")
    if len(names_list) > MAX_VARS:
        raise InputError(f"--vars: {len(names_list)} variables; at most {MAX_VARS} are supported")
    syms = tuple(sp.Symbol(v, real=True) for v in names_list)
    local = dict(zip(names_list, syms))
    glob = {"Integer": sp.Integer, "Float": sp.Float, "Rational": sp.Rational, "Symbol": sp.Symbol}
    trans = standard_transformations + (rationalize,)  # rationalize runs after auto_number

    def parse(text: str, opt: str) -> sp.Expr:
        try:
            e = parse_expr(text.strip(), local_dict=dict(local), global_dict=dict(glob), transformations=trans,
                           evaluate=True)
        except (SyntaxError, TypeError, ValueError, AttributeError, ZeroDivisionError) as exc:
            raise InputError(f"{opt}: cannot parse {text.strip()!r}: {exc}") from None
        except RecursionError:
            raise InputError(f"{opt}: the expression is nested too deeply for SymPy's parser: "
                             "expand or shorten it") from None
        if e.has(sp.zoo, sp.oo, sp.nan) or not e.free_symbols <= set(syms):
            raise InputError(f"{opt}: not a finite expression in {', '.join(names_list)}: {text.strip()!r}")
        e = sp.expand(sp.cancel(e))
        if not e.is_polynomial(*syms):
            raise InputError(f"{opt}: not a polynomial in {', '.join(names_list)}: {text.strip()!r}")
        deg = sp.Poly(e, *syms).total_degree() if e != 0 else 0
        if deg > MAX_DEGREE:
            raise InputError(f"{opt}: degree {deg} exceeds the largest supported degree {MAX_DEGREE}")
        check_float64_coefficients(e, syms, opt)
        return e

    f = tuple(parse(cmp, f"--f (component {k})") for k, cmp in enumerate(comps, 1))
    if len(f) != len(syms):
        raise InputError(f"--f has {len(f)} component{'s' if len(f) != 1 else ''} but there are {len(syms)} variables ({', '.join(names_list)})")
    V = parse(V_text, "--V")
    origin = {s: 0 for s in syms}
    nz = [k for k, fi in enumerate(f, 1) if fi.subs(origin) != 0]
    if nz:
        raise InputError(f"--f: f(0) ≠ 0 (component {nz[0]} is {f[nz[0] - 1].subs(origin)} at the origin); "
                         "the origin must be an equilibrium")
    cand = Candidate(syms, f, V, "user")
    check_float64_coefficients(cand.vdot(), syms, "∇V·f (from --f and --V)")
    return cand
