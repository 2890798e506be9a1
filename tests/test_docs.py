"""The README and docs/ stay short, linked, and true to the command line (issue 14 item 6).

Four checks: the README is an entry point of at most 8 KiB; every relative link in the README
and under docs/ reaches a file (and a heading, when it names one); every ``triz-eval`` command
the documents show names a real command and only options that command has, read from the live
CLI; and the README's test command is the one CI runs.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import typer

from triz_ri_smart_ai_evaluator import cli

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
README_LIMIT = 8192
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})")
_LINK = re.compile(r"!?\[[^\]]*\]\(\s*<?([^)\s>]+)>?(?:\s+\"[^\"]*\")?\s*\)")
_INLINE_CODE = re.compile(r"(`+)(.+?)\1", re.DOTALL)
_HEADING = re.compile(r"^ {0,3}#{1,6}\s+(.*?)\s*#*\s*$")
_SCHEME = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
# Where a shell command ends: what follows is another command or a file name.
_SHELL_END = frozenset({"&&", "||", ";", ">", ">>", "2>", "2>&1"})


def documents() -> list[Path]:
    return [README, *sorted((ROOT / "docs").rglob("*.md"))]


@dataclass(frozen=True)
class Block:
    """One fenced code block: the line its content starts on and its lines."""

    first_line: int
    lines: tuple[str, ...]


def split_fences(text: str) -> tuple[list[Block], str]:
    """The fenced blocks of a Markdown text, and the text with those blocks blanked out."""
    blocks: list[Block] = []
    prose: list[str] = []
    fence: str | None = None
    current: list[str] = []
    start = 0
    for number, line in enumerate(text.splitlines(), start=1):
        opened = _FENCE.match(line)
        if fence is None and opened:
            fence, current, start = opened.group(1), [], number + 1
            prose.append("")
        elif fence is not None and line.lstrip().startswith(fence) and not line.strip(f"{fence} "):
            blocks.append(Block(start, tuple(current)))
            fence = None
            prose.append("")
        elif fence is not None:
            current.append(line)
            prose.append("")
        else:
            prose.append(line)
    return blocks, "\n".join(prose)


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: link text kept, punctuation dropped, spaces to dashes."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).strip().lower()
    return re.sub(r"[^\w\- ]", "", text).replace(" ", "-")


def anchors(path: Path) -> set[str]:
    """Every heading anchor of a Markdown file, with GitHub's -1, -2 for repeats."""
    _, prose = split_fences(path.read_text(encoding="utf-8"))
    seen: dict[str, int] = {}
    found: set[str] = set()
    for line in prose.splitlines():
        match = _HEADING.match(line)
        if not match:
            continue
        base = slug(match.group(1))
        count = seen.get(base, 0)
        seen[base] = count + 1
        found.add(base if count == 0 else f"{base}-{count}")
    return found


def link_problems(path: Path, root: Path = ROOT) -> list[str]:
    """Relative links of one document under ``root`` that reach no file, or no heading in it."""
    _, prose = split_fences(path.read_text(encoding="utf-8"))
    prose = _INLINE_CODE.sub("", prose)
    problems: list[str] = []
    for target in _LINK.findall(prose):
        if _SCHEME.match(target):
            continue
        file_part, _, anchor = target.partition("#")
        resolved = (path.parent / file_part).resolve() if file_part else path
        name = f"{path.relative_to(root)}: link {target!r}"
        if not resolved.is_relative_to(root):
            problems.append(f"{name}: outside the repository")
        elif not resolved.exists():
            problems.append(f"{name}: no file {resolved.relative_to(root)}")
        elif anchor and resolved.suffix == ".md" and anchor not in anchors(resolved):
            problems.append(f"{name}: no heading with anchor #{anchor}")
    return problems


def command_lines(text: str) -> Iterator[str]:
    """Every ``triz-eval`` command a document shows.

    In fenced blocks: lines starting with ``triz-eval `` or ``$ triz-eval ``, joined with their
    backslash continuations and with the indented lines that continue a synopsis.  In prose:
    inline code spans that start with ``triz-eval ``.
    """
    blocks, prose = split_fences(text)
    for block in blocks:
        command: str | None = None
        for raw in block.lines:
            line = raw.removeprefix("$ ") if raw.startswith("$ triz-eval ") else raw
            if command is not None and line.strip() and (
                command.endswith("\\") or raw[:1].isspace()
            ):
                command = command.removesuffix("\\") + " " + line.strip()
                continue
            if command is not None:
                yield command
            command = line if line.startswith("triz-eval ") else None
        if command is not None:
            yield command
    for _, span in _INLINE_CODE.findall(prose):
        if span.startswith("triz-eval "):
            yield " ".join(span.split())


def command_tree() -> Any:
    """The click command tree ``triz-eval`` serves.

    main() adds the lazily imported groups (ledger, pilot, document, service...) before it
    runs, so they are added here too.  Typed ``Any`` and read by duck typing: typer ships its
    own copy of click in some versions and uses the click package in others.
    """
    cli._register_trust_record()
    return typer.main.get_command(cli.app)


