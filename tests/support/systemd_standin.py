"""What systemd as PID 1 does for the units an IDLE_AFTER server renders (buildtool/units/idle.py), for a
machine where systemd is not PID 1 (these test hosts, containers). Only the manager's part is a stand-in;
every command is the rendered units' own, run as written:

- the .socket: this stand-in binds its ListenStream and holds it for its whole life, so a connection that
  arrives while nothing serves waits in the backlog (systemd's socket unit does the same);
- a connection starts the proxy .service, whose Requires=/After= name the server's unit: the server unit's
  ExecStart runs first (in its WorkingDirectory; `docker compose up --wait` returns once healthy), then the
  proxy's ExecStart (systemd-socket-proxyd) with the socket as fd 3 (LISTEN_FDS=1, LISTEN_PID its own);
- when the proxy exits (--exit-idle-time), nothing needs the server (StopWhenUnneeded=yes): its ExecStop
  runs, and the next connection starts the chain again.

`activations` and `stops` count the chain's turns; `errors` keeps what failed (a test asserts it empty).
"""
from __future__ import annotations

import select
import shlex
import socket
import subprocess
import sys
import threading
from pathlib import Path

from tests.support.deploy_units import parse_unit

# Runs in the proxy's process before it becomes the proxy: the socket to fd 3 and LISTEN_PID to its own
# pid, which exec keeps (sd_listen_fds(3) checks both).
TRAMPOLINE = ("import os, sys; os.dup2(int(sys.argv[1]), 3); "
              "os.environ.update(LISTEN_FDS='1', LISTEN_PID=str(os.getpid())); os.execv(sys.argv[2], sys.argv[2:])")


def listen_address(text: str) -> tuple[str, int]:
    host, _, port = text.rpartition(":")
    return host.strip("[]"), int(port)


class SocketActivationStandin:
    def __init__(self, systemd_dir: Path, server_unit: str, env: dict[str, str], start_timeout_s: float = 900):
        proxy = f"{server_unit}-proxy"
        self.socket_unit = parse_unit((systemd_dir / f"{proxy}.socket").read_text())
        self.proxy_unit = parse_unit((systemd_dir / f"{proxy}.service").read_text())
        self.server_unit = parse_unit((systemd_dir / f"{server_unit}.service").read_text())
        assert f"{server_unit}.service" in self.proxy_unit["Unit"]["Requires"], "the proxy requires the server"
        assert self.server_unit["Unit"]["StopWhenUnneeded"] == ["yes"]
        self.env = env
        self.start_timeout_s = start_timeout_s
        self.activations = 0
        self.stops = 0
        self.errors: list[str] = []
        self._closing = threading.Event()
        self._proxy: subprocess.Popen | None = None
        host, port = listen_address(self.socket_unit["Socket"]["ListenStream"][0])
        self.listener = socket.socket(socket.AF_INET6 if ":" in host else socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, port))
        self.listener.listen(int(self.socket_unit["Socket"].get("Backlog", ["128"])[0]))
        self._thread = threading.Thread(target=self._manage, name="systemd-standin", daemon=True)
        self._thread.start()

    def _service(self, key: str) -> subprocess.CompletedProcess:
        command = self.server_unit["Service"][key][0]
        return subprocess.run(shlex.split(command), cwd=self.server_unit["Service"]["WorkingDirectory"][0],
                              env=self.env, capture_output=True, text=True, timeout=self.start_timeout_s)

    def _manage(self) -> None:
        while not self._closing.is_set():
            readable, _, _ = select.select([self.listener], [], [], 0.5)
            if not readable or self._closing.is_set():
                continue
            started = self._service("ExecStart")
            if started.returncode != 0:
                self.errors.append(f"ExecStart exited {started.returncode}: {started.stderr[-2000:]}")
                return
            self.activations += 1
            argv = shlex.split(self.proxy_unit["Service"]["ExecStart"][0])
            self._proxy = subprocess.Popen([sys.executable, "-c", TRAMPOLINE, str(self.listener.fileno()), *argv],
                                           pass_fds=(self.listener.fileno(),), env=self.env)
            code = self._proxy.wait()
            if code != 0 and not self._closing.is_set():
                self.errors.append(f"the proxy exited {code}")
            stopped = self._service("ExecStop")
            if stopped.returncode != 0:
                self.errors.append(f"ExecStop exited {stopped.returncode}: {stopped.stderr[-2000:]}")
            self.stops += 1

    def close(self) -> None:
        self._closing.set()
        if self._proxy is not None and self._proxy.poll() is None:
            self._proxy.terminate()
        self._thread.join(timeout=self.start_timeout_s)
        self.listener.close()
