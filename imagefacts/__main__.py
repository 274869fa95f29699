"""`python3 -m imagefacts write PATH | show`: read the facts from the installed stack and write them."""
from __future__ import annotations

import argparse
import json
import os
import sys

from imagefacts.read import read_facts


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(prog="python3 -m imagefacts")
    parser.add_argument("command", choices=["write", "show"])
    parser.add_argument("path", nargs="?")
    args = parser.parse_args(argv)
    facts = read_facts()
    if args.command == "show" or not args.path:
        sys.stdout.write(json.dumps(facts, indent=1, sort_keys=True) + "\n")
        return 0
    # compact in the image: a third smaller, and read by programs (`show` prints it for a person)
    text = json.dumps(facts, separators=(",", ":"), sort_keys=True) + "\n"
    partial = args.path + ".partial"
    with open(partial, "w", encoding="utf-8") as out:
        out.write(text)
    os.chmod(partial, 0o644)  # any uid reads it (the image runs as root or as an arbitrary uid)
    os.replace(partial, args.path)
    print(f"imagefacts: {len(facts['server_parser']['options'])} server options, "
          f"{len(facts['parsers']['tool_call'])} tool and {len(facts['parsers']['reasoning'])} reasoning parsers, "
          f"{len(facts['quantization'])} quantization methods, "
          f"{len(facts['vllm_values']['attention_backends'])} attention backends probed -> {args.path}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