def is_group(command: Any) -> bool:
    return hasattr(command, "list_commands")


def command_problems(command: str, root: Any) -> list[str]:
    """What is wrong with one documented command: an unknown command path or option."""
    words = command.split("#", 1)[0].split()
    tokens: list[str] = []
    for word in words[1:]:
        if word in _SHELL_END:
            break
        tokens += [t for t in re.split(r"[\[\]()|]+", word) if t]
    current = root
    ctx = typer.Context(root, info_name="triz-eval")
    path = ["triz-eval"]
    rest = tokens
    while is_group(current) and rest and not rest[0].startswith("-"):
        sub = current.get_command(ctx, rest[0])
        if sub is None:
            return [f"{command!r}: {' '.join(path)} has no command {rest[0]!r}"]
        path.append(rest[0])
        current, rest = sub, rest[1:]
        ctx = typer.Context(current, info_name=path[-1], parent=ctx)
    options = {
        name
        for param in current.get_params(ctx)
        if param.param_type_name == "option"
        for name in (*param.opts, *param.secondary_opts)
    }
    # A bare group is a real command too: it prints its commands (no_args_is_help).
    problems = []
    for token in rest:
        if token.startswith("-") and token not in {"-", "--"}:
            option = token.split("=", 1)[0].rstrip(",.")
            if option not in options:
                problems.append(f"{command!r}: {' '.join(path)} has no option {option}")
    return problems


def test_readme_is_an_entry_point() -> None:
    size = README.stat().st_size
    assert size <= README_LIMIT, f"README.md is {size} bytes; move detail into docs/"


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_reach_a_file_and_heading(path: Path) -> None:
    assert link_problems(path) == []


@pytest.mark.parametrize("path", documents(), ids=lambda p: str(p.relative_to(ROOT)))
def test_documented_commands_exist_with_their_options(path: Path) -> None:
    root = command_tree()
    problems = [
        problem
        for command in command_lines(path.read_text(encoding="utf-8"))
        for problem in command_problems(command, root)
    ]
    assert problems == []


def test_the_documents_show_commands() -> None:
    """The command check is not vacuous: the README and the CLI page both show commands."""
    assert list(command_lines(README.read_text(encoding="utf-8")))
    assert len(list(command_lines((ROOT / "docs" / "cli.md").read_text(encoding="utf-8")))) > 20


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ("```\ntriz-eval ledger verify --no-such-option\n```", "has no option --no-such-option"),
        ("```\n$ triz-eval ledger verfy --json\n```", "has no command 'verfy'"),
        ("```\ntriz-eval ledger --json\n```", "triz-eval ledger has no option --json"),
        ("```\ntriz-eval ledger verify \\\n  --json --witnes W\n```", "has no option --witnes"),
        ("```text\ntriz-eval escrow settle ID\n    [--late FILE] [--dedline]\n```", "--dedline"),
        ("Run `triz-eval signal compute --tsk X`.", "has no option --tsk"),
    ],
)
def test_a_fabricated_command_is_refused(block: str, expected: str) -> None:
    root = command_tree()
    problems = [p for c in command_lines(block) for p in command_problems(c, root)]
    assert len(problems) == 1
    assert expected in problems[0]


def test_a_real_command_passes() -> None:
    block = "```\n$ triz-eval ledger verify --witness W --witness-vkey F --json  # note\n```"
    root = command_tree()
    assert [p for c in command_lines(block) for p in command_problems(c, root)] == []


def test_a_broken_link_is_refused(tmp_path: Path) -> None:
    (tmp_path / "docs").mkdir()
    (tmp_path / "docs" / "there.md").write_text("# A heading, here\n", encoding="utf-8")
    doc = tmp_path / "docs" / "x.md"
    doc.write_text(
        "# Here\n[a](missing.md) [b](#nowhere) [c](#here) [d](there.md#a-heading-here)\n"
        "[e](../../outside.md) `[f](in-code.md)`\n",
        encoding="utf-8",
    )
    problems = link_problems(doc, tmp_path)
    assert len(problems) == 3, problems
    assert "no file docs/missing.md" in problems[0]
    assert "no heading with anchor #nowhere" in problems[1]
    assert "outside the repository" in problems[2]


def test_the_readme_test_command_is_what_ci_runs() -> None:
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8")
    runs = [line.removeprefix("exec ").strip() for line in ci.splitlines() if line[:5] == "exec "]
    assert runs == ["bash scripts/run-tests.sh"]
    blocks, _ = split_fences(README.read_text(encoding="utf-8"))
    quick_start = [
        line.split("#", 1)[0].strip()
        for block in blocks
        for line in block.lines
        if line.startswith("bash scripts/")
    ]
    assert quick_start == ["bash scripts/run-main.sh", runs[0]]
