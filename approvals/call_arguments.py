"""The exact arguments an agent sent with a call, for the few readers allowed to see them."""

from typing import Any

from lib.sealing import unseal


def raw_arguments(call) -> Any:
    return unseal(call.sealed_arguments) if call.sealed_arguments else call.arguments
