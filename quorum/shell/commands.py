"""The shell's commands over an image tree: ls, cd, cat, find, tree, pwd, help, exit.

A command returns its output; a bad path or command raises ShellError, whose message is printed and
the shell goes on. Paths are absolute or relative to the working directory; ``..`` and ``.`` work.
"""
from __future__ import annotations

import fnmatch
import posixpath
import shlex
from typing import Iterator

from quorum.shell.tree import Dir, File, Node

HELP = """commands:
  ls [PATH]        list a directory (or name a file)
  cd [PATH]        change directory (default /image)
  cat PATH...      print files
  find [PATH] [-name GLOB] [-type d|f]
                   every path below PATH (whose name matches GLOB; only directories or files)
  tree [PATH]      the tree below PATH, indented
  pwd              the working directory
  help             this text
  exit             leave the shell (also quit, or end of input)"""


class ShellError(Exception):
    """A command that cannot be carried out (the shell prints it and goes on)."""


class ExitShell(Exception):
    pass


class Shell:
    def __init__(self, root: Dir):
        self.root = root
        self.cwd = "/image"

    def absolute(self, path: str) -> str:
        return posixpath.normpath(posixpath.join(self.cwd, path)) if path else self.cwd

    def lookup(self, path: str, command: str) -> Node:
        node: Node = self.root
        for part in [p for p in self.absolute(path).split("/") if p]:
            if not isinstance(node, Dir) or part not in node.children():
                raise ShellError(f"{command}: {self.absolute(path)}: no such file or directory")
            node = node.children()[part]
        return node

    def complete(self, prefix: str) -> list[str]:
        """Paths completing ``prefix`` (for readline)."""
        head, sep, tail = prefix.rpartition("/")
        try:
            node = self.lookup((head or "/") if sep else "", "complete")
        except ShellError:
            return []
        if not isinstance(node, Dir):
            return []
        base = f"{head}/" if sep else ""
        return [base + name + ("/" if isinstance(child, Dir) else "")
                for name, child in node.children().items() if name.startswith(tail)]

    def run(self, line: str) -> str:
        try:
            words = shlex.split(line)
        except ValueError as e:
            raise ShellError(f"cannot parse {line!r}: {e}") from None
        if not words:
            return ""
        command, args = words[0], words[1:]
        handler = getattr(self, f"do_{command}", None)
        if handler is None:
            raise ShellError(f"{command}: unknown command (try help)")
        return handler(args)

    # -- commands ------------------------------------------------------------------------------
    def do_pwd(self, args: list[str]) -> str:
        return self.cwd

    def do_cd(self, args: list[str]) -> str:
        target = args[0] if args else "/image"
        if not isinstance(self.lookup(target, "cd"), Dir):
            raise ShellError(f"cd: {self.absolute(target)}: not a directory")
        self.cwd = self.absolute(target)
        return ""

    def do_ls(self, args: list[str]) -> str:
        out = []
        for path in args or [""]:
            node = self.lookup(path, "ls")
            if isinstance(node, File):
                out.append(posixpath.basename(self.absolute(path)))
            else:
                out.extend(name + ("/" if isinstance(child, Dir) else "") for name, child in node.children().items())
        return "\n".join(out)

    def do_cat(self, args: list[str]) -> str:
        if not args:
            raise ShellError("cat: which file?")
        out = []
        for path in args:
            node = self.lookup(path, "cat")
            if isinstance(node, Dir):
                raise ShellError(f"cat: {self.absolute(path)}: is a directory")
            out.append(node.text)
        return "\n".join(out)

    def _walk(self, path: str, node: Node) -> Iterator[tuple[str, Node, int]]:
        stack = [(path, node, 0)]
        while stack:
            p, n, depth = stack.pop()
            yield p, n, depth
            if isinstance(n, Dir):
                children = list(n.children().items())
                for name, child in reversed(children):
                    stack.append((posixpath.join(p, name), child, depth + 1))

    def do_find(self, args: list[str]) -> str:
        paths, tests = _find_arguments(args)
        start = self.absolute(paths[0] if paths else "")
        name, kind = tests.get("-name"), tests.get("-type")
        return "\n".join(p for p, n, _ in self._walk(start, self.lookup(start, "find"))
                         if (name is None or fnmatch.fnmatchcase(posixpath.basename(p) or "/", name))
                         and (kind is None or (kind == "d") == isinstance(n, Dir)))

    def do_tree(self, args: list[str]) -> str:
        start = self.absolute(args[0] if args else "")
        lines = []
        for p, n, depth in self._walk(start, self.lookup(start, "tree")):
            name = posixpath.basename(p) or "/"
            if isinstance(n, File) and "\n" not in n.text and len(n.text) <= 60:
                name += f": {n.text}"
            lines.append("  " * depth + name + ("/" if isinstance(n, Dir) else ""))
        return "\n".join(lines)

    def do_help(self, args: list[str]) -> str:
        return HELP

    def do_exit(self, args: list[str]) -> str:
        raise ExitShell()

    do_quit = do_exit


def _find_arguments(args: list[str]) -> tuple[list[str], dict[str, str]]:
    """``find``'s paths (at most one) and tests (``-name GLOB``, ``-type d|f``), as find(1) takes them."""
    paths, tests = [], {}
    words = iter(args)
    for word in words:
        if not word.startswith("-"):
            paths.append(word)
            continue
        if word not in ("-name", "-type"):
            raise ShellError(f"find: unknown option {word} (find [PATH] [-name GLOB] [-type d|f])")
        value = next(words, None)
        if value is None:
            raise ShellError(f"find: {word} needs a value")
        if word == "-type" and value not in ("d", "f"):
            raise ShellError(f"find: -type takes d or f, not {value!r}")
        tests[word] = value
    if len(paths) > 1:
        raise ShellError("find: one PATH at most")
    return paths, tests
