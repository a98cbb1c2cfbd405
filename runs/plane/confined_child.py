"""Runs one confined tool inside the sandbox (runs/plane/confinement.py starts it under bubblewrap). No Airlock
or Django import: it reads {"entry": "module:function", "arguments": {...}, "context": {...}} on stdin, calls the
function and writes {"content": ...} or {"error": {"type", "errno", "message"}} on stdout, as one JSON line."""

import errno
import importlib
import json
import sys


def main() -> None:
    for path in sys.argv[1:]:
        sys.path.append(path)  # the deployment's code, read-only inside the sandbox
    request = json.loads(sys.stdin.read())
    module_name, _, function_name = request["entry"].partition(":")
    try:
        function = getattr(importlib.import_module(module_name), function_name)
        answer = {"content": function(arguments=request["arguments"], context=request["context"])}
        text = json.dumps(answer)
    except BaseException as exc:  # noqa: BLE001 - every failure goes back typed, nothing else crosses the pipe
        code = getattr(exc, "errno", None)
        answer = {
            "error": {
                "type": type(exc).__name__,
                "errno": errno.errorcode.get(code, "") if isinstance(code, int) else "",
                "message": str(exc)[:500],
            }
        }
        text = json.dumps(answer)
    sys.stdout.write(text + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main()
