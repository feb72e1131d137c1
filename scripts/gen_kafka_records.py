"""Generate quorum/kafka_log/gen/records.py, the readers and writers of Apache Kafka's metadata
records, from the project's description of them (quorum/kafka_log/metadata_records.schema).

    python scripts/gen_kafka_records.py           # rewrite the module
    python scripts/gen_kafka_records.py --check   # exit 1 if it is stale (a test runs this)

Each record type gets one function per struct, reading a version's fields in wire order (the
fields, then the tagged-field section) and returning them as a dict in declaration order, keyed
by the names kafka-dump-log prints (camelCase) and holding what it prints (UUIDs in Kafka's text
form, bytes as base64); a tagged field equal to its default is left out, as Kafka leaves it out.
Each also gets a writer taking such a dict (a missing key is the field's default) and a version:
what a reader returns, a writer writes back byte for byte.
"""
from __future__ import annotations

import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

ROOT = Path(__file__).resolve().parent.parent
SCHEMA = ROOT / "quorum" / "kafka_log" / "metadata_records.schema"
OUT = ROOT / "quorum" / "kafka_log" / "gen" / "records.py"

PRIMITIVES = {  # type -> (how a Reader named {r} reads it, the default of a field that has none)
    "int8": ("{r}.int8()", 0), "int16": ("{r}.int16()", 0), "int32": ("{r}.int32()", 0),
    "int64": ("{r}.int64()", 0), "uint16": ("{r}.uint16()", 0), "float64": ("{r}.float64()", 0.0),
    "bool": ("{r}.bool()", False), "string": ("{r}.compact_string()", ""),
    "bytes": ("_b64({r}.compact_bytes())", ""), "uuid": ("{r}.uuid()", "AAAAAAAAAAAAAAAAAAAAAA"),
}

WRITERS = {  # type -> how a Writer named {w} writes the value {x}
    "int8": "{w}.int8({x})", "int16": "{w}.int16({x})", "int32": "{w}.int32({x})", "int64": "{w}.int64({x})",
    "uint16": "{w}.uint16({x})", "float64": "{w}.float64({x})", "bool": "{w}.bool({x})",
    "string": "{w}.compact_string({x})", "bytes": "{w}.compact_bytes(_unb64({x}))", "uuid": "{w}.uuid({x})",
}
ARRAY_WRITERS = {"int32": "{w}.int32_array({x})", "uuid": "{w}.uuid_array({x})"}

ARRAY_READERS = {  # arrays of these are read whole (one unpack): a snapshot holds millions of them
    "int32": "{r}.int32_array()", "uuid": "{r}.uuid_array()",
}


@dataclass
class Field:
    name: str
    type: str  # a primitive, "[]T" or "[]Struct"
    nullable: bool
    since: int
    tag: Optional[int]
    default: object
    fields: list["Field"] = field(default_factory=list)  # a struct array's fields

    @property
    def json_name(self) -> str:
        return self.name[0].lower() + self.name[1:]

    @property
    def item(self) -> Optional[str]:
        return self.type[2:] if self.type.startswith("[]") else None


@dataclass
class Record:
    api_key: int
    name: str
    type_name: str
    max_version: int
    fields: list[Field]


def _default(text: Optional[str], type_: str, nullable: bool) -> object:
    if text is None:
        return [] if type_.startswith("[]") else PRIMITIVES[type_][1]
    if text == "null":
        if not nullable:
            raise ValueError(f"default=null on a field that is not nullable ({type_})")
        return None
    if text in ("true", "false"):
        return text == "true"
    return int(text)


def parse(text: str) -> list[Record]:
    records: list[Record] = []
    stack: list[tuple[int, list[Field]]] = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        indent = len(line) - len(line.lstrip())
        words = line.split()
        if words[0] == "record":
            versions = words[4].split("-")
            records.append(Record(int(words[1]), words[2], words[3], int(versions[-1]), []))
            stack = [(0, records[-1].fields)]
            continue
        while stack and indent <= stack[-1][0] and len(stack) > 1:
            stack.pop()
        name, type_, *options = words
        opts = dict(o.split("=", 1) if "=" in o else ("since", o) for o in options)
        nullable = type_.endswith("?")
        type_ = type_.rstrip("?")
        item = type_[2:] if type_.startswith("[]") else type_
        if item not in PRIMITIVES and not item[:1].isupper():
            raise ValueError(f"line {number}: unknown type {type_}")
        since = int(re.fullmatch(r"v(\d+)\+", opts["since"]).group(1)) if "since" in opts else 0
        f = Field(name, type_, nullable, since, int(opts["tag"]) if "tag" in opts else None,
                  _default(opts.get("default"), type_, nullable))
        stack[-1][1].append(f)
        if item not in PRIMITIVES:
            stack.append((indent, f.fields))
    return records


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


def _read_expr(f: Field, struct_fn: dict[str, str], reader: str) -> str:
    """The expression that reads ``f`` from the Reader named ``reader``."""
    item = f.item
    if item is None:
        return PRIMITIVES[f.type][0].format(r=reader)
    if item in ARRAY_READERS:
        expr = ARRAY_READERS[item].format(r=reader)
    else:
        inner = struct_fn[item] if item not in PRIMITIVES else f"lambda x: {PRIMITIVES[item][0].format(r='x')}"
        expr = f"{reader}.compact_array({inner})"
    return expr if f.nullable else f"_or_empty({expr})"


