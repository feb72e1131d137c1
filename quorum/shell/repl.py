"""The shell's loop: a prompt with readline and tab completion on a terminal; otherwise one command
per line from standard input, output only, and a non-zero exit status if any command failed."""
from __future__ import annotations

import sys
from typing import TextIO

from quorum.shell.commands import ExitShell, Shell, ShellError

PROMPT = "sparkraft:{cwd}> "


def run_repl(shell: Shell, stdin: TextIO = sys.stdin, stdout: TextIO = sys.stdout, stderr: TextIO = sys.stderr,
             interactive: bool | None = None) -> int:
    interactive = stdin.isatty() if interactive is None else interactive
    failures = 0
    if interactive:
        _setup_readline(shell)
        print("sparkraft metadata shell: help for commands, exit to leave", file=stdout)
    while True:
        try:
            line = input(PROMPT.format(cwd=shell.cwd)) if interactive else stdin.readline()
        except EOFError:
            break
        if not interactive and line == "":
            break
        try:
            output = shell.run(line.strip())
        except ExitShell:
            break
        except ShellError as e:
            failures += 1
            print(str(e), file=stderr if not interactive else stdout, flush=True)
            continue
        if output:
            print(output, file=stdout, flush=True)
    if interactive:
        print(file=stdout)
    return 1 if failures and not interactive else 0


def _setup_readline(shell: Shell) -> None:
    try:
        import readline
    except ImportError:  # no readline on this platform: the prompt still works
        return
    matches: list[str] = []

    def completer(text: str, state: int):
        nonlocal matches
        if state == 0:
            buffer = readline.get_line_buffer()
            words = buffer.split()
            if len(words) <= 1 and not buffer.endswith(" "):
                matches = [c + " " for c in ("cat", "cd", "exit", "find", "help", "ls", "pwd", "tree")
                           if c.startswith(text)]
            else:
                matches = shell.complete(text)
        return matches[state] if state < len(matches) else None

    readline.set_completer_delims(" \t")
    readline.set_completer(completer)
    readline.parse_and_bind("tab: complete")
