"""Where a warehouse lives: a local path, ``file://``, or an object store (``s3://bucket/prefix``).

delta-rs opens object stores itself, configured by the standard AWS environment variables
(``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``, ``AWS_REGION``, ``AWS_ENDPOINT_URL``,
``AWS_ALLOW_HTTP``...) and by the storage options given here, which take precedence: each command
that opens a warehouse takes ``--storage-option KEY=VALUE`` and sets them once for its process
(:func:`set_options`); every table this package opens passes :func:`options`.

Two writers commit to one warehouse at once (the materialiser and the maintenance job). On a local
disk a commit is an atomic create; on S3 delta-rs makes it a conditional write (``If-None-Match``),
which a store must refuse when the commit file exists, or one writer's commit silently replaces the
other's. :func:`check_conditional_writes` asks the store before a writer starts and refuses one that
does not refuse, in one line (``AWS_S3_ALLOW_UNSAFE_RENAME=true`` accepts the risk, for one writer).
Option values are never logged: they hold credentials.
"""
from __future__ import annotations

import logging
import os
import uuid
from typing import Optional
from urllib.parse import urlparse

log = logging.getLogger(__name__)

OBJECT_STORE_SCHEMES = ("s3", "s3a")
UNSAFE_OPT_IN = "AWS_S3_ALLOW_UNSAFE_RENAME"
PROBE_PREFIX = "_sparkraft_probe"  # under the warehouse: one object per check, deleted after it

_options: dict[str, str] = {}


class StorageError(ValueError):
    """The warehouse's store cannot be used as configured (one line, for the CLI)."""


def parse_options(items: list[str] | None) -> dict[str, str]:
    """``KEY=VALUE`` strings (``--storage-option``) as a dict; ValueError names a bad one."""
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise ValueError(f"--storage-option {item.split('=')[0]!r}: expected KEY=VALUE")
        out[key.strip()] = value
    return out


def set_options(options: dict[str, str]) -> None:
    """The storage options of this process (a command's ``--storage-option``s)."""
    _options.clear()
    _options.update(options)


def options() -> Optional[dict[str, str]]:
    """What delta-rs opens tables with (None: only the environment)."""
    return dict(_options) if _options else None


def is_object_store(uri: str) -> bool:
    return urlparse(str(uri)).scheme.lower() in OBJECT_STORE_SCHEMES


def _setting(*names: str) -> Optional[str]:
    """A setting from the storage options (any case) or else the environment."""
    lowered = {k.lower(): v for k, v in _options.items()}
    for name in names:
        if name.lower() in lowered:
            return lowered[name.lower()]
    for name in names:
        if os.environ.get(name):
            return os.environ[name]
    return None


def s3a_settings() -> dict[str, str]:
    """The same store for Hadoop's ``s3a`` file system (Spark's Delta reader): its endpoint, region
    and credentials from the storage options or the environment, path-style requests where an
    endpoint is given (S3-compatible stores), unless AWS_VIRTUAL_HOSTED_STYLE_REQUEST is true.
    Empty where nothing is set: s3a's own defaults and credential chain then apply."""
    endpoint = _setting("AWS_ENDPOINT_URL", "AWS_ENDPOINT", "endpoint_url", "endpoint")
    pairs = {"fs.s3a.endpoint": endpoint,
             "fs.s3a.endpoint.region": _setting("AWS_REGION", "AWS_DEFAULT_REGION", "region"),
             "fs.s3a.access.key": _setting("AWS_ACCESS_KEY_ID", "access_key_id"),
             "fs.s3a.secret.key": _setting("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
             "fs.s3a.session.token": _setting("AWS_SESSION_TOKEN", "session_token")}
    if endpoint:
        virtual = (_setting("AWS_VIRTUAL_HOSTED_STYLE_REQUEST", "virtual_hosted_style_request") or "").lower()
        pairs["fs.s3a.path.style.access"] = "false" if virtual == "true" else "true"
        if endpoint.startswith("http://"):
            pairs["fs.s3a.connection.ssl.enabled"] = "false"
    return {k: v for k, v in pairs.items() if v}


def s3_client():
    """A boto3 client for the store the options and environment name (the probe, and tests)."""
    import boto3

    return boto3.client(
        "s3", endpoint_url=_setting("AWS_ENDPOINT_URL", "AWS_ENDPOINT", "endpoint_url", "endpoint"),
        region_name=_setting("AWS_REGION", "AWS_DEFAULT_REGION", "region") or "us-east-1",
        aws_access_key_id=_setting("AWS_ACCESS_KEY_ID", "access_key_id"),
        aws_secret_access_key=_setting("AWS_SECRET_ACCESS_KEY", "secret_access_key"),
        aws_session_token=_setting("AWS_SESSION_TOKEN", "session_token"))


def check_conditional_writes(uri: str) -> None:
    """For an object-store warehouse: write one probe object twice with ``If-None-Match: *``; the
    store must refuse the second. StorageError if it does not (or cannot be reached), unless
    AWS_S3_ALLOW_UNSAFE_RENAME is true."""
    if not is_object_store(uri):
        return
    if (_setting(UNSAFE_OPT_IN) or "").lower() == "true":
        log.warning("%s=true: commits to %s are not protected from a second writer; run one writer only",
                    UNSAFE_OPT_IN, uri)
        return
    parsed = urlparse(uri)
    bucket, key = parsed.netloc, f"{parsed.path.strip('/')}/{PROBE_PREFIX}/{uuid.uuid4().hex}".lstrip("/")
    try:
        from botocore.exceptions import BotoCoreError, ClientError
    except ImportError:  # pragma: no cover - boto3 is a dependency
        raise StorageError("checking an object store's conditional writes needs boto3 (pip install boto3)") from None
    client = s3_client()
    try:
        client.put_object(Bucket=bucket, Key=key, Body=b"1", IfNoneMatch="*")
        try:
            client.put_object(Bucket=bucket, Key=key, Body=b"2", IfNoneMatch="*")
            refused = False
        except ClientError as e:
            if e.response.get("Error", {}).get("Code") not in ("PreconditionFailed", "412", "ConditionalRequestConflict"):
                raise
            refused = True
        client.delete_object(Bucket=bucket, Key=key)
    except (BotoCoreError, ClientError) as e:
        raise StorageError(f"cannot write to {uri}: {_one_line(e)}") from None
    if not refused:
        raise StorageError(
            f"the object store of {uri} does not refuse a conditional write (If-None-Match): two writers "
            f"(the materialiser and the maintenance job) could overwrite each other's commits. Use a store "
            f"with conditional writes (AWS S3, or an S3-compatible one that has them), or set "
            f"{UNSAFE_OPT_IN}=true to accept the risk with a single writer")


def _one_line(e: BaseException) -> str:
    return " ".join(str(e).split())
