"""Scripted agents driving a live Airlock through the SDK: the demo's gentle stream, or a load burst.

Against the local database (the default) the command creates its own agents in tenant acme
(sim-support, sim-docs, sim-ops), rotating their keys at each start since keys are shown only
once, and publishes its own unreliable skills backed by a small downstream service it runs.
"""

import logging
import signal
import sys
import time

from django.core.management.base import BaseCommand, CommandError

from lib import signing
from simulation.downstream import start_downstream
from simulation.runner import Options, Simulator, report, wait_for_server
from simulation.setup import ensure_agents, ensure_skills


class Command(BaseCommand):
    help = "Run scripted agents against a live Airlock (support, docs, injection and failure scenarios)."

    def add_arguments(self, parser):
        parser.add_argument("--base-url", default="http://127.0.0.1:8000")
        parser.add_argument("--gentle", action="store_true", help="A slow stream for the demo (the default pace).")
        parser.add_argument(
            "--burst",
            action="store_true",
            help="Many concurrent agents as fast as allowed; "
            "never waits on approvals. For benchmarks and reliability tests.",
        )
        parser.add_argument("--agents", type=int, default=None, help="Concurrent agents (1 gentle, 16 burst).")
        parser.add_argument(
            "--rate",
            type=float,
            default=None,
            help="Runs started per second, all agents together (0.15 gentle, unlimited burst).",
        )
        parser.add_argument(
            "--duration",
            type=float,
            default=None,
            help="Seconds to run (0 = until interrupted; default 0 gentle, 30 burst).",
        )
        parser.add_argument(
            "--downstream-port",
            type=int,
            default=8765,
            help="Port of the simulated downstream service the sim skills call.",
        )
        parser.add_argument("--max-pending", type=int, default=6, help="Approvals left waiting at once (gentle).")
        parser.add_argument("--wait-timeout", type=float, default=180, help="Seconds to wait for the server.")
        parser.add_argument("--seed", type=int, default=None)

    def handle(
        self,
        *args,
        base_url,
        gentle,
        burst,
        agents,
        rate,
        duration,
        downstream_port,
        max_pending,
        wait_timeout,
        seed,
        **options,
    ):
        if gentle and burst:
            raise CommandError("Choose --gentle or --burst, not both.")
        log = self._log
        logging.getLogger("httpx").setLevel(logging.WARNING)  # one line per run is enough
        if not wait_for_server(base_url, wait_timeout, log):
            raise CommandError(f"Airlock did not answer at {base_url} within {wait_timeout:g} s.")
        try:
            downstream = start_downstream(downstream_port)
            downstream_url = f"http://127.0.0.1:{downstream.server_address[1]}"
        except OSError as exc:
            log(
                f"Could not start the simulated downstream on port {downstream_port} ({exc}); "
                "the inventory/shipping skills will answer unavailable."
            )
            downstream_url = f"http://127.0.0.1:{downstream_port}"
        published = self._retry(lambda: ensure_skills(downstream_url))
        if published:
            log("Published simulator skills: " + ", ".join(published))
        keys = self._retry(ensure_agents)
        log("Simulated agents (keys rotated for this session): " + ", ".join(a.name for a in keys.values()))
        sim_options = Options(
            base_url=base_url,
            burst=burst,
            seed=seed,
            max_pending=max_pending,
            agents=agents or (16 if burst else 1),
            rate=rate if rate is not None else (0 if burst else 0.15),
            duration=duration if duration is not None else (30 if burst else 0),
            public_key_pem=signing.public_key_pem(),
        )
        simulator = Simulator(sim_options, keys, log)
        previous = signal.signal(signal.SIGTERM, lambda *_: simulator.stop.set())
        started = time.monotonic()
        try:
            stats = simulator.run()
        except KeyboardInterrupt:
            simulator.stop.set()
            stats = simulator.stats
        finally:
            signal.signal(signal.SIGTERM, previous)
        for line in report(stats, time.monotonic() - started):
            log(line)

    def _retry(self, function, attempts: int = 5):
        from django.db import OperationalError

        for attempt in range(attempts):
            try:
                return function()
            except OperationalError:  # SQLite busy while the server migrates or writes
                if attempt == attempts - 1:
                    raise
                time.sleep(1 + attempt)

    def _log(self, line: str) -> None:
        self.stdout.write(f"sim | {line}")
        sys.stdout.flush()
