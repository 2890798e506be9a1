"""The blind verifier gate (issue 5): its inputs and its mechanical layer.

``inputs`` models the two documents the verifier sees (the brief and one step's draft) and
``input_files`` reads them;
``normalise``, ``citations``, ``evidence`` and ``injection`` read a draft as untrusted data;
``mechanical.check_draft`` turns them into final findings (invented or altered citations, URLs
and prices off the evidence set) that no model verdict can override.  None of these modules
does I/O except the loaders of ``input_files``.
"""

from __future__ import annotations

from .citations import Citation, FoundCitation, find_citations, find_mentions, parse_citation
from .evidence import (
    FoundPrice,
    FoundUrl,
    canonical_url,
    find_prices,
    find_urls,
    parse_price,
    url_matches,
)
from .injection import InjectionSignal, find_injections, fold_confusables
from .input_files import load_brief, load_draft
from .inputs import (
    Brief,
    CitationEntry,
    Draft,
    EvidenceEntry,
    Judgement,
    Step,
    parse_brief,
    parse_draft,
)
from .mechanical import (
    FINDING_KINDS,
    CitationStatus,
    EvidenceStatus,
    Finding,
    MechanicalReport,
    check_draft,
)
from .normalise import Normalised, Stripped, normalise

__all__ = [
    "FINDING_KINDS",
    "Brief",
    "Citation",
    "CitationEntry",
    "CitationStatus",
    "Draft",
    "EvidenceEntry",
    "EvidenceStatus",
    "Finding",
    "FoundCitation",
    "FoundPrice",
    "FoundUrl",
    "InjectionSignal",
    "Judgement",
    "MechanicalReport",
    "Normalised",
    "Step",
    "Stripped",
    "canonical_url",
    "check_draft",
    "find_citations",
    "find_injections",
    "find_mentions",
    "find_prices",
    "find_urls",
    "fold_confusables",
    "load_brief",
    "load_draft",
    "normalise",
    "parse_brief",
    "parse_citation",
    "parse_draft",
    "parse_price",
    "url_matches",
]
