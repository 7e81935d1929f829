"""The documentation stays navigable and true to the code: the README's configuration table
lists exactly the settings config.py reads, with their defaults; every relative link and
anchor in the README, docs/ and the ADR index lands somewhere; every docs page is on the
README's map; every ADR is in the index with the status its file states, and the status
lines and the index agree on which record supersedes, amends or extends which, both ways;
no status names an issue; no ADR number named anywhere is missing."""

from __future__ import annotations

import re
from pathlib import Path

from cronwire.config import PREFIX, describe

ROOT = Path(__file__).resolve().parents[2]
README = ROOT / "README.md"
DOCS = ROOT / "docs"
ADRS = ROOT / "ADRs"
# Read by load_settings itself (it names the file the other settings come from), so it is
# not one of the Settings fields that describe() lists.
CONFIG_FILE_VARIABLE = f"{PREFIX}CONFIG_FILE"

LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.M | re.S)
HEADING = re.compile(r"^#{1,6}\s+(.+?)\s*$", re.M)
VARIABLE = re.compile(rf"`({PREFIX}[A-Z_]+)`")


# CONTRACT.md: the README starts with exactly these two set-up commands, in this order.
SET_UP_COMMANDS = [
    "python -m pip install -e '.[dev]' && cronwire serve",
    "python -m pip install -e '.[dev]' && python -m pytest",
]


def test_the_readme_starts_with_the_two_set_up_commands() -> None:
    text = README.read_text(encoding="utf-8")
    blocks = re.findall(r"^```\w*\n(.*?)\n```", text, re.M | re.S)
    assert blocks[:2] == SET_UP_COMMANDS
    assert text.index("```") < text.index("\n## "), "the commands come before any section"


def _section(text: str, title: str) -> str:
    start = text.index(f"\n## {title}\n")
    end = text.find("\n## ", start + 1)
    return text[start:] if end == -1 else text[start:end]


def _configuration_rows() -> dict[str, str]:
    """variable -> its row's default cell, from the README's Configuration table."""
    rows: dict[str, str] = {}
    for line in _section(README.read_text(encoding="utf-8"), "Configuration").splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if not line.startswith("|") or len(cells) < 3:
            continue
        for name in VARIABLE.findall(cells[0]):
            rows[name] = cells[1]
    return rows


def test_the_readme_table_lists_exactly_the_settings_config_reads() -> None:
    documented = set(_configuration_rows())
    read = {name for name, _default in describe()} | {CONFIG_FILE_VARIABLE}
    assert len(read) > 20  # describe() found the settings
    assert not read - documented, f"settings missing from the README table: {sorted(read - documented)}"
    assert not documented - read, f"README table names unknown settings: {sorted(documented - read)}"


def test_the_readme_table_gives_each_settings_default() -> None:
    rows = _configuration_rows()
    for name, default in describe():
        if " " in default or ":" in default:  # worded defaults ("unset: embedded ...")
            continue
        assert f"`{default}`" in rows[name], f"{name}: README default {rows[name]!r}, code {default!r}"


def slug(heading: str) -> str:
    """The anchor GitHub gives a heading: lower case, punctuation dropped, spaces to '-'."""
    text = re.sub(r"[`*]", "", heading).strip().lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    text = FENCE.sub("", page.read_text(encoding="utf-8"))
    return {slug(heading) for heading in HEADING.findall(text)}


def _pages() -> list[Path]:
    return [README, ADRS / "README.md", *sorted(DOCS.glob("*.md"))]