def _struct(fn: str, fields: list[Field], out: list[str], prefix: str) -> None:
    """Emit the reader of a struct (its nested structs first)."""
    struct_fn: dict[str, str] = {}
    for f in fields:
        if f.fields:
            struct_fn[f.item] = f"{prefix}_{_snake(f.item)}"
            _struct(struct_fn[f.item], f.fields, out, prefix)
    out.append(f"def {fn}(r: Reader, v: int = 0) -> dict:")
    if not fields:
        out.append("    r.tagged_fields()")
        out.append("    return {}")
        out += ["", ""]
        return
    values = {}
    for i, f in enumerate(fields):
        var = values[f.name] = f"f{i}"
        if f.tag is None:
            expr = _read_expr(f, struct_fn, "r")
            out.append(f"    {var} = {expr} if v >= {f.since} else {f.default!r}" if f.since else f"    {var} = {expr}")
    has_tags = any(f.tag is not None for f in fields)
    out.append("    tagged = r.tagged_fields()" if has_tags else "    r.tagged_fields()")
    for f in fields:
        if f.tag is not None:
            present = f"t is not None and v >= {f.since}" if f.since else "t is not None"
            out.append(f"    t = tagged.get({f.tag})")
            out.append(f"    {values[f.name]} = {_read_expr(f, struct_fn, 't')} if {present} else {f.default!r}")
    out.append("    out = {}")
    for f in fields:
        var = values[f.name]
        line = f"out[{f.json_name!r}] = {var}"
        conditions = []
        if f.since:
            conditions.append(f"v >= {f.since}")
        if f.tag is not None:
            conditions.append(f"{var} is not None" if f.default is None else f"{var} != {f.default!r}")
        out.append(f"    if {' and '.join(conditions)}:\n        {line}" if conditions else f"    {line}")
    out.append("    return out")
    out += ["", ""]


def _write_expr(f: Field, struct_fn: dict[str, str], writer: str, value: str) -> str:
    """The statement that writes ``value`` as ``f`` with the Writer named ``writer``."""
    item = f.item
    if item is None:
        return WRITERS[f.type].format(w=writer, x=value)
    if not f.nullable:
        value = f"({value} or [])"
    if item in ARRAY_WRITERS:
        return ARRAY_WRITERS[item].format(w=writer, x=value)
    inner = struct_fn[item] if item not in PRIMITIVES else f"lambda w, y: {WRITERS[item].format(w='w', x='y')}"
    return f"{writer}.compact_array({value}, {inner})"


def _struct_writer(fn: str, fields: list[Field], out: list[str], prefix: str) -> None:
    """Emit the writer of a struct (its nested structs' first)."""
    struct_fn: dict[str, str] = {}
    for f in fields:
        if f.fields:
            struct_fn[f.item] = f"{prefix}_{_snake(f.item)}"
            _struct_writer(struct_fn[f.item], f.fields, out, prefix)
    out.append(f"def {fn}(w: Writer, d: dict, v: int = 0) -> None:")
    for f in fields:
        if f.tag is None:
            stmt = _write_expr(f, struct_fn, "w", f"d.get({f.json_name!r}, {f.default!r})")
            out.append(f"    if v >= {f.since}:\n        {stmt}" if f.since else f"    {stmt}")
    tagged = sorted((f for f in fields if f.tag is not None), key=lambda f: f.tag)
    if not tagged:
        out.append("    w.tagged_fields([])")
        out += ["", ""]
        return
    out.append("    tags = []")
    for f in tagged:
        out.append(f"    x = d.get({f.json_name!r}, {f.default!r})")
        differs = "x is not None" if f.default is None else f"x != {f.default!r}"
        out.append(f"    if {differs}{f' and v >= {f.since}' if f.since else ''}:")
        out.append(f"        t = Writer()")
        out.append(f"        {_write_expr(f, struct_fn, 't', 'x')}")
        out.append(f"        tags.append(({f.tag}, bytes(t.buf)))")
    out.append("    w.tagged_fields(tags)")
    out += ["", ""]


def generate(records: list[Record]) -> str:
    out = ['"""Readers and writers of Apache Kafka\'s metadata records. Generated by scripts/gen_kafka_records.py from',
           'quorum/kafka_log/metadata_records.schema: do not edit; change the description and run the script."""',
           "# flake8: noqa", "from __future__ import annotations", "", "import base64", "",
           "from quorum.kafka_log.wire import Reader, Writer", "", "",
           "def _b64(raw):", "    return None if raw is None else base64.b64encode(raw).decode()", "", "",
           "def _unb64(text):", "    return None if text is None else base64.b64decode(text)", "", "",
           "def _or_empty(items):", "    return [] if items is None else items", "", ""]
    table, writers = [], []
    for rec in records:
        fn = f"_read_{_snake(rec.name)}"
        _struct(fn, rec.fields, out, f"_{_snake(rec.name)}")
        table.append(f"    {rec.api_key}: ({rec.type_name!r}, {rec.max_version}, {fn}),")
        wfn = f"_write_{_snake(rec.name)}"
        _struct_writer(wfn, rec.fields, out, f"_w_{_snake(rec.name)}")
        writers.append(f"    {rec.api_key}: {wfn},")
    out.append("# api key -> (the type's name as Kafka prints it, its newest version known here, its reader)")
    out.append("RECORDS = {")
    out.extend(table)
    out.append("}")
    out.append("")
    out.append("# api key -> its writer: (Writer, the fields as its reader returns them, version)")
    out.append("WRITERS = {")
    out.extend(writers)
    out.append("}")
    return "\n".join(out) + "\n"


def main() -> int:
    text = generate(parse(SCHEMA.read_text()))
    if "--check" in sys.argv[1:]:
        if not OUT.exists() or OUT.read_text() != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run python scripts/gen_kafka_records.py", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
