"""The limits on input, in one place, each with the message that names it.

archspec reads files and numbers that anyone can write. Every reader refuses, early and in one
line, what it cannot handle, so that nothing reads until memory runs out, recurses until the
stack ends or turns a number silently into another:

===========================  ==========================  ==========================================
limit                        value                       applies to
===========================  ==========================  ==========================================
``MAX_FILE_BYTES``           1 MiB                       a spec, preset or claims file
``MAX_DEPTH``                32 levels of nesting        tables and arrays in such a file
``MAX_YAML_NODES``           100,000 values              a YAML document, aliases expanded
``MAX_INTEGER``              2**1024 - 1 (about 1.8e308) an integer in a file or on the command line
``MAX_EXPONENT``             ±400                        the exponent of a number written as 3e11
``MAX_NUMBER_CHARS``         1,000 characters            a number written on the command line
``MAX_KINDS``                384 layer kinds             the ``[kinds]`` of one spec
===========================  ==========================  ==========================================

``MAX_INTEGER`` is the float range: every number that can be written as a finite double is
accepted, exactly (``1e19`` is the integer 10**19). Results may be far larger (a product of such
numbers) and are computed and printed exactly. Python's own limit on converting integers to text
(4,300 digits) is never reached by input: a number is refused by its length before it is converted.

``MAX_KINDS`` bounds the distinct layer kinds, not the layers: every planner's work grows with the kinds
(each is validated and described as a spec of its own), and at the limit each still answers within a
second (benchmarks/kinds.py). The most varied released models have at most one kind per layer, fewer
than 200 (Nemotron-Ultra-253B has 162 layers, OpenELM 16 to 36); a stack of 10^6 layers of a few kinds
is planned as fast as one of 10.
"""

from __future__ import annotations

MAX_FILE_BYTES = 1 << 20
MAX_DEPTH = 32
MAX_YAML_NODES = 100_000
MAX_INTEGER_BITS = 1024
MAX_INTEGER = (1 << MAX_INTEGER_BITS) - 1
MAX_EXPONENT = 400
MAX_NUMBER_CHARS = 1_000
MAX_KINDS = 384
ECHO_CHARS = 80  # the most characters of a value that a message repeats


def file_too_large(size: int | None = None) -> str:
    got = f" (it has {size:,})" if size is not None else ""
    return f"larger than {MAX_FILE_BYTES:,} bytes{got}, the most archspec reads from a spec file"


def too_deep(where: str = "") -> str:
    at = f" at {where}" if where else ""
    return f"nested more than {MAX_DEPTH} levels deep{at}; spec files need a few levels at most"


def too_many_yaml_nodes() -> str:
    return (
        f"the YAML document has more than {MAX_YAML_NODES:,} values (an alias counts its anchored "
        "value each time it is used); a spec file needs a few dozen"
    )


def too_many_kinds(count: int) -> str:
    return (
        f"kinds: {count:,} layer kinds, more than the {MAX_KINDS:,} archspec plans; the most varied released "
        "models have one per layer, fewer than 200: give layers that are alike one kind"
    )


def integer_too_large(digits: int | None = None) -> str:
    got = f" (it has {digits:,} digits)" if digits else ""
    return f"integer too large{got}; archspec accepts integers up to 2**1024 - 1, about 1.8e308"


def digits_of(n: int) -> int:
    """The number of decimal digits of |n|, without converting it to text."""
    n = abs(n)
    if n == 0:
        return 1
    d = max(1, int(n.bit_length() * 0.30102999566398120))  # log10(2)
    if n >= 10**d:
        d += 1
    return d


def float_or_int(x) -> float | int:
    """A JSON-ready real number from an exact one (int, Fraction, Decimal): the nearest float, or,
    beyond the float range (about 1.8e308), the nearest integer; never inf or nan."""
    if isinstance(x, int):
        return x
    try:
        value = float(x)
    except OverflowError:
        return round(x)
    if value != value or value in (float("inf"), float("-inf")):
        if isinstance(x, float):
            raise ValueError(f"{x} is not a finite number")
        return round(x)
    return value
