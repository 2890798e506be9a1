"""The two documents the blind verifier sees: the reasoning brief and one step's draft.

Summary, "the pipeline it describes": the verifier sees exactly the brief and the draft under
review, nothing else.  The brief is trusted (it is the reference the draft is checked against);
the draft is untrusted data (spec 2.12, 9.4).  The file format is documented in
``docs/verifier-inputs.md``.

Both models are frozen and forbid unknown fields; a brief that is inconsistent (duplicate ids, a
citation that does not parse, two citations that are the same citation, an evidence URL or price
that does not parse) cannot be constructed.  ``parse_brief`` and ``parse_draft`` raise
:class:`InputError` with one line naming the document and the field path, e.g. ``brief.yaml:
citations[2].citation: duplicate of citations[0] (ISO/IEC 27001:2022 Annex A 5.9)``.  No I/O
here: reading the files is ``verifier.input_files`` (issue 14 item 3).
"""

from __future__ import annotations

from decimal import Decimal
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    model_validator,
)

from triz_ri_smart_ai_evaluator.errors import InputError

from .citations import Citation, parse_citation
from .evidence import Price, canonical_url, parse_evidence_price
from .normalise import normalise

MAX_DRAFT_CHARS = 200_000
BRIEF_FORMAT = "triz-brief/1"
DRAFT_FORMAT = "triz-draft/1"
_ID = r"^[A-Za-z][A-Za-z0-9_.\-]{0,63}$"


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Judgement(_Frozen):
    """One of the planner's judgements; a draft must not contradict it."""

    id: str = Field(pattern=_ID)
    text: str = Field(min_length=1)


class Step(_Frozen):
    """One planned step: the draft for it must meet its title and content spec."""

    id: str = Field(pattern=_ID)
    title: str = Field(min_length=1)
    content_spec: str = ""


def _citation(value: str) -> str:
    parse_citation(normalise(value).text)
    return value


def _url(value: str) -> str:
    url = normalise(value).text.strip()
    if not url.lower().startswith(("http://", "https://")):
        raise ValueError(f"must start with http:// or https://: {value!r}")
    canonical_url(url)
    return value


def _price(value: str) -> str:
    parse_evidence_price(normalise(value).text)  # issue 13 item 5: a unit is allowed
    return value


class CitationEntry(_Frozen):
    """One citation of the closed set, with the approved wording of the requirement if given."""

    id: str = Field(pattern=_ID)
    citation: Annotated[str, AfterValidator(_citation)]
    wording: str | None = Field(default=None, min_length=1)
    _canonical: Citation = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """Keep the parsed citation (the field validator has shown that it parses)."""
        self._canonical = parse_citation(normalise(self.citation).text)

    @property
    def canonical(self) -> Citation:
        """The parsed, canonical citation."""
        return self._canonical


class EvidenceEntry(_Frozen):
    """One approved source of a research run: its URL and the prices it supports."""

    id: str = Field(pattern=_ID)
    url: Annotated[str, AfterValidator(_url)]
    prices: tuple[Annotated[str, AfterValidator(_price)], ...] = ()
    _canonical_url: str = PrivateAttr()
    _approved_prices: tuple[Price, ...] = PrivateAttr()

    def model_post_init(self, context: Any, /) -> None:
        """Keep the canonical URL and prices (the field validators have shown they parse)."""
        self._canonical_url = canonical_url(normalise(self.url).text.strip())
        self._approved_prices = tuple(parse_evidence_price(normalise(p).text)
                                      for p in self.prices)

    @property
    def canonical_url(self) -> str:
        """The URL in canonical form (see ``evidence``)."""
        return self._canonical_url

    @property
    def canonical_prices(self) -> tuple[tuple[str, Decimal], ...]:
        """The prices as (ISO currency, amount)."""
        return tuple((p.currency, p.amount) for p in self._approved_prices)

    @property
    def approved_prices(self) -> tuple[Price, ...]:
        """The prices with their units and ambiguous writings (see ``evidence``)."""
        return self._approved_prices


