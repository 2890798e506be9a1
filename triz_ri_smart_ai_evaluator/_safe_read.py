"""Reading untrusted JSON and YAML text into plain data (issue 10, defect classes 4 and 5).

No I/O: text in, data out.  Used by every reader of an input the evaluator does not write
itself: the CLI's input files (``_io``), the verifier's brief and draft (``verifier.inputs``)
and the service's request bodies (``service.app``).

A plain ``json.loads`` or ``yaml.safe_load`` takes things silently that must not reach a
signal, or crashes on them with an internal error instead of refusing the input:

* a **duplicate key** is last-wins, so a second ``state: passed`` hides a failed critical
  checklist item;
* **nesting** a few thousand levels deep exhausts the recursive parsers (RecursionError);
* an **integer literal** past Python's 4,300-digit limit raises ValueError inside json.loads;
* ``NaN`` and ``Infinity`` are not JSON, though Python's json reads them;
* a YAML **alias** can expand a small file into a huge tree (billion laughs).

Each is refused here with an :class:`~.errors.InputError` of one line naming ``where`` (a file
or "request body") and the line where it is known.  Depth and number length are bounded before
the recursive part of each parser runs: for JSON by a non-recursive scan of the text, for YAML
in the composer, which counts the levels it opens and stops at the limit before recursing.
"""

from __future__ import annotations

import json
import re
from typing import Any, NoReturn

import yaml
from yaml.composer import ComposerError
from yaml.constructor import ConstructorError

from .errors import InputError

#: The deepest nesting of lists and mappings an input may have.  The real inputs need 4 levels;
#: a parser's recursion limit is far above this.
MAX_DEPTH = 64
#: The longest number literal (digits, sign, point, exponent) an input may spell.
MAX_NUMBER_CHARS = 100
_SHOWN_KEY = 60

# One token of JSON text that matters to the pre-scan: a string (skipped whole, so brackets and
# digits inside it do not count), a bracket, a number literal, or a constant Python's json
# accepts but JSON has not.  Possessive quantifiers: no backtracking on long strings.
_JSON_TOKEN = re.compile(r'"(?:[^"\\]++|\\.)*+"|[\[\]{}]|-?[0-9][0-9.eE+\-]*+|NaN|-?Infinity',
                         re.DOTALL)


def _line(text: str, pos: int) -> int:
    return text.count("\n", 0, pos) + 1


def _one_line(text: object) -> str:
    return " ".join(str(text).split())


def _key(key: object) -> str:
    shown = repr(key)
    return shown if len(shown) <= _SHOWN_KEY else shown[:_SHOWN_KEY] + "..."


def _prescan_json(text: str, where: str) -> None:
    """Refuse nesting deeper than MAX_DEPTH, long number literals and NaN/Infinity, with the
    line; without recursion and before json.loads (which recurses once per level)."""
    depth = 0
    for match in _JSON_TOKEN.finditer(text):
        token = match.group()
        first = token[0]
        if first == '"':
            continue
        if first in "[{":
            depth += 1
            if depth > MAX_DEPTH:
                raise InputError(f"{where}:{_line(text, match.start())}: nested deeper than "
                                 f"{MAX_DEPTH} levels")
        elif first in "]}":
            depth -= 1  # an unbalanced bracket is json.loads's to report, with its line
        elif token.endswith(("NaN", "Infinity")):
            raise InputError(f"{where}:{_line(text, match.start())}: {token} is not a JSON "
                             "number")
        elif len(token) > MAX_NUMBER_CHARS:
            raise InputError(f"{where}:{_line(text, match.start())}: a number of "
                             f"{len(token):,} characters is longer than the limit of "
                             f"{MAX_NUMBER_CHARS}")


class _DuplicateKey(Exception):
    def __init__(self, key: str) -> None:
        super().__init__(key)
        self.key = key


def _unique_object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    obj = dict(pairs)
    if len(obj) != len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                raise _DuplicateKey(key)
            seen.add(key)
    return obj


def _no_constant(name: str) -> NoReturn:
    # a backstop: the pre-scan has already refused NaN and Infinity outside strings
    raise ValueError(f"{name} is not a JSON number")


