"""``triz-eval ledger | witness | attempt | escrow``: the trust record on the command line."""

from __future__ import annotations

import json
import sys
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from .._io import load_model, read_document, write_atomic
from ..errors import InputError, IntegrityError
from ..evaluation import attempts as attempt_log
from ..ledger.events import EventKind, NewEvent
from ..ledger.log import (
    DEFAULT_ORIGIN,
    LOG_VKEY_FILE,
    check_ledger,
    create_log_key,
    load_vkey,
    open_sqlite_ledger,
    prove_consistency,
    prove_inclusion,
    verify_proof,
    witness_cosign,
    witness_notes_for,
)
from ..ledger.payloads import EvidenceStored
from ..ledger.recompute import recompute_ledger
from ..ledger.witness import WitnessStore
from ..rules.loader import BUNDLED_CATALOGUE, load_catalogue
from ..rules.published import BUNDLED_STORE, RulesStore, pin_published
from ..signal.calculator import SignalCalculator
from ..signal.inputs import AttemptInputs, Measurement
from .options import DEFAULT_DB, DEFAULT_KEYS, DbOpt, JsonOpt, KeysOpt, StoreOpt, TaskClassOpt

ledger_app = typer.Typer(help="The tamper-evident ledger: init, verify, recompute, proofs.")
witness_app = typer.Typer(help="An independent witness that cosigns consistent checkpoints.")
attempt_app = typer.Typer(help="Attempts: evaluate into the ledger, show the spec 10.1 record.")
escrow_app = typer.Typer(help="Escrow: settle a held share with a late verified value.")

out = Console()
err = Console(stderr=True)

DEFAULT_WITNESS = Path(".triz-eval/witness")


def _emit(value: Any) -> None:
    sys.stdout.write(json.dumps(value, ensure_ascii=False, indent=2) + "\n")


@ledger_app.command("init")
def ledger_init(
    db: DbOpt = DEFAULT_DB,
    keys: KeysOpt = DEFAULT_KEYS,
    origin: Annotated[
        str, typer.Option(help="The log's name in its checkpoints.")
    ] = DEFAULT_ORIGIN,
) -> None:
    """Create the log key (never overwritten) and an empty ledger database."""
    if not (keys / "log.key").exists():
        vkey = create_log_key(keys, origin=origin)
        out.print(f"log key created in {keys}; public key: {vkey.vkey()}")
    db.parent.mkdir(parents=True, exist_ok=True)
    open_sqlite_ledger(db, keys).close()
    out.print(f"ledger ready: {db}")


@ledger_app.command("verify")
def ledger_verify(
    db: DbOpt = DEFAULT_DB,
    log_vkey: Annotated[
        Path | None, typer.Option(help="Log public key (default KEYS/log.vkey).")
    ] = None,
    keys: KeysOpt = DEFAULT_KEYS,
    witness: Annotated[Path | None, typer.Option(help="Witness folder to check against.")] = None,
    witness_vkey: Annotated[Path | None, typer.Option(help="Witness public key file.")] = None,
    as_json: JsonOpt = False,
) -> None:
    """Check chain, Merkle roots, checkpoint signatures and the witness's cosigned checkpoints.

    Exits 3 and names the first divergence when anything does not verify.
    """
    # Issue 11: the verifier trusts the witness's PUBLIC key it is given, never reads the
    # witness's private key, and refuses a key that would check nothing.
    if witness is not None and witness_vkey is None:
        raise InputError("--witness needs --witness-vkey (the witness's public key file)")
    if witness_vkey is not None and witness is None:
        raise InputError("--witness-vkey needs --witness (the witness folder to check against)")
    log_key = load_vkey(log_vkey or keys / LOG_VKEY_FILE)
    notes: list[str] = []
    wkey = None
    if witness is not None and witness_vkey is not None:
        wkey = load_vkey(witness_vkey)
        notes = witness_notes_for(WitnessStore(witness), log_key.name)
    ledger = open_sqlite_ledger(db, read_only=True)
    try:
        report = check_ledger(ledger, log_key=log_key, witness_notes=notes, witness_key=wkey)
    finally:
        ledger.close()
    if as_json:
        _emit(report.to_dict())
    elif report.ok:
        out.print(
            f"ok: {report.size} events; {report.checkpoints_checked} log checkpoints and "
            f"{report.witnessed_checked} witnessed checkpoints match; "
            f"{report.evidence_checked} evidence blobs intact"
            + ("" if report.witnessed_size is None else
               f"; the witness covers {report.witnessed_size} events, "
               f"{max(report.size - report.witnessed_size, 0)} after its last cosignature")
        )
    if not report.ok:
        raise IntegrityError(f"ledger does not verify: {report.problems[0]}")


