"""The clock seam (lib/clock.py), and the rule it exists for: no test sleeps for more than 0.2 s."""

import ast
import time
from pathlib import Path

from lib import clock as airlock_clock

TESTS = Path(__file__).parent
LONGEST_SLEEP_S = 0.2


def test_the_clock_is_the_real_clock_by_default():
    assert airlock_clock.offset() == 0
    assert abs(airlock_clock.time() - time.time()) < 0.05
    assert abs(airlock_clock.monotonic() - time.monotonic()) < 0.05
    started = time.monotonic()
    airlock_clock.sleep(0.01)
    assert time.monotonic() - started >= 0.01


def test_the_fixture_advances_time_and_sleeps_take_none(clock):
    before, moment = clock.monotonic(), clock.now()
    started = time.monotonic()
    clock.sleep(30)
    clock.advance(5)
    assert time.monotonic() - started < 0.1
    assert clock.monotonic() - before >= 35 and (clock.now() - moment).total_seconds() >= 35


async def test_async_sleeps_advance_too(clock):
    before = clock.monotonic()
    await clock.asleep(10)
    assert clock.monotonic() - before >= 10


def _long_sleeps(path: Path, root: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if not (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "sleep"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in ("time", "asyncio")
        ):
            continue
        seconds = node.args[0] if node.args else None
        if (
            isinstance(seconds, ast.Constant)
            and isinstance(seconds.value, int | float)
            and seconds.value > LONGEST_SLEEP_S
        ):
            found.append(f"{path.relative_to(root)}:{node.lineno}: {ast.unparse(node)}")
    return found


def test_no_test_sleeps_longer_than_a_fifth_of_a_second():
    """Advance the `clock` fixture instead, or poll a real condition with short sleeps and a deadline."""
    found = [line for path in sorted(TESTS.rglob("*.py")) for line in _long_sleeps(path, TESTS.parent)]
    assert not found, "sleeps over 0.2 s in tests:\n" + "\n".join(found)


def test_the_scan_sees_long_sleeps(tmp_path):
    sample = tmp_path / "sample.py"
    sample.write_text(
        "import asyncio, time\ntime.sleep(0.1)\ntime.sleep(3)\nasync def f():\n    await asyncio.sleep(0.5)\n"
    )
    assert _long_sleeps(sample, tmp_path) == ["sample.py:3: time.sleep(3)", "sample.py:5: asyncio.sleep(0.5)"]
