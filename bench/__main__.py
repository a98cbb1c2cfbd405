"""`make bench`: run every benchmark script in bench/ and print one table.

`python -m bench` runs them all; `python -m bench gate traces` only those. Each script's
`run() -> list[Figure]` is called in turn; one that fails is reported and the others still run
(the exit status is then 1). The database named by DATABASE_URL is migrated first.
"""

import importlib
import os
import pkgutil
import platform
import sys
import time
from pathlib import Path

from bench.common import Figure, setup_django

SKIP = {
    "common",
    "__main__",
    "bare",
    "gate_settings",
    "minimal_settings",
    "minimal_urls",
    "models",
    "throughput_settings",
    "throughput_urls",
}


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    memory = ""
    try:
        kib = int(Path("/proc/meminfo").read_text().split("MemTotal:")[1].split()[0])
        memory = f", {kib / 1024 / 1024:.0f} GiB RAM"
    except (OSError, IndexError, ValueError):
        pass
    return f"{os.cpu_count()} CPUs ({model}){memory}, Python {platform.python_version()}, {platform.system()}"


def print_figures(figures: list[Figure], failures: list[str], title: str) -> None:
    width = max([len(f.name) for f in figures] + [6])
    references = {name: n for n, name in enumerate(sorted({f.reference_name for f in figures if f.reference_name}), 1)}
    print(f"\n== {title}\n   {machine()}")
    print(f"{'figure':<{width}}  {'value':>11}  {'unit':<8}  {'reference':>11}  {'ratio':>6}")
    for figure in figures:
        reference = f"{figure.reference:11.2f}" if figure.reference is not None else " " * 11
        ratio = f"{figure.ratio:6.2f}" if figure.ratio is not None else " " * 6
        note = f"  [{references[figure.reference_name]}]" if figure.reference_name else ""
        print(f"{figure.name:<{width}}  {figure.value:11.2f}  {figure.unit:<8}  {reference}  {ratio}{note}".rstrip())
    for name, number in references.items():
        print(f"[{number}] {name}")
    for failure in failures:
        print(f"FAILED {failure}")


def _migrate() -> None:
    from django.core.management import call_command
    from django.db import connection

    if connection.vendor == "postgresql":
        call_command("migrate", verbosity=0, interactive=False)


def main() -> int:
    setup_django()
    _migrate()
    only = set(sys.argv[1:])
    figures: list[Figure] = []
    failures = []
    for module_info in sorted(pkgutil.iter_modules([str(Path(__file__).parent)]), key=lambda m: m.name):
        if module_info.name in SKIP or (only and module_info.name not in only):
            continue
        module = importlib.import_module(f"bench.{module_info.name}")
        if not hasattr(module, "run"):
            continue
        started = time.perf_counter()
        print(f"[bench] {module_info.name} ...", file=sys.stderr, flush=True)
        try:
            result = module.run()
        except Exception as exc:  # report and go on: one broken script should not hide the others
            failures.append(f"{module_info.name}: {type(exc).__name__}: {exc}")
            continue
        for figure in result:
            figure.name = f"{module_info.name}: {figure.name}"
        figures.extend(result)
        print(f"[bench] {module_info.name} done in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    print_figures(figures, failures, "Airlock benchmarks")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
