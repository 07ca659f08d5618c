"""docs/reference/cli.md, made from the parser itself: every command and subcommand with its
arguments and options, their values, defaults and help, so that the page cannot drift from the
code (tests/package/test_docs.py makes it again and compares).

    python -m job.cli.reference docs/reference/cli.md    # write it; no argument: print it

It lives beside the parser it reads: job/devtools may not import the command line (.importlinter)
and needs the `demo` extra. It reads the parser's actions rather than argparse's help text, whose
layout changes with the terminal's width and between Python versions."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Iterator
from pathlib import Path

from job.cli import build_parser
from job.cli.commands import FAMILIES

HEADER = """# The command line: `python -m job`

Made from the parser by `python -m job.cli.reference docs/reference/cli.md`; do not edit by hand
(tests/package/test_docs.py checks that it is current). Settings are environment variables:
[the features guide](../guides/features.md#settings).
"""


def _cell(text: str) -> str:
    return " ".join(text.split()).replace("|", "\\|")


def _help(action: argparse.Action, parser: argparse.ArgumentParser) -> str:
    text = action.help or ""
    if "%" in text:  # argparse's own expansion, as --help shows it
        text = text % {**vars(action), "prog": parser.prog}
    if action.choices is not None and not isinstance(action, argparse._SubParsersAction):
        text += f" (one of: {', '.join(map(str, action.choices))})"
    if action.default not in (None, False, argparse.SUPPRESS) and action.nargs != 0 and "default" not in text:
        text += f" (default: {action.default})"
    if isinstance(action, argparse._AppendAction) and "repeatable" not in text:
        text += " (repeatable)"
    if action.required and action.option_strings:
        text = f"required; {text}" if text else "required"
    return text


def _value(action: argparse.Action) -> str:
    if action.nargs == 0:
        return ""
    # A tuple names each value of an nargs=N option, which argparse's usage joins so.
    name = (" ".join(action.metavar) if isinstance(action.metavar, tuple)
            else action.metavar or (action.dest if not action.option_strings else action.dest.upper()))
    return {"?": f"[{name}]", "+": f"{name} ...", "*": f"[{name} ...]"}.get(str(action.nargs), name)


def _rows(parser: argparse.ArgumentParser) -> Iterator[str]:
    for action in parser._actions:
        if isinstance(action, (argparse._HelpAction, argparse._SubParsersAction)) or action.help == argparse.SUPPRESS:
            continue
        names = ", ".join(f"`{name}`" for name in action.option_strings) or f"`{_value(action)}`"
        value = f"`{_value(action)}`" if action.option_strings and _value(action) else ""
        yield f"| {_cell(names)} | {_cell(value)} | {_cell(_help(action, parser))} |"


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            helps = {choice.dest: choice.help or "" for choice in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name, ""), sub


def _section(words: str, help_line: str, parser: argparse.ArgumentParser, depth: int) -> Iterator[str]:
    yield f"{'#' * depth} `python -m job {words}`"
    yield ""
    description = parser.description if parser.description and parser.description != help_line else ""
    yield " ".join(part for part in (help_line, description) if part).strip() or "(no help)"
    rows = list(_rows(parser))
    if rows:
        yield ""
        yield "| argument | value | what |"
        yield "| --- | --- | --- |"
        yield from rows
    yield ""
    for name, sub_help, sub in _subcommands(parser):
        yield from _section(f"{words} {name}", sub_help, sub, depth + 1)


def reference() -> str:
    """The page, from the parser of every command, in the order `--help` lists them."""
    parser = build_parser(FAMILIES)
    lines = [HEADER, parser.description or "", ""]
    for name, help_line, sub in _subcommands(parser):
        lines.extend(_section(name, help_line, sub, 2))
    return "\n".join(lines).rstrip() + "\n"


def main(argv: list[str]) -> int:
    if argv:
        Path(argv[0]).write_text(reference())
    else:
        sys.stdout.write(reference())
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