def test_every_relative_link_and_anchor_resolves() -> None:
    broken: list[str] = []
    for page in _pages():
        for target in LINK.findall(FENCE.sub("", page.read_text(encoding="utf-8"))):
            if re.match(r"[a-z]+:", target):  # http:, https:, mailto: are not ours to check
                continue
            path, _, anchor = target.partition("#")
            landing = (page.parent / path).resolve() if path else page
            if not landing.exists():
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such file)")
            elif anchor and landing.suffix == ".md" and anchor not in _anchors(landing):
                broken.append(f"{page.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, "\n".join(broken)


def test_the_readme_maps_every_docs_page() -> None:
    linked = set(LINK.findall(README.read_text(encoding="utf-8")))
    assert DOCS.joinpath("operating.md").exists()  # the glob below sees the pages
    missing = [p.name for p in DOCS.glob("*.md") if f"docs/{p.name}" not in linked]
    assert not missing, f"docs pages the README's map does not link: {missing}"


def _status(adr: Path) -> str:
    match = re.search(r"^Status:\s*(\w+)", adr.read_text(encoding="utf-8"), re.M)
    assert match, f"{adr.name} has no Status: line"
    return match.group(1).lower()


def test_every_adr_is_indexed_with_the_status_its_file_states() -> None:
    index = (ADRS / "README.md").read_text(encoding="utf-8")
    rows = {m.group(1): m.group(2).lower() for m in
            re.finditer(r"^\|\s*\[\d{4}\]\(([^)]+)\)\s*\|[^|]*\|\s*(\w+)", index, re.M)}
    records = sorted(p for p in ADRS.glob("[0-9][0-9][0-9][0-9]-*.md"))
    assert len(records) > 20
    for adr in records:
        assert adr.name in rows, f"ADRs/README.md does not list {adr.name}"
        assert rows[adr.name] == _status(adr), (
            f"{adr.name}: the index says {rows[adr.name]!r}, the file says {_status(adr)!r}")
    numbers = [adr.name[:4] for adr in records]
    assert len(numbers) == len(set(numbers)), f"two ADRs share a number: {numbers}"


# A relation between two records, as a status line and the index's last column spell it.
# Each kind is read in both directions: "amends 0030" in one, "amended by 0063" in the other.
INVERSE = {
    "supersedes": "superseded by", "superseded by": "supersedes",
    "amends": "amended by", "amended by": "amends",
    "extends": "extended by", "extended by": "extends",
}
RELATION = re.compile(r"^(superseded by|supersedes|amended by|amends|extended by|extends)\b", re.I)
ADR_NUMBER = re.compile(r"\b0\d{3}\b")
# An issue by number ("Issue 29", "issue #11"): a ticket, not a decision.
ISSUE = re.compile(r"\bissues?\s+#?\d+", re.I)


def _without_asides(text: str) -> str:
    """The text with its parenthesised asides removed: notes, dates, the old numbers a
    record was first written against; what is left states the relations."""
    while (stripped := re.sub(r"\([^()]*\)", "", text)) != text:
        text = stripped
    return text


def _relations(text: str, *, strict: bool) -> set[tuple[str, str]]:
    """(kind, number) for each clause that starts with a relation's verb. Clauses end at
    '.', ';' or ':'. With strict, a clause that names a record without a verb is refused
    (the index column is all relations and plain notes)."""
    found: set[tuple[str, str]] = set()
    for clause in re.split(r"[.;:]", _without_asides(" ".join(text.split()))):
        clause = clause.strip()
        verb = RELATION.match(clause)
        if verb:
            found |= {(verb.group(1).lower(), n) for n in ADR_NUMBER.findall(clause)}
        elif strict:
            assert not ADR_NUMBER.findall(clause), f"a note names a record without a verb: {clause!r}"
    return found


def _status_paragraph(adr: Path) -> str:
    match = re.search(r"^Status:.*?(?=\n\s*\n)", adr.read_text(encoding="utf-8"), re.M | re.S)
    assert match, f"{adr.name} has no Status: line"
    return match.group(0)


def _index_relation_cells() -> dict[str, str]:
    """record number -> the index row's last cell."""
    index = (ADRS / "README.md").read_text(encoding="utf-8")
    return {m.group(1): m.group(2) for m in
            re.finditer(r"^\|\s*\[(\d{4})\]\([^)]+\)\s*\|.*\|([^|]*)\|\s*$", index, re.M)}


def _records() -> dict[str, Path]:
    return {p.name[:4]: p for p in ADRS.glob("[0-9][0-9][0-9][0-9]-*.md")}


def test_every_status_line_and_the_index_state_the_same_relations_both_ways() -> None:
    records = _records()
    cells = _index_relation_cells()
    assert set(cells) == set(records)
    stated: dict[str, set[tuple[str, str]]] = {}
    for number, adr in sorted(records.items()):
        in_file = _relations(_status_paragraph(adr), strict=False)
        in_index = _relations(cells[number], strict=True)
        assert in_file == in_index, (
            f"{adr.name}: the status line says {sorted(in_file)}, the index {sorted(in_index)}")
        stated[number] = in_file
    wrong: list[str] = []
    for number, relations in sorted(stated.items()):
        for kind, other in sorted(relations):
            if other not in records:
                wrong.append(f"{number} {kind} {other}, which does not exist")
            elif (INVERSE[kind], number) not in stated[other]:
                wrong.append(f"{number} {kind} {other}, but {other} does not say {INVERSE[kind]} {number}")
    assert not wrong, "\n".join(wrong)


def test_a_superseded_record_is_superseded_by_one_record_and_changed_by_none() -> None:
    for adr in sorted(_records().values()):
        relations = _relations(_status_paragraph(adr), strict=False)
        kinds = [kind for kind, _ in relations]
        if _status(adr) == "superseded":
            assert kinds.count("superseded by") == 1, f"{adr.name}: superseded by which record?"
            changed = {r for r in relations if r[0] in ("amended by", "extended by")}
            assert not changed, f"{adr.name} is superseded, yet {sorted(changed)}"
        else:
            assert "superseded by" not in kinds, f"{adr.name} is superseded but says {_status(adr)}"


def test_no_status_line_or_index_row_names_an_issue() -> None:
    """A status says what a record decided and what it changes, not which ticket asked."""
    named = [adr.name for adr in _records().values() if ISSUE.search(_status_paragraph(adr))]
    named += [f"index row {n}" for n, cell in _index_relation_cells().items() if ISSUE.search(cell)]
    assert not named, f"these name an issue number: {named}"


def test_every_adr_number_the_docs_and_code_name_exists() -> None:
    """A record folded away or renumbered leaves no reference to it behind."""
    numbers = set(_records())
    mention = re.compile(r"\bADRs?\s+(\d{4}(?:(?:,\s*|\s+and\s+|\s*[–-]\s*)\d{4})*)")
    files = [README, *ADRS.glob("*.md"), *DOCS.glob("*.md"),
             *(p for root in ("src", "tests", "benchmarks") for p in (ROOT / root).rglob("*")
               if p.suffix in {".py", ".sql", ".js", ".md"})]
    missing = sorted({f"{path.relative_to(ROOT)}: ADR {n}" for path in files
                      for m in mention.finditer(path.read_text(encoding="utf-8"))
                      for n in re.findall(r"\d{4}", m.group(1)) if n not in numbers})
    assert not missing, "\n".join(missing)


def test_every_missing_migration_number_is_explained() -> None:
    """The start-up log lists applied numbers; a gap must not look like a lost file."""
    numbers = {int(p.name[:4]) for p in (ROOT / "migrations").glob("[0-9][0-9][0-9][0-9]_*.sql")}
    assert numbers, "no migration files found"
    explained = (ROOT / "migrations" / "README.md").read_text(encoding="utf-8")
    gaps = sorted(set(range(1, max(numbers) + 1)) - numbers)
    unexplained = [f"{gap:04d}" for gap in gaps if f"{gap:04d}" not in explained]
    assert not unexplained, f"migrations/README.md does not explain {unexplained}"


def test_kafka_mode_states_the_topics_replication_factor_as_the_code_does() -> None:
    """docs/kafka-mode.md once said cronwire creates its topic with replication
    factor 1, where the README and the code say 3, or the number of brokers if fewer."""
    text = (DOCS / "kafka-mode.md").read_text(encoding="utf-8")
    default = dict(describe())[f"{PREFIX}KAFKA_REPLICATION_FACTOR"]
    assert "replication factor 1" not in text
    assert f"replication factor {default}" in text, default
