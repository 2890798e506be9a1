"""Reading the evaluator's JSON and YAML input files with located, one-line errors, and
writing output files atomically."""

from __future__ import annotations

import hashlib
import os
import tempfile
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from ._safe_read import parse_json, parse_yaml
from .errors import InputError

M = TypeVar("M", bound=BaseModel)


def read_document(path: Path) -> Any:
    """Parse a JSON or YAML file (by extension; YAML otherwise) as untrusted input: duplicate
    keys, deep nesting, over-long numbers, NaN and YAML aliases are refused (see _safe_read).
    Raises InputError, one line naming the file."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"{path}: cannot read: {e}") from e
    if path.suffix.lower() == ".json":
        return parse_json(text, where=str(path))
    return parse_yaml(text, where=str(path))


def validation_message(error: ValidationError) -> str:
    """The first error of a pydantic ValidationError as ``field: message``, plus a count."""
    errors = error.errors(include_url=False)
    first = errors[0]
    loc = ".".join(str(p) for p in first["loc"]) or "(root)"
    msg = first["msg"].removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown field"
    more = f" (and {len(errors) - 1} more)" if len(errors) > 1 else ""
    return f"{loc}: {msg}{more}"


def load_model(path: Path, model: type[M]) -> M:
    """Read ``path`` into ``model``.  Raises InputError naming the file and the field."""
    data = read_document(path)
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise InputError(f"{path}: {validation_message(e)}") from e


def write_atomic(path: Path, data: bytes) -> str:
    """Write ``data`` to ``path`` atomically; return its SHA-256."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return hashlib.sha256(data).hexdigest()
