"""A pre-imported Python for the jobs that the tests start: each job is forked from a server that has already
imported torch, transformers and accelerate, instead of paying their ~8 s of imports in a fresh interpreter.

`make test` starts ~60 training, processing and serving processes (train.py, torchrun and its workers, the local
endpoint), each spending most of its life importing the same libraries. tests/conftest.py starts one server per
pytest worker and points local_runner.launch.JOB_PYTHON_ENV at the client below (as `python3` / `python`), so the
local runner, `make demo` under test and tests/training_code/runner.py all start their jobs through it.

The client (a few milliseconds of stdlib Python) hands the server its arguments, environment, working folder and
standard streams; the server forks a child that becomes exactly what `python [-u] script|-m module|-c code args`
would have been: its own session, those streams, that environment (TMPDIR included), `sys.path` built from the
script's folder and PYTHONPATH, the project's own modules imported afresh (only third-party modules are kept from
the server), non-daemon threads and atexit handlers (the server's imports registered them, as the job's own imports
would) run at exit. The client relays the signals it receives to the
child's process group and exits as the child did (its code, or the same signal). A child whose client dies
(SIGKILL: a spot reclaim, a stop past its grace) kills its own process group at once; clients die with their parent
(PR_SET_PDEATHSIG), so torchrun's workers go with a reclaimed launcher.

Anything else falls back to the real interpreter, unchanged: other interpreter options, a PYTHONPATH carrying a
sitecustomize (the simulated processing image), or no server answering.
"""

from __future__ import annotations

import array
import atexit
import contextlib
import ctypes
import io
import json
import os
import runpy
import selectors
import signal
import socket
import sys
import tempfile
import threading
import traceback
import types
from pathlib import Path
from typing import Any

TRAINING_CODE = Path(__file__).resolve().parent.parent / "training_code"
# What a job imports before its first step: the entry points' own imports pull in torch, transformers (the model and
# tokenizer classes of the bundled encoder and of the tiny BERTs), accelerate and torchrun.
PRELOADED = (
    "qa.fine_tune",
    "preprocess",
    "inference",
    "torch.distributed.run",
    "transformers.models.bert.modeling_bert",
    "transformers.models.bert.tokenization_bert",
)
NAMES = ("python3", "python")  # what the client is called: the job's interpreter and the container's `python3`
MAX_REQUEST = 4 * 1024 * 1024
PR_SET_PDEATHSIG = 1  # prctl(2)
FORWARDED_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGUSR1, signal.SIGUSR2, signal.SIGQUIT)

CLIENT = '''#!{python} -SE
"""Run this command through the pre-imported Python server at {socket} (tests/warm_python.py)."""
import array, ctypes, json, os, signal, socket, sys
REAL, SOCKET = {python!r}, {socket!r}
ctypes.CDLL(None).prctl({pdeathsig}, signal.SIGKILL)  # die with the parent, as torchrun's workers must
args = sys.argv[1:]
unbuffered = args[:1] == ["-u"]
args = args[1:] if unbuffered else args
paths = os.environ.get("PYTHONPATH", "").split(os.pathsep)
custom = any(os.path.exists(os.path.join(p, "sitecustomize.py")) for p in paths if p)
if not args or (args[0].startswith("-") and args[0] not in ("-m", "-c")) or custom:
    os.execv(REAL, [REAL, *sys.argv[1:]])
death_read, death_write = os.pipe()
client = socket.socket(socket.AF_UNIX)
try:
    client.connect(SOCKET)
except OSError:
    os.execv(REAL, [REAL, *sys.argv[1:]])
request = {{"argv": args, "unbuffered": unbuffered, "cwd": os.getcwd(), "env": dict(os.environ)}}
request["executable"] = os.path.abspath(sys.argv[0])
fds = array.array("i", [0, 1, 2, death_read])
client.sendmsg([json.dumps(request).encode() + b"\\n"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, fds)])
os.close(death_read)
child, pending = None, []
def relay(number, frame):
    if child is None:
        pending.append(number)  # before the job exists: relayed once it does
        return
    try:
        os.killpg(child, number)
    except ProcessLookupError:
        pass
for number in {signals!r}:
    signal.signal(number, relay)
replies = client.makefile("r")
started = replies.readline()
if not started:  # the server failed before forking (its log says why): the real interpreter instead
    os.execv(REAL, [REAL, *sys.argv[1:]])
child = int(started)
for number in pending:
    relay(number, None)
how, value = replies.readline().split()
if how == "signal":
    signal.signal(int(value), signal.SIG_DFL)
    os.kill(os.getpid(), int(value))
sys.exit(int(value))
'''