def parse_json(text: str | bytes, *, where: str) -> Any:
    """Parse untrusted JSON text (bytes must be UTF-8).

    Raises InputError, one line naming ``where``: malformed JSON, a duplicate key in an object,
    nesting deeper than MAX_DEPTH, a number literal longer than MAX_NUMBER_CHARS, NaN or
    Infinity.
    """
    if isinstance(text, bytes):
        try:
            text = text.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"{where}: not valid UTF-8 at byte {e.start}") from e
    _prescan_json(text, where)
    try:
        return json.loads(text, object_pairs_hook=_unique_object, parse_constant=_no_constant)
    except _DuplicateKey as e:
        raise InputError(f"{where}: duplicate key {_key(e.key)} in one JSON object (a later "
                         "value would silently replace the earlier)") from e
    except json.JSONDecodeError as e:
        raise InputError(f"{where}:{e.lineno}: malformed JSON: {e.msg}") from e
    except RecursionError as e:  # a last resort: the pre-scan bounds the depth
        raise InputError(f"{where}: malformed JSON: nested too deeply") from e
    except ValueError as e:  # a last resort: a number Python cannot hold
        raise InputError(f"{where}: malformed JSON: {_one_line(e)}") from e


_NUMBER_TAGS = frozenset({"tag:yaml.org,2002:int", "tag:yaml.org,2002:float"})


def _refusal(problem: str, mark: Any) -> ComposerError:
    """A refusal located at ``mark`` (the start of the event or node it is about)."""
    return ComposerError(None, None, problem, mark)


class _InputLoader(yaml.SafeLoader):
    """The safe loader for untrusted input: no aliases, at most MAX_DEPTH levels, number
    literals of at most MAX_NUMBER_CHARS characters, no two keys of a mapping equal once read.

    The composer is the one recursive stage of PyYAML's loader (the scanner and the parser are
    state machines), so counting levels there bounds the recursion before it happens."""

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self._depth = 0

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        if self.check_event(yaml.AliasEvent):
            raise _refusal("aliases are not allowed", self.current_event.start_mark)
        if self.check_event(yaml.CollectionStartEvent):
            if self._depth >= MAX_DEPTH:
                raise _refusal(f"nested deeper than {MAX_DEPTH} levels",
                               self.current_event.start_mark)
            self._depth += 1
            try:
                return super().compose_node(parent, index)
            finally:
                self._depth -= 1
        node = super().compose_node(parent, index)
        if (isinstance(node, yaml.ScalarNode) and node.tag in _NUMBER_TAGS
                and len(node.value) > MAX_NUMBER_CHARS):
            raise _refusal(f"a number of {len(node.value):,} characters is longer than the "
                           f"limit of {MAX_NUMBER_CHARS}", node.start_mark)
        return node

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        mapping = super().construct_mapping(node, deep=deep)
        if len(mapping) != len(node.value):
            # keys spelt differently but equal once read (1 and 0x1, true and True), or a merge
            # key (<<) that a later key overrides: either way one value would be lost
            raise ConstructorError(None, None, "duplicate key (two keys with the same value)",
                                   node.start_mark)
        return mapping


def _yaml_error(where: str, error: yaml.YAMLError) -> InputError:
    mark = getattr(error, "problem_mark", None)
    line = f":{mark.line + 1}" if mark is not None else ""
    problem = _one_line(getattr(error, "problem", None) or "syntax error")
    return InputError(f"{where}{line}: malformed YAML: {problem}")


def parse_yaml(text: str, *, where: str) -> Any:
    """Parse one untrusted YAML document with the safe loader.

    Raises InputError, one line naming ``where``: malformed YAML, a duplicate key (with its
    line and field path), an alias, nesting deeper than MAX_DEPTH, a number literal longer than
    MAX_NUMBER_CHARS, or a value the safe constructors cannot build (a date like 2020-02-30).
    """
    # Imported here: rules.published imports _io, which imports this module.
    from .rules.loader import duplicate_keys  # noqa: PLC0415

    loader = _InputLoader(text)
    try:
        root = loader.get_single_node()
        if root is None:
            return None
        duplicate = next(duplicate_keys(root, ()), None)
        if duplicate is not None:
            line, field = duplicate
            raise InputError(f"{where}:{line}: {_one_line(field)[:200]}: duplicate key")
        return loader.construct_document(root)
    except yaml.YAMLError as e:
        raise _yaml_error(where, e) from e
    except RecursionError as e:  # a last resort: the composer bounds the depth
        raise InputError(f"{where}: malformed YAML: nested too deeply") from e
    except (ValueError, OverflowError) as e:  # a timestamp or number the constructors refuse
        raise InputError(f"{where}: malformed YAML: {_one_line(e)}") from e
    finally:
        loader.dispose()
