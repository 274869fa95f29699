"""A real Hub-compatible server for the fetch's tests: olah (a self-hosted Hugging Face mirror), offline,
serving git repositories the test makes, whose large files are git LFS objects as the Hub stores them
(a pointer in git, the content under .git/lfs/objects). huggingface_hub reaches it through HF_ENDPOINT.

It listens on the loopback, or on `host` where a container must reach it: the host's address on
Docker's default bridge (docker_bridge.bridge_gateway), which a container on that bridge reaches and
no other machine does, so a fetch runs in the image exactly as `build.py model fetch` runs it."""
from __future__ import annotations

import hashlib
import os
import pathlib
import shutil
import subprocess
import sys
import time
import urllib.request

from entrypoint.fetch.listing import is_weight_path
from entrypoint.nccl_probe import free_port

LFS_POINTER = "version https://git-lfs.github.com/spec/v1\noid sha256:{oid}\nsize {size}\n"
START_TIMEOUT_S = 60


def git(folder: pathlib.Path, *words: str) -> str:
    return subprocess.run(["git", "-C", str(folder), "-c", "user.email=test@example.invalid", "-c", "user.name=test",
                           *words], check=True, capture_output=True, text=True).stdout.strip()


class MirrorRepo:
    """A model repository as a git repository under the mirror's folder (models/<owner>/<name>)."""

    def __init__(self, root: pathlib.Path, repo_id: str):
        self.repo_id = repo_id
        self.path = root / "models" / repo_id
        self.path.mkdir(parents=True)
        git(self.path, "init", "-q", "-b", "main")

    def put_lfs(self, name: str, content: bytes) -> str:
        """`name` as an LFS file: the pointer committed, the content as its object; its SHA-256."""
        oid = hashlib.sha256(content).hexdigest()
        store = self.path / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4]
        store.mkdir(parents=True, exist_ok=True)
        (store / oid).write_bytes(content)
        (self.path / name).parent.mkdir(parents=True, exist_ok=True)
        (self.path / name).write_text(LFS_POINTER.format(oid=oid, size=len(content)))
        return oid

    def put_folder(self, folder: pathlib.Path) -> None:
        """Every file of a model folder, as the Hub keeps one: weight files in LFS, the rest in git."""
        for path in sorted(folder.rglob("*")):
            if path.is_file():
                name = path.relative_to(folder).as_posix()
                if is_weight_path(name):
                    self.put_lfs(name, path.read_bytes())
                else:
                    (self.path / name).parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(path, self.path / name)

    def lfs_object(self, oid: str) -> pathlib.Path:
        return self.path / ".git" / "lfs" / "objects" / oid[:2] / oid[2:4] / oid

    def commit(self, message: str = "files") -> str:
        git(self.path, "add", "-A")
        git(self.path, "commit", "-q", "-m", message)
        return git(self.path, "rev-parse", "HEAD")


class HubMirror:
    """olah on a free port of `host`, offline, serving the repositories under `root`."""

    def __init__(self, root: pathlib.Path, host: str = "127.0.0.1"):
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self.host = host
        self.port = free_port()
        self.endpoint = f"http://{host}:{self.port}"
        self.process: subprocess.Popen | None = None
        self.log = root / "olah.log"

    def repo(self, repo_id: str) -> MirrorRepo:
        return MirrorRepo(self.root / "mirrors", repo_id)

    def start(self) -> "HubMirror":
        netloc = f"{self.host}:{self.port}"
        config = self.root / "olah.toml"
        config.write_text(
            f'[basic]\nhost = "{self.host}"\nport = {self.port}\nmirror-netloc = "{netloc}"\n'
            f'mirror-lfs-netloc = "{netloc}"\nmirrors-path = ["{self.root / "mirrors"}"]\n'
            f'repos-path = "{self.root / "cache"}"\nmetadata-cache-ttl = 0\n'
            '[accessibility]\noffline = true\n')
        olah = shutil.which("olah-cli") or sys.exit("olah-cli is not installed (tests/requirements.txt)")
        (self.root / "mirrors" / "models").mkdir(parents=True, exist_ok=True)
        with open(self.log, "wb") as log:
            self.process = subprocess.Popen([olah, "-c", str(config), "--log-path", str(self.root / "logs")],
                                            stdout=log, stderr=subprocess.STDOUT, cwd=self.root)
        deadline = time.monotonic() + START_TIMEOUT_S
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"olah exited: {self.log.read_text()[-2000:]}")
            try:
                urllib.request.urlopen(f"{self.endpoint}/api/models/none/none/revision/main", timeout=2)
            except urllib.error.HTTPError:
                return self  # it answers
            except OSError:
                time.sleep(0.2)
                continue
            return self
        raise RuntimeError(f"olah did not answer in {START_TIMEOUT_S} s: {self.log.read_text()[-2000:]}")

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def env(self, **extra: str) -> dict:
        """The environment of a fetch against this mirror (no token, no telemetry, a private HF_HOME)."""
        env = {key: value for key, value in os.environ.items() if not key.startswith("HF_")}
        env.update(HF_ENDPOINT=self.endpoint, HF_HUB_DISABLE_TELEMETRY="1", HF_HOME=str(self.root / "hf-home"),
                   HF_HUB_ETAG_TIMEOUT="30", HF_HUB_DOWNLOAD_TIMEOUT="30")
        env.update(extra)
        return env
