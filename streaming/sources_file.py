"""``materialize --sources FILE``: the clusters of a fleet (docs/use/fleet.md), one YAML file.

    sources:
      - name: payments-prod                  # letters, digits, '.', '_', '-'; unique
        bootstrap-controller: 10.0.0.1:9093,10.0.0.2:9093
        source: kafka                        # sparkraft (the default) or kafka
        command-config: /etc/sparkraft/payments.properties   # TLS, SCRAM: Kafka's client keys
        trigger: 1                           # and the other keys of materialize's own flags
        warehouse: s3://lake/payments        # an existing single-cluster warehouse joins as it is
      - name: staging
        bootstrap-controller: ${STAGING_CONTROLLERS}         # from the environment

Each entry takes the keys of ``materialize``'s own flags for one cluster (SOURCE_KEYS), but
``stall-timeout``: the job's watchdog ends the Python processes serving a stalled query's source,
which in one application would be every cluster's, so a fleet has none yet. Secrets never
go in the file, which people keep in version control: a password, a key or a JAAS line is refused
in one line naming where to put it instead (the ``command-config`` file, or ``${VARIABLE}`` for an
environment variable, which a value may name anywhere).
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Optional

NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
SOURCE_KEYS = ("name", "bootstrap-controller", "source", "command-config", "trigger", "idle-flush",
               "max-records-per-trigger", "warehouse")
SECRET_WORDS = ("password", "secret", "jaas", "token", "key")
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass(frozen=True)
class ClusterSource:
    """One cluster of the fleet, as its entry says."""

    name: str
    bootstrap: str
    protocol: str = "sparkraft"
    command_config: Optional[str] = None
    trigger_s: float = 1.0
    idle_flush_s: Optional[float] = None
    max_records_per_trigger: Optional[int] = None
    # where its tables are, when not the fleet's own place for them (an existing single-cluster
    # warehouse joining the fleet goes on from where it is)
    warehouse: Optional[str] = None


class SourcesError(ValueError):
    """The sources file cannot be used: one line saying where and why."""


def read_sources(path: str) -> list[ClusterSource]:
    """The clusters ``path`` lists, checked; SourcesError (one line) for anything wrong."""
    import yaml

    try:
        with open(path) as f:
            doc = yaml.safe_load(f)
    except OSError as e:
        raise SourcesError(f"{path}: {e.strerror or e}") from None
    except yaml.YAMLError as e:
        where = getattr(e, "problem_mark", None)
        raise SourcesError(f"{path}: not YAML" + (f" (line {where.line + 1})" if where else "")) from None
    entries = doc.get("sources") if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not entries:
        raise SourcesError(f"{path}: needs a list of clusters under 'sources:'")
    out, seen = [], set()
    for i, entry in enumerate(entries, 1):
        source = _entry(path, i, entry)
        if source.name in seen:
            raise SourcesError(f"{path}: cluster {source.name!r} is listed twice")
        seen.add(source.name)
        out.append(source)
    return out


def _entry(path: str, i: int, entry) -> ClusterSource:
    where = f"{path}: source {i}"
    if not isinstance(entry, dict):
        raise SourcesError(f"{where} is not a mapping of keys to values")
    for key in entry:
        if any(word in str(key).lower() for word in SECRET_WORDS):
            raise SourcesError(f"{where}: {key!r} looks like a secret, which this file must not hold: put it in the "
                               f"command-config file (Kafka's client keys), or name an environment variable as "
                               f"${{VARIABLE}}")
        if key == "checkpoint":
            raise SourcesError(f"{where}: 'checkpoint' is the fleet's own (--checkpoint), not a cluster's: a cluster's "
                               f"progress is in its tables (name them with 'warehouse')")
        if key not in SOURCE_KEYS:
            raise SourcesError(f"{where}: unknown key {key!r} (known: {', '.join(SOURCE_KEYS)})")
    values = {k: _expanded(where, k, v) for k, v in entry.items()}
    name = values.get("name")
    if not name or not NAME.match(name):
        raise SourcesError(f"{where}: 'name' must be 1 to 64 letters, digits, '.', '_' or '-' (got {name!r})")
    where = f"{path}: cluster {name!r}"
    bootstrap = values.get("bootstrap-controller")
    if not bootstrap:
        raise SourcesError(f"{where} needs 'bootstrap-controller' (HOST:PORT[,HOST:PORT...])")
    protocol = values.get("source", "sparkraft")
    if protocol not in ("sparkraft", "kafka"):
        raise SourcesError(f"{where}: 'source' is sparkraft or kafka, not {protocol!r}")
    config = values.get("command-config")
    if config is not None and not os.path.isfile(config):
        raise SourcesError(f"{where}: command-config {config} is not a file")
    return ClusterSource(name, bootstrap, protocol, config,
                         _number(where, values, "trigger", float, 1.0, minimum=0.0),
                         _number(where, values, "idle-flush", float, None, minimum=0.0),
                         _number(where, values, "max-records-per-trigger", int, None, minimum=1),
                         values.get("warehouse"))


def _expanded(where: str, key: str, value) -> str:
    """A value as text, ``${VARIABLE}`` replaced by the environment's (SourcesError if unset)."""
    text = str(value)

    def variable(m: re.Match) -> str:
        if m.group(1) not in os.environ:
            raise SourcesError(f"{where}: {key} names ${{{m.group(1)}}}, which the environment does not set")
        return os.environ[m.group(1)]

    return _VARIABLE.sub(variable, text)


def _number(where: str, values: dict, key: str, kind, default, minimum):
    if key not in values:
        return default
    try:
        number = kind(values[key])
    except ValueError:
        raise SourcesError(f"{where}: {key} must be a number, not {values[key]!r}") from None
    if number < minimum:
        raise SourcesError(f"{where}: {key} must be at least {minimum:g}, not {number:g}")
    return number
