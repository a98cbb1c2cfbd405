"""What the image ships, read as Docker reads it: its default command and the environment it sets."""

import json
import re

from tests.envscan import ROOT

DOCKERFILE = ROOT / "Dockerfile"


def _instructions() -> list[str]:
    """The Dockerfile's instructions, each on one line (continuations joined, comments dropped)."""
    lines = [line for line in DOCKERFILE.read_text().splitlines() if not line.lstrip().startswith("#")]
    return [step.strip() for step in re.split(r"\n(?=[A-Z]+ )", "\n".join(lines).replace("\\\n", " ")) if step]


def image_command() -> list[str]:
    """The image's CMD (exec form)."""
    [command] = [step.removeprefix("CMD ") for step in _instructions() if step.startswith("CMD ")]
    return json.loads(command)


def image_env() -> dict[str, str]:
    """The variables the image's ENV instructions set (`NAME=value` pairs)."""
    pairs = [step.removeprefix("ENV ").split() for step in _instructions() if step.startswith("ENV ")]
    return dict(pair.split("=", 1) for group in pairs for pair in group)
