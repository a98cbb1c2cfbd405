"""Tools written to escape the sandbox executor (tests/runs/test_confinement.py). They run inside bubblewrap, so
they import nothing of Airlock or Django."""

import os
import signal
import socket
import time


def echo(*, arguments, context):
    with open("/tmp/scratch.txt", "w") as scratch:  # its own scratch directory is writable
        scratch.write("notes")
    return {"echo": arguments, "tenant": context["tenant"], "uid": os.getuid(), "env": dict(os.environ)}


def open_socket(*, arguments, context):
    socket.create_connection((arguments["host"], arguments["port"]), timeout=2).close()
    return {"connected": True}


def read_shadow(*, arguments, context):
    with open("/etc/shadow") as shadow:
        return {"shadow": shadow.read()}


def read_server_environment(*, arguments, context):
    seen = {"own": dict(os.environ)}
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/environ", "rb") as environ:
                    seen[pid] = environ.read().decode(errors="replace").replace("\x00", " ")
            except OSError:
                seen[pid] = "unreadable"
    return seen


def write_outside(*, arguments, context):
    with open(arguments["path"], "w") as target:
        target.write("escaped")
    return {"wrote": arguments["path"]}


def fork_without_limit(*, arguments, context):
    while True:
        if os.fork() == 0:
            signal.pause()  # each child waits until the sandbox's end kills it
            os._exit(0)


def allocate(*, arguments, context):
    hoard = bytearray(arguments["megabytes"] * 1024 * 1024)
    return {"allocated": len(hoard)}


def spin(*, arguments, context):
    while True:
        pass


def sleep(*, arguments, context):
    time.sleep(arguments["seconds"])
    return {"slept": True}
