"""`make bench`: run every benchmark script in bench/ and print one table."""

import importlib
import pkgutil
import sys
import time
from pathlib import Path

from bench.common import Figure, print_table, setup_django

SKIP = {"common", "__main__"}


def main() -> int:
    setup_django()
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
        try:
            result = module.run()
        except Exception as exc:  # report and go on: one broken script should not hide the others
            failures.append(f"{module_info.name}: {type(exc).__name__}: {exc}")
            continue
        for figure in result:
            figure.name = f"{module_info.name}: {figure.name}"
        figures.extend(result)
        print(f"[bench] {module_info.name} done in {time.perf_counter() - started:.1f} s", file=sys.stderr)
    print_table(figures, "Airlock benchmarks")
    for failure in failures:
        print(f"FAILED {failure}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
