"""Reading the brief and a draft from files (the I/O half of ``verifier.inputs``).

Files are untrusted input: size-limited, strict UTF-8, and YAML/JSON read with the safe
readers of ``_safe_read``.  Every error is an :class:`InputError` of one line naming the file.
"""

from __future__ import annotations

from pathlib import Path

from triz_ri_smart_ai_evaluator._safe_read import parse_json, parse_yaml
from triz_ri_smart_ai_evaluator.errors import InputError

from .inputs import DRAFT_FORMAT, MAX_DRAFT_CHARS, Brief, Draft, parse_brief, parse_draft

MAX_FILE_BYTES = 2 * 1024 * 1024
_STRUCTURED = {".yaml", ".yml", ".json"}
_PLAIN = {".md", ".txt"}


def read_text(path: Path, *, limit: int = MAX_FILE_BYTES) -> str:
    """The file as UTF-8 text (a leading BOM dropped), at most ``limit`` bytes.  Raises
    InputError naming the file."""
    where = path.name
    try:
        size = path.stat().st_size
        if size > limit:
            raise InputError(f"{where}: file is {size:,} bytes, more than the limit of "
                             f"{limit:,}")
        data = path.read_bytes()
    except OSError as e:
        raise InputError(f"{where}: cannot read: {e.strerror or e}") from e
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as e:
        raise InputError(f"{where}: not valid UTF-8 at byte {e.start}") from e
    return text.removeprefix("\ufeff")


def _read_document(path: Path) -> object:
    # Untrusted input (spec 2.12, 9.4; issue 10): duplicate keys, deep nesting, over-long
    # numbers, NaN and YAML aliases are refused with one line, see _safe_read.
    text = read_text(path)
    if path.suffix.lower() == ".json":
        return parse_json(text, where=path.name)
    return parse_yaml(text, where=path.name)


def _kind(path: Path, allowed: set[str]) -> str:
    suffix = path.suffix.lower()
    if suffix not in allowed:
        raise InputError(f"{path.name}: unsupported file type {suffix or '(none)'!r}; "
                         f"expected one of {', '.join(sorted(allowed))}")
    return suffix


def load_brief(path: Path | str) -> Brief:
    """Read a brief from a ``.yaml``/``.yml``/``.json`` file.  Raises InputError."""
    path = Path(path)
    _kind(path, _STRUCTURED)
    return parse_brief(_read_document(path), path.name)


def load_draft(path: Path | str, *, step: str | None = None) -> Draft:
    """Read a draft: a ``triz-draft/1`` YAML/JSON file, or a ``.md``/``.txt`` file of text.

    For a plain text file ``step`` is required; for a structured file it is optional and, if
    given, must equal the file's step.  Raises InputError.
    """
    path = Path(path)
    suffix = _kind(path, _STRUCTURED | _PLAIN)
    where = path.name
    if suffix in _PLAIN:
        if step is None:
            raise InputError(f"{where}: a plain-text draft needs the step it renders (--step)")
        text = read_text(path)
        if len(text) > MAX_DRAFT_CHARS:
            raise InputError(f"{where}: text: draft text longer than {MAX_DRAFT_CHARS:,} "
                             "characters")
        return parse_draft({"format": DRAFT_FORMAT, "step": step, "text": text}, where)
    draft = parse_draft(_read_document(path), where)
    if step is not None and draft.step != step:
        raise InputError(f"{where}: step: the file says {draft.step!r}, the caller {step!r}")
    return draft