def write_client(folder: Path, server_socket: Path) -> Path:
    """The client as `python3` and `python` in `folder` (put first on a job's PATH); the path of `python3`."""
    folder.mkdir(parents=True, exist_ok=True)
    signals = [int(s) for s in FORWARDED_SIGNALS]
    text = CLIENT.format(python=sys.executable, socket=str(server_socket), signals=signals, pdeathsig=PR_SET_PDEATHSIG)
    first = folder / NAMES[0]
    first.write_text(text)
    first.chmod(0o755)
    for name in NAMES[1:]:
        (folder / name).symlink_to(first.name)
    return first


def _forget_project_modules() -> None:
    """Drop the training code's own modules (a job imports them afresh, reading its own environment)."""
    root = str(TRAINING_CODE)
    for name, module in list(sys.modules.items()):
        if (getattr(module, "__file__", None) or "").startswith(root):
            del sys.modules[name]


class Server:
    """Accepts requests on a Unix socket, forks a child per request, reports each child's end to its client."""

    def __init__(self, server_socket: Path) -> None:
        ctypes.CDLL(None).prctl(PR_SET_PDEATHSIG, signal.SIGTERM)  # a pytest worker that dies takes its server along
        self.listener = socket.socket(socket.AF_UNIX)
        self.listener.bind(str(server_socket))
        self.listener.listen(64)  # clients queue here while the imports below run
        self.base_path = list(sys.path[1:])  # the interpreter's own path: no script folder, no PYTHONPATH
        sys.path.insert(0, str(TRAINING_CODE))
        for module in PRELOADED:
            __import__(module)
        sys.path.remove(str(TRAINING_CODE))
        _forget_project_modules()
        self.children: dict[int, socket.socket] = {}
        self.wakeup_read, wakeup_write = os.pipe()
        os.set_blocking(wakeup_write, False)
        signal.set_wakeup_fd(wakeup_write)
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, self._stop)
        self.running = True

    def _stop(self, *_: Any) -> None:
        self.running = False

    def serve(self) -> None:
        selector = selectors.DefaultSelector()
        selector.register(self.listener, selectors.EVENT_READ)
        selector.register(self.wakeup_read, selectors.EVENT_READ)
        while self.running:
            for key, _ in selector.select():
                if key.fileobj is self.listener:
                    connection, _ = self.listener.accept()
                    self._start(connection)
                else:
                    os.read(self.wakeup_read, 4096)
                    self._reap()

    def _start(self, connection: socket.socket) -> None:
        data, fds = b"", array.array("i")
        while not data.endswith(b"\n") and len(data) < MAX_REQUEST:
            chunk, ancillary, _, _ = connection.recvmsg(65536, socket.CMSG_SPACE(4 * fds.itemsize))
            if not chunk:
                connection.close()
                return
            data += chunk
            for level, kind, payload in ancillary:
                if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
                    fds.frombytes(payload[: len(payload) - (len(payload) % fds.itemsize)])
        request = json.loads(data)
        pid = os.fork()
        if pid == 0:
            try:
                code = self._become(request, list(fds), connection)
            except BaseException:
                traceback.print_exc()
                code = 1
            os._exit(code)
        for fd in fds:
            os.close(fd)
        self.children[pid] = connection
        connection.sendall(f"{pid}\n".encode())

    def _reap(self) -> None:
        while self.children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            connection = self.children.pop(pid, None)
            if connection is None:
                continue
            if os.WIFSIGNALED(status):
                reply = f"signal {os.WTERMSIG(status)}\n"
            else:
                reply = f"exit {os.waitstatus_to_exitcode(status)}\n"
            with contextlib.suppress(OSError):  # the client is gone
                connection.sendall(reply.encode())
            connection.close()

    def _become(self, request: dict[str, Any], fds: list[int], connection: socket.socket) -> int:
        """In the forked child: turn into the requested interpreter run; its exit code."""
        signal.set_wakeup_fd(-1)
        for number in (signal.SIGCHLD, *FORWARDED_SIGNALS):
            signal.signal(number, signal.SIG_DFL)
        signal.signal(signal.SIGINT, signal.default_int_handler)  # Python's own: KeyboardInterrupt
        for held in (self.listener, connection, *self.children.values()):
            held.close()
        os.close(self.wakeup_read)
        os.setsid()
        stdin, stdout, stderr, death = fds
        for source, target in ((stdin, 0), (stdout, 1), (stderr, 2)):
            os.dup2(source, target)
            os.close(source)
        threading.Thread(target=_die_with_client, args=(death,), daemon=True).start()
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # the job's TMPDIR, not the server's
        if "OMP_NUM_THREADS" in os.environ:
            import torch

            torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))
        unbuffered = request["unbuffered"] or bool(os.environ.get("PYTHONUNBUFFERED"))
        sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False), encoding="utf-8")
        sys.stdout = _text_stream(1, unbuffered)
        sys.stderr = _text_stream(2, True, errors="backslashreplace")
        sys.executable = request["executable"]  # torchrun starts its workers with sys.executable: through here too
        argv = request["argv"]
        python_path = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
        interrupted = False
        try:
            if argv[0] == "-m":
                sys.argv = [argv[1], *argv[2:]]
                sys.path[:] = [os.getcwd(), *python_path, *self.base_path]
                runpy.run_module(argv[1], run_name="__main__", alter_sys=True)
            elif argv[0] == "-c":
                sys.argv = ["-c", *argv[2:]]
                sys.path[:] = ["", *python_path, *self.base_path]
                main = sys.modules["__main__"] = types.ModuleType("__main__")  # not the server's module
                exec(compile(argv[1], "<string>", "exec"), main.__dict__)
            else:
                sys.argv = argv
                script = os.path.realpath(argv[0])
                sys.path[:] = [os.path.dirname(script), *python_path, *self.base_path]
                runpy.run_path(argv[0], run_name="__main__")
            code = 0
        except SystemExit as stop:
            code = _exit_code(stop.code)
        except KeyboardInterrupt:
            interrupted, code = True, 128 + signal.SIGINT
        except BaseException:
            sys.excepthook(*sys.exc_info())
            code = 1
        _finish()
        if interrupted:  # as Python does: the process ends by the signal itself
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            os.kill(os.getpid(), signal.SIGINT)
        return code


def _text_stream(fd: int, unbuffered: bool, errors: str = "strict") -> io.TextIOWrapper:
    raw = io.FileIO(fd, "w", closefd=False)
    buffered = io.BufferedWriter(raw) if not unbuffered else raw
    return io.TextIOWrapper(buffered, encoding="utf-8", errors=errors, write_through=unbuffered)


def _exit_code(code: object) -> int:
    if code is None:
        return 0
    if isinstance(code, int):
        return code
    print(code, file=sys.stderr)
    return 1


def _finish() -> None:
    """What the interpreter does at exit: wait for non-daemon threads, run atexit handlers, flush the streams."""
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(OSError, ValueError):
            stream.flush()


def _die_with_client(death: int) -> None:
    """The client holds the other end: when it dies (even by SIGKILL), so does this job's whole process group."""
    while os.read(death, 1):
        pass
    os.killpg(os.getpid(), signal.SIGKILL)


if __name__ == "__main__":
    Server(Path(sys.argv[1])).serve()
