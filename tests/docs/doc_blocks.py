"""The docs tier's reader: fenced blocks of README.md and docs/*.md, their markers, the commands
in a shell block, and the checks a marked block gets (docs/README.md describes the markers).

    <!-- docs-tier: run image; vllm-turing:0.33.0 => {image}; /srv/models/gemma-4-E2B-it => {e2b} -->
    <!-- docs-tier: run tmp -->
    <!-- docs-tier: check gpu -->          (or cluster, registry, host, long; `elsewhere=gcloud`; `mirror`)
    <!-- docs-tier: env-file -->

Every problem is returned as one line naming the file, the line and what is wrong; nothing here
raises for a bad doc.
"""
from __future__ import annotations

import functools
import os
import re
import shlex
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from tests import REPO

PARSE_ONLY = Path(__file__).with_name("parse_only.py")
SHELL_LANGS = {"sh", "bash", "shell", "console"}
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)[^\n]*\n(?P<body>.*?)^(?P=indent)```[ \t]*$", re.S | re.M)
MARKER = re.compile(r"<!--\s*docs-tier:\s*(?P<text>.*?)\s*-->")
RUN_WHERE = {"image", "tmp", "vehicle"}
CHECK_WHY = {"gpu", "cluster", "registry", "host", "long"}
# Programs a doc may name that are shell builtins or tools every test host has
BUILTINS = {"cd", "export", "set", "unset", "printf", "echo", "true", ":", "source", "."}
SEPARATORS = {";", "&&", "||", "|", "&", ";;"}
# Words before a command that run it (as another user, unhangable, timed): the command is checked
PREFIXES = {"sudo", "exec", "nohup", "time"}
REDIRECTS = re.compile(r"^\d*(>>?|<)&?\d*$")
PARSED, NO_PARSER = 97, 98


def doc_files(repo: Path = REPO) -> list[Path]:
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Marker:
    kind: str  # run, check, env-file
    where: str  # run: image | tmp | vehicle; check: gpu | cluster | registry | host | long
    substitutions: tuple[tuple[str, str], ...] = ()
    elsewhere: frozenset = frozenset()  # programs not on this host, named in a check marker
    mirror: bool = False  # its `build.py model fetch` lines run in the image tier against a local Hub mirror


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # of the opening fence
    lang: str
    body: str
    marker: Marker | None
    marker_error: str | None = None

    @property
    def where(self) -> str:
        return f"{self.path.relative_to(REPO) if self.path.is_relative_to(REPO) else self.path}:{self.line}"

    @property
    def shell(self) -> bool:
        return self.lang in SHELL_LANGS


def parse_marker(text: str) -> Marker:
    """`run WHERE; OLD => NEW; ...`, `check WHY [elsewhere=a,b] [mirror]; OLD => NEW; ...` or `env-file`;
    ValueError says why not."""
    head, *subs = [part.strip() for part in text.split(";")]
    words = head.split()
    if words == ["env-file"]:
        return Marker("env-file", "")
    if len(words) < 2 or words[0] not in ("run", "check"):
        raise ValueError(f"unknown marker {text!r}: use run image|tmp|vehicle, check {'|'.join(sorted(CHECK_WHY))}, "
                         "or env-file")
    kind, where, options = words[0], words[1], words[2:]
    allowed = RUN_WHERE if kind == "run" else CHECK_WHY
    if where not in allowed:
        raise ValueError(f"{kind} {where}: expected one of {', '.join(sorted(allowed))}")
    elsewhere, mirror = set(), False
    for option in options:
        name, _, value = option.partition("=")
        if option == "mirror" and kind == "check":
            mirror = True
            continue
        if name != "elsewhere" or not value:
            raise ValueError(f"unknown option {option!r} (only elsewhere=PROGRAM,... and, in a check marker, mirror)")
        elsewhere.update(value.split(","))
    pairs = []
    for sub in subs:
        old, arrow, new = sub.partition("=>")
        if not arrow or not old.strip():
            raise ValueError(f"substitution {sub!r}: write OLD => NEW")
        pairs.append((old.strip(), new.strip()))
    return Marker(kind, where, tuple(pairs), frozenset(elsewhere), mirror)


def read_blocks(path: Path, text: str | None = None) -> list[Block]:
    text = path.read_text() if text is None else text
    blocks = []
    for match in FENCE.finditer(text):
        before = text[:match.start()].rstrip("\n").splitlines()
        previous = before[-1].strip() if before else ""
        found = MARKER.fullmatch(previous)
        marker, error = None, None
        if found:
            try:
                marker = parse_marker(found.group("text"))
            except ValueError as exc:
                error = str(exc)
        body = "\n".join(line[len(match.group("indent")):] for line in match.group("body").splitlines())
        blocks.append(Block(path, text[:match.start()].count("\n") + 1, match.group("lang"), body, marker, error))
    return blocks


def commands(body: str) -> list[list[str]]:
    """The simple commands of a shell block: continuation lines joined, comments, redirections
    and control operators dropped (each side of `&&`, `|`, `;`, `&` is a command)."""
    out = []
    for line in body.replace("\\\n", " ").splitlines():
        lexer = shlex.shlex(line, posix=True, punctuation_chars=";&|")
        lexer.whitespace_split = True
        lexer.commenters = "#"
        current, skip_next = [], False
        for word in lexer:
            if skip_next:
                skip_next = False
                continue
            if word in SEPARATORS:
                if current:
                    out.append(current)
                current = []
            elif REDIRECTS.match(word):
                skip_next = not word.endswith(tuple("0123456789"))
            else:
                current.append(word)
        if current:
            out.append(current)
    return out


def substituted(body: str, marker: Marker | None, values: dict[str, str]) -> str:
    for old, new in (marker.substitutions if marker else ()):
        body = body.replace(old, new.format(**values))
    return body


# ---- checks of one command: the program exists, its flags are accepted -------------------------

def check_command(words: list[str], marker: Marker, repo: Path = REPO) -> str | None:
    """None when the program exists and accepts these words as far as can be told here, else why not."""
    while words and re.match(r"^[A-Za-z_][A-Za-z0-9_]*=", words[0]):
        words = words[1:]  # VAR=value before a command, or a plain assignment
    while words and words[0] in PREFIXES:
        words = words[1:]  # `sudo cmd`: the command is what is checked (the test host runs as root)
    if not words:
        return None
    program = words[0]
    if program in BUILTINS:
        return None
    if program in marker.elsewhere:
        return None
    if program in ("python3", "python"):
        return _check_python(words[1:], repo)
    if "/" in program and not program.startswith(("/", "~", "$")):
        return _check_repo_program(program, words[1:], repo)
    if program == "docker":
        return check_cobra_flags(words[1:], docker_help, ("run", "create"))
    if program == "kubectl":
        return check_cobra_flags(words[1:], kubectl_help, ())
    if shutil.which(program) is None:
        return f"{program}: not on PATH here (install it, or name it in the marker: elsewhere={program})"
    return None


def _check_python(args: list[str], repo: Path) -> str | None:
    if args[:1] == ["-m"] and len(args) >= 2:
        if args[1] == "pytest":
            missing = [a for a in args[2:] if not a.startswith("-") and "/" in a and not list(repo.glob(a.split("::")[0]))]
            return f"pytest: no such test path {missing[0]}" if missing else None
        return parse_only(["-m", *args[1:]], repo)
    if args and args[0].endswith(".py"):
        if not (repo / args[0]).is_file():
            return f"{args[0]}: no such file in the repository"
        return parse_only(args, repo)
    return f"python3 {' '.join(args[:2])}: not a program of this repository the tier can check"


def _check_repo_program(program: str, args: list[str], repo: Path) -> str | None:
    path = repo / program
    if not path.is_file():
        return f"{program}: no such file in the repository"
    if not os.access(path, os.X_OK):
        return f"{program}: not executable (chmod +x)"
    first = path.read_text(errors="replace").splitlines()[:1]
    if first and "python" in first[0]:
        return parse_only([program, *args], repo)
    if first and ("bash" in first[0] or first[0].endswith("/sh")):
        syntax = subprocess.run(["bash", "-n", str(path)], capture_output=True, text=True)
        return None if syntax.returncode == 0 else f"{program}: {syntax.stderr.strip()}"
    return None


def parse_only(args: list[str], repo: Path) -> str | None:
    run = subprocess.run([sys.executable, str(PARSE_ONLY), *args], cwd=repo, capture_output=True, text=True,
                         timeout=120, env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    if run.returncode == PARSED:
        return None
    last = (run.stderr.strip().splitlines() or [f"exit {run.returncode}"])[-1]
    if run.returncode == NO_PARSER:
        return f"{' '.join(args[:3])}: ended without parsing a command line"
    return f"{' '.join(args[:3])}: refused: {last}"


@functools.lru_cache(maxsize=None)
def _help(argv: tuple[str, ...]) -> str:
    try:
        run = subprocess.run(list(argv), capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return ""
    return run.stdout + run.stderr


# a cobra help line: "  -d, --detach   ..." or "      --name string   ..." (docker);
# "    -l, --selector='':" or "    --tail=-1:" (kubectl)
_DOCKER_FLAG = re.compile(r"^\s+(?:-(?P<short>\w), )?--(?P<long>[\w-]+)(?P<value> [\w<>\[\]-]+)?(?:\s{2,}|$)", re.M)
_KUBECTL_FLAG = re.compile(r"^\s+(?:-(?P<short>\w), )?--(?P<long>[\w-]+)=(?P<default>'[^']*'|\[[^\]]*\]|\S*):", re.M)


def _flags(text: str, pattern: re.Pattern) -> dict[str, bool]:
    """flag -> takes a value."""
    flags = {}
    for match in pattern.finditer(text):
        if "value" in pattern.groupindex:
            takes = match.group("value") is not None
        else:
            takes = match.group("default") not in ("false", "true")
        flags["--" + match.group("long")] = takes
        if match.group("short"):
            flags["-" + match.group("short")] = takes
    return flags


def _subcommands(text: str) -> set[str]:
    """The names under the help's "Commands:" headings (docker's Management/Common Commands,
    kubectl's Available Commands)."""
    found, inside = set(), False
    for line in text.splitlines():
        if re.match(r"^(?:[A-Z][\w ]* )?Commands(?: \([^)]*\))?:\s*$", line):
            inside = True
            continue
        if inside:
            match = re.match(r"^\s+([a-z][\w-]*)\*?\s", line)
            if match:
                found.add(match.group(1))
            else:
                inside = False
    return found


def docker_help(path: tuple[str, ...]) -> tuple[dict[str, bool], set[str]]:
    text = _help(("docker", *path, "--help"))
    flags = _flags(text, _DOCKER_FLAG)
    flags.update(_flags(_help(("docker", "--help")), _DOCKER_FLAG) if path else {})
    return flags, _subcommands(text)


def kubectl_help(path: tuple[str, ...]) -> tuple[dict[str, bool], set[str]]:
    text = _help(("kubectl", *path, "--help"))
    flags = _flags(text, _KUBECTL_FLAG)
    flags.update(_flags(_help(("kubectl", "options")), _KUBECTL_FLAG))
    return flags, _subcommands(text)


def check_cobra_flags(words: list[str], helper, stop_at_positional: tuple[str, ...]) -> str | None:
    """Every flag in `words` is one the CLI's own help lists for that subcommand (with its value
    where it takes one); the subcommand path is followed as long as the help names it."""
    path: tuple[str, ...] = ()
    flags, subs = helper(path)
    if not flags and not subs:
        return f"{helper.__name__.split('_')[0]}: no help output here (is it installed?)"
    index = 0
    while index < len(words):
        word = words[index]
        if word == "--":
            break
        if word.startswith("-") and word != "-":
            name, eq, _ = word.partition("=")
            if name.startswith("--"):
                if name not in flags:
                    return f"{' '.join(path) or 'the program'}: unknown flag {name}"
                index += 2 if flags[name] and not eq else 1
                continue
            letters = name[1:]
            for position, letter in enumerate(letters):
                takes = flags.get("-" + letter)
                if takes is None:
                    return f"{' '.join(path)}: unknown flag -{letter}"
                if takes:
                    index += 1 if (position < len(letters) - 1 or eq) else 2
                    break
            else:
                index += 1
            continue
        if word in subs:
            path += (word,)
            flags, subs = helper(path)
            index += 1
            continue
        if path and path[-1] in stop_at_positional:
            break  # the image: what follows is the container's command
        index += 1
    return None


# ---- the docs as a whole --------------------------------------------------------------------

def unmarked_shell_blocks(blocks: list[Block]) -> list[str]:
    problems = []
    for block in blocks:
        if block.marker_error:
            problems.append(f"{block.where}: bad docs-tier marker: {block.marker_error}")
        elif block.shell and block.marker is None:
            problems.append(f"{block.where}: a shell block with no docs-tier marker (docs/README.md says which)")
        elif not block.lang:
            problems.append(f"{block.where}: a fenced block without a language: say sh (and mark it) or text")
    return problems


def checked_problems(blocks: list[Block], values: dict[str, str], repo: Path = REPO) -> list[str]:
    """Every command of every shell block that the tier checks rather than runs (check markers, and
    run blocks in a tier other than the caller's: their programs must at least parse)."""
    problems = []
    for block in blocks:
        if not block.shell or block.marker is None or block.marker.kind == "env-file":
            continue
        for words in commands(substituted(block.body, block.marker, values)):
            problem = check_command(words, block.marker, repo)
            if problem:
                problems.append(f"{block.where}: {' '.join(words)[:80]}: {problem}")
    return problems


def tracked_tops(repo: Path) -> set[str]:
    """The repository's own top-level entries: what git tracks, not what runs leave beside it
    (reports/, written by the test command, is git-ignored and names outputs, not sources)."""
    listed = subprocess.run(["git", "-C", str(repo), "ls-files"], capture_output=True, text=True)
    if listed.returncode == 0 and listed.stdout:
        return {line.split("/", 1)[0] for line in listed.stdout.splitlines()}
    return {p.name for p in repo.iterdir()}


# tokens a doc writes as a path of this repository: a top-level entry, then at least one more part
def repo_paths(text: str, repo: Path = REPO) -> set[str]:
    tops = {name for name in tracked_tops(repo) if not name.startswith(".")} - {"README.md"}
    found = set()
    for token in re.findall(r"(?<![\w/.~$:-])([A-Za-z_][\w.-]*/[\w.*/-]*[\w*])", text):
        if token.split("/")[0] in tops:
            found.add(token)
    return found


def missing_paths(path: Path, text: str | None = None, repo: Path = REPO) -> list[str]:
    text = path.read_text() if text is None else text
    missing = []
    for token in sorted(repo_paths(text, repo)):
        module, _, attribute = token.rpartition(".")  # tests/support/model_files.write_model_dir
        if (repo / f"{module}.py").is_file() and attribute.isidentifier():
            continue
        if not list(repo.glob(token)) and not (repo / token).exists():
            missing.append(f"{path.relative_to(repo) if path.is_relative_to(repo) else path}: names {token}, "
                           "which is not in the repository")
    return missing


def shell_script(block: Block, values: dict[str, str]) -> str:
    """The block as bash runs it in the run tiers: stop at the first failing command."""
    return "set -euo pipefail\n" + substituted(block.body, block.marker, values) + "\n"


FETCH = ["python3", "build.py", "model", "fetch"]


def fetch_commands(block: Block, values: dict[str, str]) -> list[list[str]]:
    """The `build.py model fetch` commands of a block, its substitutions made."""
    return [words for words in commands(substituted(block.body, block.marker, values)) if words[:4] == FETCH]


def marked(blocks: list[Block], kind: str, where: str | None = None) -> list[Block]:
    return [b for b in blocks if b.marker and b.marker.kind == kind and (where is None or b.marker.where == where)]


def all_blocks(repo: Path = REPO) -> list[Block]:
    return [block for path in doc_files(repo) for block in read_blocks(path)]
