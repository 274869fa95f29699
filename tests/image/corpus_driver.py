"""Runs inside the image under test: each case of the corpus (the JSON file argv[1]) through
`python3 -m entrypoint MODE [ARGS]` with the case's environment over the container's own, each
bounded by a timeout; prints one JSON list of outcomes. Standard library only."""
import json
import os
import subprocess
import sys
import time

TIMEOUT_S = 20


def run(case: dict, base_env: dict) -> dict:
    env = {**base_env, **case["env"]}
    argv = [sys.executable, "-m", "entrypoint", case["mode"], *case["args"]]
    if case["mode"] == "serve":
        argv = [sys.executable, "-m", "entrypoint", *case["args"]]
    started = time.monotonic()
    try:
        done = subprocess.run(argv, env=env, capture_output=True, timeout=TIMEOUT_S)
        code, out, err, timed_out = done.returncode, done.stdout, done.stderr, False
    except subprocess.TimeoutExpired as expired:
        code, out, err, timed_out = None, expired.stdout or b"", expired.stderr or b"", True
    return {"id": case["id"], "code": code, "timed_out": timed_out, "wall_s": round(time.monotonic() - started, 2),
            "stdout": out.decode(errors="replace"), "stderr": err.decode(errors="replace")}


def main() -> None:
    with open(sys.argv[1], encoding="utf-8") as handle:
        cases = json.load(handle)
    base_env = dict(os.environ)
    print(json.dumps([run(case, base_env) for case in cases]))


if __name__ == "__main__":
    main()
