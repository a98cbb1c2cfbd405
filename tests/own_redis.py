"""A Redis server of a test's own, on a free port: for tests that restart Redis, or start Airlock processes
whose cache, broker and channel layer must not share keys with the suite's Redis database."""

from __future__ import annotations

import shutil
import socket
import subprocess
import time

from airlock.serving import free_port

REDIS_SERVER = shutil.which("redis-server")
START_CEILING_S = 60  # generous: a busy machine is slow, never wrong


class OwnRedis:
    def __init__(self) -> None:
        self.port = free_port()
        self.process: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.process = subprocess.Popen(
            [REDIS_SERVER, "--bind", "127.0.0.1", "--port", str(self.port), "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + START_CEILING_S
        while time.monotonic() < deadline:
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2).close()
                return
            except OSError:
                time.sleep(0.05)
        raise RuntimeError("redis-server did not start")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(5)