@ledger_app.command("recompute")
def ledger_recompute(db: DbOpt = DEFAULT_DB, as_json: JsonOpt = False) -> None:
    """Replay every attempt's original measurements through an independent implementation and
    compare every indicator and award byte for byte (spec 10.2, 11.13)."""
    ledger = open_sqlite_ledger(db, read_only=True)
    try:
        report = recompute_ledger(ledger)
    finally:
        ledger.close()
    if as_json:
        _emit(report.to_dict())
    elif report.ok:
        out.print(f"ok: {report.matched} of {report.attempts} attempts reproduced byte for byte")
    if not report.ok:
        raise IntegrityError(f"recompute differs: {report.mismatches[0]}")


@ledger_app.command("checkpoint")
def ledger_checkpoint(db: DbOpt = DEFAULT_DB, keys: KeysOpt = DEFAULT_KEYS) -> None:
    """Sign a checkpoint of the current tree now."""
    ledger = open_sqlite_ledger(db, keys)
    try:
        ledger.append([], force_checkpoint=True)
        size, _ = ledger.checkpoints()[-1] if ledger.checkpoints() else (0, "")
    finally:
        ledger.close()
    out.print(f"checkpoint at size {size}")


@ledger_app.command("prove")
def ledger_prove(
    seq: Annotated[int, typer.Option(help="Event to prove (1-based).")],
    size: Annotated[int | None, typer.Option(help="Tree size (default: all).")] = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Print an RFC 6962 inclusion proof of one event as JSON."""
    ledger = open_sqlite_ledger(db, read_only=True)
    try:
        _emit(prove_inclusion(ledger, seq, size))
    finally:
        ledger.close()


@ledger_app.command("consistency")
def ledger_consistency(
    old: Annotated[int, typer.Option(help="Old tree size.")],
    new: Annotated[int | None, typer.Option(help="New tree size (default: all).")] = None,
    db: DbOpt = DEFAULT_DB,
) -> None:
    """Print an RFC 6962 consistency proof between two tree sizes as JSON."""
    ledger = open_sqlite_ledger(db, read_only=True)
    try:
        _emit(prove_consistency(ledger, old, new))
    finally:
        ledger.close()


@ledger_app.command("verify-proof")
def ledger_verify_proof(
    proof: Annotated[Path, typer.Argument(help="Proof JSON from 'ledger prove/consistency'.")],
    log_vkey: Annotated[Path | None, typer.Option(help="Log public key.")] = None,
    keys: KeysOpt = DEFAULT_KEYS,
) -> None:
    """Check an inclusion or consistency proof against checkpoints signed by the log, as an
    outsider who has only the proof and the log's public key.  Exits 3 if it does not hold."""
    document = read_document(proof)
    if not isinstance(document, dict):
        raise InputError(f"{proof}: a proof document is a JSON object")
    out.print("ok: " + verify_proof(document, log_key=load_vkey(log_vkey or keys / LOG_VKEY_FILE)))


@ledger_app.command("reconcile")
def ledger_reconcile(db: DbOpt = DEFAULT_DB, keys: KeysOpt = DEFAULT_KEYS) -> None:
    """Write attempt.abandoned for attempts past their deadline with no outcome (spec 10.4)."""
    ledger = open_sqlite_ledger(db, keys)
    try:
        late = attempt_log.reconcile(ledger, now=datetime.now(UTC))
    finally:
        ledger.close()
    out.print(f"{len(late)} attempt(s) marked abandoned" + (f": {', '.join(late)}" if late else ""))


@witness_app.command("init")
def witness_init(
    directory: Annotated[Path, typer.Option("--dir", help="Witness folder.")] = DEFAULT_WITNESS,
    name: Annotated[str, typer.Option(help="Witness key name.")] = "triz-eval.local/witness",
) -> None:
    """Create the witness's own key (mode 0600, never overwritten) and print its public key."""
    vkey = WitnessStore(directory).init(name)
    (directory / "witness.vkey").write_text(vkey.vkey() + "\n", encoding="utf-8")
    out.print(vkey.vkey())


@witness_app.command("cosign")
def witness_cosign_cmd(
    directory: Annotated[Path, typer.Option("--dir", help="Witness folder.")] = DEFAULT_WITNESS,
    db: DbOpt = DEFAULT_DB,
    log_vkey: Annotated[Path | None, typer.Option(help="Log public key.")] = None,
    keys: KeysOpt = DEFAULT_KEYS,
) -> None:
    """Cosign the ledger's latest checkpoint if it is consistent with the last one cosigned."""
    log_key = load_vkey(log_vkey or keys / LOG_VKEY_FILE)
    ledger = open_sqlite_ledger(db, read_only=True)
    try:
        size, _ = witness_cosign(ledger, WitnessStore(directory), log_key=log_key)
    finally:
        ledger.close()
    out.print(f"cosigned checkpoint at size {size}")


def _evidence_files(folder: Path, sources: set[str]) -> list[tuple[str, str, bytes]]:
    """(source, name, bytes) of every file under ``folder/<source>/``.  Raises InputError for
    a folder that is not a declared source of the class or a file outside a source folder."""
    if not folder.is_dir():
        raise InputError(f"{folder}: evidence folder does not exist")
    found = []
    for entry in sorted(folder.iterdir()):
        if not entry.is_dir():
            raise InputError(f"{entry}: put each evidence file in a folder named after the "
                             "source that produced it")
        if entry.name not in sources:
            raise InputError(f"{entry}: {entry.name!r} is not a source of this task class "
                             f"({', '.join(sorted(sources))})")
        for path in sorted(p for p in entry.rglob("*") if p.is_file()):
            try:
                found.append((entry.name, path.relative_to(entry).as_posix(), path.read_bytes()))
            except OSError as e:
                raise InputError(f"{path}: cannot read: {e}") from e
    return found


@attempt_app.command("evaluate")
def attempt_evaluate(
    task_class: TaskClassOpt,
    input_file: Annotated[Path, typer.Option("--input", "-i", help="Verified inputs.")],
    attempt_id: Annotated[str | None, typer.Option(help="Attempt id (default: new).")] = None,
    evidence_dir: Annotated[Path | None, typer.Option(
        "--evidence-dir",
        help="Folder of result evidence, one sub-folder per source (DIR/smtp_receiver/...): "
             "each file is stored as a blob for this attempt, attributed to that source.")] = None,
    instance: Annotated[str | None, typer.Option(
        "--instance",
        help="Task instance the attempt works on (default: the attempt itself); an instance "
             "is credited once across its attempts (spec 3.5).")] = None,
    db: DbOpt = DEFAULT_DB,
    keys: KeysOpt = DEFAULT_KEYS,
    catalogue: Annotated[Path, typer.Option(help="Task-class folder.")] = BUNDLED_CATALOGUE,
    store: StoreOpt = BUNDLED_STORE,
    as_json: JsonOpt = False,
) -> None:
    """Initiate an attempt in the ledger, store its evidence, record its measurements and
    award its signal under the published rules version in force now (checked against its
    hash; a catalogue file that edits a published version in place exits 3).

    Every evidence digest in the inputs must be the SHA-256 of a file given with
    --evidence-dir (or stored for this attempt otherwise): a digest that resolves to nothing is
    recorded, named in the reasons, and does not count (the value is not verified).
    """
    classes = load_catalogue(catalogue)
    if task_class not in classes:
        raise InputError(f"unknown task class {task_class!r}")
    inputs = load_model(input_file, AttemptInputs)
    now = datetime.now(UTC)
    pinned = pin_published(RulesStore(store), classes[task_class], started_at=now)
    files = ([] if evidence_dir is None
             else _evidence_files(evidence_dir, {s.id for s in pinned.task_class.sources}))
    try:
        # Inputs the rules refuse are refused before the attempt exists.
        SignalCalculator(pinned).compute(inputs)
    except InputError as e:
        raise InputError(f"{input_file}: {e.message}") from e
    aid = attempt_id or f"att-{uuid.uuid4().hex[:16]}"
    ledger = open_sqlite_ledger(db, keys)
    try:
        with ledger.group():
            attempt_log.initiate(ledger, pinned, attempt_id=aid, task_version=pinned.version,
                                 started_at=now, deadline=now + timedelta(hours=1),
                                 instance=instance)
            stored = [NewEvent.make(EventKind.EVIDENCE_STORED, EvidenceStored(
                what=name, digest=ledger.put_evidence(data), size=len(data),
                by=source, via="attempt evaluate --evidence-dir"),
                actor=source, at=now, attempt=aid) for source, name, data in files]
            if stored:
                ledger.append(stored)
            signal = attempt_log.evaluate(ledger, pinned, inputs, attempt_id=aid, at=now)
        events = ledger.attempt_events(aid)
    finally:
        ledger.close()
    award = next(e.data for e in events if e.kind == EventKind.AWARD_DECISION.value)
    resolution = next(e.data for e in events if e.kind == EventKind.EVIDENCE_RESOLVED.value)
    if as_json:
        _emit({"attempt_id": aid, **signal.to_dict(), "rework": award["rework"],
               "unresolved_evidence": resolution["unresolved"]})
        return
    out.print(f"{aid}: S = {signal.value}  credited = {award['rework']['credited']}  "
              f"outcome={signal.outcome.value}")
    if resolution["unresolved"]:
        out.print(f"  {len(resolution['unresolved'])} evidence digest(s) did not resolve; "
                  f"see 'triz-eval attempt show {aid}'")


@attempt_app.command("show")
def attempt_show(
    attempt_id: Annotated[str, typer.Argument(help="Attempt id.")],
    db: DbOpt = DEFAULT_DB,
    as_json: JsonOpt = False,
) -> None:
    """Print every field spec 10.1 requires for one attempt, and the policy's diagnostic
    notes (spec 6.10, 9.9: shown to the owner beside the result, never an input of it)."""
    ledger = open_sqlite_ledger(db, read_only=True)
    try:
        events = ledger.attempt_events(attempt_id)
        notes = [ledger.get_evidence(e.data["output"]).decode("utf-8") for e in events
                 if e.kind == EventKind.POLICY_OUTPUT.value and e.data.get("what") == "diagnostic"]
    finally:
        ledger.close()
    if not events:
        raise InputError(f"no attempt {attempt_id!r} in {db}")
    record = attempt_log.attempt_record(events) | {"diagnostic_notes": notes}
    if as_json:
        _emit(record)
        return
    table = Table(title=f"Attempt {attempt_id} (spec 10.1)", show_header=False)
    table.add_column("field")
    table.add_column("value")
    for key, value in record.items():
        if key == "events":
            continue
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        table.add_row(key, text if len(text) < 400 else text[:400] + " …")
    table.add_row("events", ", ".join(f"{e['seq']}:{e['kind']}" for e in record["events"]))
    out.print(table)


#: The provenance register's actor when the command line submits confirmations to it.
CLI_REGISTER_ACTOR = "evaluator-cli"
LATE_SHAPE = (
    '{"values": {indicator: {value, source, evidence}}, "confirmations": [{source, attempt, '
    'content, issued_at, signature}, ...]}'
)


def _read_late(
    path: Path, attempt_id: str
) -> tuple[dict[str, Any], dict[str, Measurement], list[Any]]:
    """The late file's values (as given and as measurements) and signed confirmations.
    Raises InputError."""
    # Imported here: the provenance package pulls in MinHash (numpy), which the other ledger
    # commands do not need at start-up.
    from ..provenance.confirmation import Confirmation  # noqa: PLC0415

    document = read_document(path)
    if not isinstance(document, dict) or set(document) != {"values", "confirmations"}:
        raise InputError(f"{path}: a late file is {LATE_SHAPE}")
    values, raw = document["values"], document["confirmations"]
    if not isinstance(values, dict) or not values:
        raise InputError(f"{path}: values must map each late indicator to its measurement")
    if not isinstance(raw, list) or not raw:
        raise InputError(f"{path}: confirmations must list the control source's signed "
                         "confirmations (see 'triz-eval escrow sign-confirmation')")
    try:
        measurements = attempt_log.parse_late(values)
        confirmations = [Confirmation.from_payload(c) for c in raw]
    except InputError as e:
        raise InputError(f"{path}: {e.message}") from e
    for c in confirmations:
        if c.attempt != attempt_id:
            raise InputError(f"{path}: a confirmation is about attempt {c.attempt!r}, "
                             f"not {attempt_id!r}")
    return values, measurements, confirmations


def _decisions(entries: list[Any]) -> list[dict[str, Any]]:
    return [{"receipt": e.receipt, "confirmation": e.id, "source": e.source,
             "status": e.status.value, "reasons": [r.value for r in e.reasons],
             "echo_collision": e.echo_collision} for e in entries]


@escrow_app.command("settle")
def escrow_settle(
    attempt_id: Annotated[str, typer.Argument(help="Attempt id.")],
    late: Annotated[
        Path | None,
        typer.Option(help=f"Late file: {LATE_SHAPE}.  Each evidence digest must be a stored "
                          "blob or a listed confirmation's content digest."),
    ] = None,
    deadline_passed: Annotated[
        bool, typer.Option(help="No control event by the deadline.")
    ] = False,
    db: DbOpt = DEFAULT_DB,
    keys: KeysOpt = DEFAULT_KEYS,
) -> None:
    """Release or adjust an attempt's escrow under the rules it started with (spec 10.6).

    With --late, the file carries the late values and the control source's signed
    confirmations (the shape of the service's confirmation payload; 'escrow sign-confirmation'
    makes one).  Each is submitted to the provenance register over this ledger and recorded
    whatever its decision (spec 9.15, 1.22); a late value settles only when a confirmation the
    register accepted backs it (same source, content digest among the value's evidence), or an
    authenticated echo collision does and the value lowers the signal (spec 8.14, 9.16).  A
    digest that resolves to nothing stops the command before anything is written (exit 3).
    """
    if (late is None) == (not deadline_passed):
        raise InputError("give exactly one of --late FILE or --deadline-passed")
    if late is None:
        ledger = open_sqlite_ledger(db, keys)
        try:
            result = attempt_log.settle(ledger, attempt_id, late=None, at=datetime.now(UTC))
        finally:
            ledger.close()
        _emit(result.to_dict())
        return
    from ..provenance.register import ProvenanceRegister  # noqa: PLC0415 (see _read_late)

    values, measurements, confirmations = _read_late(late, attempt_id)
    ledger = open_sqlite_ledger(db, keys)
    try:
        # Everything that can be refused without the register is refused before it writes.
        attempt_log.verify_settleable(ledger, attempt_id)
        attempt_log.verify_late_evidence(
            ledger, measurements, pending=frozenset(c.content_sha256 for c in confirmations))
        # The same register the service keeps over its ledger (service/runtime.py).
        register = ProvenanceRegister(ledger, actor=CLI_REGISTER_ACTOR)
        entries = [register.submit_confirmation(c) for c in confirmations]
        try:
            result = attempt_log.settle(ledger, attempt_id, late=values, at=datetime.now(UTC),
                                        provenance=register)
        except IntegrityError as e:
            recorded = "; ".join(
                f"{d['receipt'][:12]} {d['status']}"
                + (f" ({', '.join(d['reasons'])})" if d["reasons"] else "")
                for d in _decisions(entries))
            raise IntegrityError(f"{e.message}; the register recorded {recorded}") from e
        collisions = ledger.attempt_events(attempt_id)[-1].data.get("echo_collision", [])
    finally:
        ledger.close()
    _emit({**result.to_dict(), "confirmations": _decisions(entries),
           "echo_collision": collisions})


@escrow_app.command("sign-confirmation")
def escrow_sign_confirmation(
    key: Annotated[Path, typer.Option(
        "--key", help="The source's Ed25519 private key: base64 of its 32-byte seed, as "
                      "'service init' writes under principals/.")],
    source: Annotated[str, typer.Option(
        "--source", help="The source's id in the provenance register.")],
    attempt_id: Annotated[str, typer.Option("--attempt", help="The attempt it is about.")],
    content: Annotated[Path, typer.Option(
        "--content", help="What the source states: a .json file is signed as structured "
                          "content, any other file as its UTF-8 text.")],
    issued_at: Annotated[str | None, typer.Option(
        "--issued-at", help="When the source issued it, ISO 8601 with a time zone "
                            "(default: now).")] = None,
    output: Annotated[Path | None, typer.Option(
        "--out", help="Write the confirmation here (atomically) instead of to stdout.")] = None,
) -> None:
    """For the trusted source: sign a confirmation for 'escrow settle --late' (spec 9.15).

    Prints (or writes) {source, attempt, content, issued_at, signature}, the shape the service's
    trusted port also takes.  The signature covers the source, attempt, issue time and the
    SHA-256 of the content's canonical JSON, which is the digest a late value cites as its
    evidence; with --out, that digest is printed.
    """
    from ..provenance.confirmation import sign_confirmation  # noqa: PLC0415 (see _read_late)
    from ..service.config import load_principal_key  # noqa: PLC0415

    signing_key = load_principal_key(key)
    stated: Any
    if content.suffix.lower() == ".json":
        stated = read_document(content)
    else:
        try:
            stated = content.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as e:
            raise InputError(f"{content}: cannot read: {e}") from e
    when = datetime.now(UTC)
    if issued_at is not None:
        try:
            when = datetime.fromisoformat(issued_at)
        except ValueError as e:
            raise InputError(f"--issued-at {issued_at!r} is not an ISO 8601 time") from e
        if when.tzinfo is None:
            raise InputError(f"--issued-at {issued_at!r} needs a time zone (e.g. Z)")
    try:
        confirmation = sign_confirmation(signing_key, source=source, attempt=attempt_id,
                                         content=stated, issued_at=when)
    except InputError as e:
        raise InputError(f"{content}: {e.message}") from e
    text = json.dumps(confirmation.to_payload(), ensure_ascii=False, indent=2) + "\n"
    if output is None:
        sys.stdout.write(text)
        return
    write_atomic(output, text.encode("utf-8"))
    sys.stdout.write(f"{output}: confirmation {confirmation.id}; evidence digest of its "
                     f"content {confirmation.content_sha256}\n")