def _unique_ids(ids: list[str], name: str) -> None:
    seen: dict[str, int] = {}
    for i, item_id in enumerate(ids):
        if item_id in seen:
            raise ValueError(f"{name}[{i}].id: duplicate id {item_id!r} "
                             f"(also {name}[{seen[item_id]}])")
        seen[item_id] = i


class Brief(_Frozen):
    """The reasoning brief: task, judgements, steps, the closed citation set, the evidence set."""

    format: Literal["triz-brief/1"]
    task: str = Field(min_length=1)
    judgements: tuple[Judgement, ...] = ()
    steps: tuple[Step, ...] = Field(min_length=1)
    citations: tuple[CitationEntry, ...] = ()
    evidence: tuple[EvidenceEntry, ...] = ()

    @model_validator(mode="after")
    def _consistent(self) -> Brief:
        _unique_ids([j.id for j in self.judgements], "judgements")
        _unique_ids([s.id for s in self.steps], "steps")
        _unique_ids([c.id for c in self.citations], "citations")
        _unique_ids([e.id for e in self.evidence], "evidence")
        seen: dict[Citation, int] = {}
        for i, c in enumerate(self.citations):
            if c.canonical in seen:
                raise ValueError(f"citations[{i}].citation: duplicate of "
                                 f"citations[{seen[c.canonical]}] ({c.canonical})")
            seen[c.canonical] = i
        urls: dict[str, int] = {}
        for i, e in enumerate(self.evidence):
            if e.canonical_url in urls:
                raise ValueError(f"evidence[{i}].url: duplicate of "
                                 f"evidence[{urls[e.canonical_url]}] ({e.canonical_url})")
            urls[e.canonical_url] = i
        return self

    def step(self, step_id: str) -> Step:
        """The step with id ``step_id``.  Raises InputError if the brief has none."""
        for s in self.steps:
            if s.id == step_id:
                return s
        known = ", ".join(s.id for s in self.steps)
        raise InputError(f"step {step_id!r} is not a step of the brief (steps: {known})")


class Draft(_Frozen):
    """One step's draft as the executor rendered it (untrusted text)."""

    format: Literal["triz-draft/1"]
    step: str = Field(pattern=_ID)
    text: str = Field(max_length=MAX_DRAFT_CHARS)

    @model_validator(mode="after")
    def _not_empty(self) -> Draft:
        if not normalise(self.text).text.strip():
            raise ValueError("text: empty (only whitespace after normalisation)")
        return self


def _location(loc: tuple[int | str, ...]) -> str:
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def _message(error: ValidationError) -> str:
    """The first pydantic error as one line: ``field.path[2]: message``."""
    first = error.errors(include_url=False)[0]
    msg = str(first["msg"]).removeprefix("Value error, ")
    if first["type"] == "extra_forbidden":
        msg = "unknown field"
    elif first["type"] == "string_too_long" and first["loc"][-1:] == ("text",):
        msg = f"draft text longer than {MAX_DRAFT_CHARS:,} characters"
    loc = _location(tuple(first["loc"]))
    line = f"{loc}: {msg}" if loc else msg
    return " ".join(line.split())


def _validate(model: type[Brief] | type[Draft], doc: object, where: str) -> Any:
    if not isinstance(doc, dict):
        raise InputError(f"{where}: expected a mapping at the top level, got {type(doc).__name__}")
    try:
        return model.model_validate(doc)
    except ValidationError as e:
        raise InputError(f"{where}: {_message(e)}") from e


def parse_brief(doc: object, where: str) -> Brief:
    """Validate a parsed document as a brief.  ``where`` names it in errors.  Raises InputError."""
    brief: Brief = _validate(Brief, doc, where)
    return brief


def parse_draft(doc: object, where: str) -> Draft:
    """Validate a parsed document as a draft.  Raises InputError."""
    draft: Draft = _validate(Draft, doc, where)
    return draft
