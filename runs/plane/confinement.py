"""The sandbox executor: a `confined:<name>` tool runs in its own process, confined by the kernel.

bubblewrap (Debian's `bubblewrap`) gives the process new user, PID, mount, network, IPC, UTS and cgroup
namespaces, a read-only view of the file system with a private scratch directory (`/tmp`) and a fresh `/proc`,
no inherited environment or file descriptors, and the unprivileged user `nobody`; `setrlimit` caps its CPU time,
address space, process count and file size, and the wall clock is the call's timeout. The network is off (only
a loopback inside its own namespace). The tool's arguments go in and its result comes back as JSON over a pipe;
what the sandbox refuses (the network, files outside its scratch directory, a fork bomb, memory, time) comes
back as a typed error whose code names it (`sandbox_network_off`, `sandbox_denied`, `sandbox_process_limit`,
`sandbox_memory_limit`, `sandbox_time_limit`), recorded on the call's span as its error code. Where bubblewrap
is missing or the kernel refuses namespaces, the tool does not run at all (`sandbox_unavailable`): never
unconfined.
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import signal
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from runs.errors import CallError, Internal, NotPermitted, Unavailable

CHILD = Path(__file__).with_name("confined_child.py")
SCRATCH = "/tmp"
NOBODY = 65534
MAX_OUTPUT = 4 * 1024 * 1024
DEFAULTS = {"cpu_seconds": 2, "memory_mb": 512, "processes": 16, "file_mb": 16}


@dataclass(frozen=True)
class Limits:
    cpu_seconds: int
    memory_mb: int
    processes: int
    file_mb: int
    wall_seconds: float

    @classmethod
    def of(cls, manifest: dict, *, timeout_s: float) -> Limits:
        declared = (manifest.get("execution") or {}).get("limits") or {}
        values = {key: int(declared.get(key, default)) for key, default in DEFAULTS.items()}
        # A little inside the call's own timeout, so the sandbox stops the tool and says why before the gate
        # gives up waiting on it.
        return cls(**values, wall_seconds=max(0.5, timeout_s * 0.9))


def _confine(limits: Limits):
    """In the child before bubblewrap starts: its own session, and the limits the kernel enforces (inherited by
    the tool, which runs as nobody, so the process count applies)."""

    def apply() -> None:
        os.setsid()
        resource.setrlimit(resource.RLIMIT_CPU, (limits.cpu_seconds, limits.cpu_seconds + 1))
        memory = limits.memory_mb * 1024 * 1024
        resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
        resource.setrlimit(resource.RLIMIT_NPROC, (limits.processes, limits.processes))
        resource.setrlimit(resource.RLIMIT_FSIZE, (limits.file_mb * 1024 * 1024,) * 2)
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))

    return apply


def bubblewrap() -> str | None:
    return shutil.which(settings.AIRLOCK_BWRAP)


def _reachable(paths: list[str]) -> list[str]:
    """Bubblewrap arguments that let `nobody` reach the interpreter and the code: a directory on the way that
    others may not enter (root's home, where pyenv lives) is replaced by an empty one, and only these paths are
    bound into it, read-only. Nothing else of it is visible."""
    hidden, bound = [], []
    for path in dict.fromkeys(str(Path(p).resolve()) for p in paths):
        closed = [a for a in reversed(Path(path).parents) if a != Path("/") and not a.stat().st_mode & stat.S_IXOTH]
        if closed:
            hidden.append(str(closed[0]))
            bound.append(path)
    arguments = [argument for directory in dict.fromkeys(hidden) for argument in ("--tmpfs", directory)]
    return arguments + [argument for path in bound for argument in ("--ro-bind", path, path)]


# Run as root (as in many containers), bubblewrap sets the sandbox up with its privileges and setpriv then drops
# to nobody with no capabilities; run as anyone else, the sandbox gets a user namespace of its own.
AS_ROOT = ["--unshare-pid", "--unshare-net", "--unshare-ipc", "--unshare-uts", "--unshare-cgroup"]
AS_USER = ["--unshare-all"]
DROP_TO_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--inh-caps=-all",
                  "--bounding-set=-all"]  # fmt: skip


def _under_scratch(paths: list[str]) -> list[str]:
    """The code and interpreter paths that live under /tmp (a checkout there), bound back read-only over the
    scratch directory that hides them."""
    inside = [str(Path(p).resolve()) for p in paths if Path(p).resolve().is_relative_to(SCRATCH)]
    return [argument for path in dict.fromkeys(inside) for argument in ("--ro-bind", path, path)]


def command(code_paths: list[str]) -> list[str]:
    root = os.getuid() == 0
    needed = [sys.base_prefix, sys.prefix, *code_paths]
    return [
        bubblewrap() or settings.AIRLOCK_BWRAP,
        *(AS_ROOT if root else AS_USER),  # nothing of the server's processes, network or IPC is reachable
        "--die-with-parent",
        "--new-session",
        "--clearenv",
        "--ro-bind", "/", "/",
        *_reachable(needed),
        "--proc", "/proc",
        "--dev", "/dev",
        "--perms", "01777", "--tmpfs", SCRATCH,  # its scratch directory, the only place it may write
        *_under_scratch(needed),
        "--chdir", SCRATCH,
        "--setenv", "HOME", SCRATCH,
        "--setenv", "PYTHONDONTWRITEBYTECODE", "1",
        *(DROP_TO_NOBODY if root else []),
        sys.executable, "-I", str(CHILD), *code_paths,
    ]  # fmt: skip


def run(*, entry: str, arguments: dict, context: dict, limits: Limits) -> object:
    """The tool's content, or the typed refusal of the sandbox or of the tool."""
    if bubblewrap() is None:
        raise Unavailable(
            "This deployment cannot confine tool code (bubblewrap is not installed), so the tool does not run.",
            code="sandbox_unavailable",
        )
    request = json.dumps({"entry": entry, "arguments": arguments, "context": context}).encode()
    process = subprocess.Popen(
        command([str(settings.BASE_DIR), *settings.AIRLOCK_CONFINED_CODE_PATHS]),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env={},
        close_fds=True,
        preexec_fn=_confine(limits),  # noqa: PLW1509 - the limits must be set in the child before exec
    )
    try:
        out, err = process.communicate(request, timeout=limits.wall_seconds)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise _time_limit(limits, wall=True) from None
    return _answer(process.returncode, out[:MAX_OUTPUT], err, limits)


def _time_limit(limits: Limits, *, wall: bool) -> CallError:
    spent = f"{limits.wall_seconds:g} s of wall-clock time" if wall else f"{limits.cpu_seconds} s of CPU time"
    return Unavailable(f"The tool used up its {spent} in the sandbox and was stopped.", code="sandbox_time_limit")


def _answer(returncode: int, out: bytes, err: bytes, limits: Limits) -> object:
    killed = {signal.SIGXCPU, signal.SIGKILL}  # bubblewrap's init reports its child's signal as 128 + number
    if -returncode in killed or returncode - 128 in killed:
        raise _time_limit(limits, wall=False)
    try:
        answer = json.loads(out.decode().strip().splitlines()[-1])
    except (ValueError, IndexError):
        if b"namespace" in err or b"bwrap" in err:
            raise Unavailable(
                "The kernel refused the sandbox's namespaces, so the tool does not run.", code="sandbox_unavailable"
            ) from None
        raise Internal(
            f"The confined tool ended without an answer (exit {returncode}).", code="sandbox_no_answer"
        ) from None
    if "error" not in answer:
        return answer.get("content")
    raise refusal_of(answer["error"], limits)


def refusal_of(error: dict, limits: Limits) -> CallError:
    """What the tool hit, as the sandbox's typed refusal (or the tool's own failure)."""
    kind, code = error.get("type", ""), error.get("errno", "")
    if kind == "MemoryError":
        return Unavailable(f"The tool went past its {limits.memory_mb} MB of memory.", code="sandbox_memory_limit")
    if code in ("EAGAIN",) or kind == "BlockingIOError":
        return Unavailable(
            f"The tool tried to start more than {limits.processes} processes.", code="sandbox_process_limit"
        )
    if code in ("ENETUNREACH", "ENETDOWN", "EHOSTUNREACH", "ECONNREFUSED") or kind in ("gaierror", "ConnectionError"):
        return NotPermitted(
            "The sandbox has no network; the tool may not open connections.", code="sandbox_network_off"
        )
    if code in ("EACCES", "EPERM", "EROFS") or kind == "PermissionError":
        return NotPermitted(
            "The sandbox refused: the tool may read its code and write only its scratch directory.",
            code="sandbox_denied",
        )
    if code == "EFBIG":
        return Unavailable(f"The tool wrote past its {limits.file_mb} MB file limit.", code="sandbox_file_limit")
    return Unavailable(f"The confined tool failed: {kind}.", code="tool_failed")


__all__ = ["Limits", "bubblewrap", "run"]
