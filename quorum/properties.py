"""Java-properties parsing: the file format of Kafka's (and so sparkraft's) node configs.

Only the parts of java.util.Properties that config files use: ``#``/``!`` comments, ``key=value``,
``key: value`` and ``key value``, backslash escapes and line continuation. Keys and values are
trimmed; a repeated key keeps the last value, as Java does.
"""
from __future__ import annotations

_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}
_SEPARATORS = "=:"


def parse_properties(text: str) -> dict[str, str]:
    """Parse properties text into an ordered ``{key: value}``; raises ValueError on a bad escape."""
    result: dict[str, str] = {}
    for logical in _logical_lines(text):
        key, value = _split_key_value(logical)
        result[_unescape(key)] = _unescape(value).strip()
    return result


def _logical_lines(text: str):
    """Join continued lines (odd number of trailing backslashes); skip blanks and comments."""
    pending: str | None = None
    for raw in text.splitlines():
        line = raw.lstrip()
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        continued = trailing % 2 == 1
        if continued:
            line = line[:-1]
        pending = line if pending is None else pending + line
        if not continued:
            yield pending
            pending = None
    if pending is not None:
        yield pending


def _split_key_value(line: str) -> tuple[str, str]:
    """Split at the first unescaped separator (``=``, ``:`` or whitespace)."""
    i = 0
    while i < len(line):
        c = line[i]
        if c == "\\":
            i += 2
            continue
        if c in _SEPARATORS or c.isspace():
            break
        i += 1
    key, rest = line[:i], line[i:].lstrip()
    if rest[:1] in _SEPARATORS:
        rest = rest[1:].lstrip()
    return key, rest


def _unescape(s: str) -> str:
    if "\\" not in s:
        return s
    out: list[str] = []
    i = 0
    while i < len(s):
        c = s[i]
        if c != "\\" or i + 1 == len(s):
            out.append(c)
            i += 1
            continue
        nxt = s[i + 1]
        if nxt == "u":
            digits = s[i + 2 : i + 6]
            if len(digits) != 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise ValueError(f"malformed \\uxxxx escape in {s!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append(_ESCAPES.get(nxt, nxt))
        i += 2
    return "".join(out)
