"""Running one check: the parent has a child process run it and reads its verdict; the child builds, loads and
checks one exercise. The parent side imports no torch. A server process, started once per parent, imports it and
forks each check's child from there: a child starts with torch and the checker imported (1.5 s of CPU it would
otherwise spend importing torch), and no exercise's check, library or learner's code loaded."""
from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import itertools
import json
import os
import queue
import re
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

from myops.paths import BUILD_DIR, EXERCISES_DIR, REPO_ROOT, SOLUTIONS_DIR, relative_path

DEFAULT_TIMEOUT_S = 900  # a cold build of a .cu file on a busy 2-core machine takes minutes
_VERDICT_TAG = "@@myops-exercise-verdict "


@dataclass(frozen=True)
class Exercise:
    folder: str  # "04_autograd": the folder in exercises/ and solutions/, the notebook, the check's module
    language: str  # "C++", "CUDA", "Python" or "stable C++" (compiled by its check, for the stable ABI)
    crash_hint: str = ""  # what a SIGSEGV most likely means here

    @property
    def number(self) -> str:
        return self.folder[:2]

    @property
    def module(self) -> str:
        return f"myops.exercises.ex{self.folder}"


@dataclass(frozen=True)
class Verdict:
    """What the checker says about one exercise."""

    exercise: str  # the folder name, e.g. "02_cpu_kernel"
    status: str  # "solved", "unsolved", "compile-error", "crashed", "timeout" or "skipped"
    message: str  # one line: "solved", "not solved yet: ...", "does not compile: ...", ...

    @property
    def solved(self) -> bool:
        return self.status == "solved"

    def __str__(self) -> str:
        return f"{self.exercise}: {self.message}"


class Unsolved(Exception):
    """Raised by a check: the exercise is not solved; the message says what is missing."""


class DoesNotCompile(Exception):
    """Raised by a check that compiles the learner's code itself; the message is the first compiler error."""


# -- the parent side -------------------------------------------------------------------------------------

def _build_dir_for(root: Path) -> Path:
    """Where a tree's libraries go: exercises and solutions apart, any other tree (a copy) by its path."""
    root = root.resolve()
    if root == EXERCISES_DIR.resolve():
        return BUILD_DIR / "exercises"
    if root == SOLUTIONS_DIR.resolve():
        return BUILD_DIR / "solutions"
    return BUILD_DIR / "exercise-copies" / hashlib.sha256(str(root).encode()).hexdigest()[:12]


def crash_message(exercise: Exercise, returncode: int, stderr: str = "", root: Path | None = None) -> str:
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"exit status {returncode}"
    hint = ""
    if name == "SIGSEGV":
        hint = (f" (most likely a stack overflow: {exercise.crash_hint})" if exercise.crash_hint else
                " (often a stack overflow: a kernel that calls its own operator without excluding its dispatch "
                "key recurses forever)")
    uncaught = uncaught_exception(stderr, root)
    if uncaught:  # e.g. the dispatcher refusing a registration while the library loads
        hint = f" on a C++ exception nothing caught: {uncaught}"
    return f"not solved yet: the check crashed with {name}{hint}"


def uncaught_exception(stderr: str, root: Path | None = None) -> str:
    """The message of the C++ exception that ended the process, in one line, or "". std::terminate writes
    "terminate called after throwing an instance of '<type>'" and "  what():  <message>" to fd 2; a c10::Error's
    message then ends where its "Exception raised from ..." backtrace begins."""
    found = re.search(r"terminate called after throwing an instance of '[^']*'\n\s*what\(\):(.*?)"
                      r"(?:\nException raised from |\nframe #|\Z)", stderr, flags=re.S)
    if not found:
        return ""
    lines = [line.strip() for line in found.group(1).splitlines() if line.strip()]
    text = lines[0] + "".join(f"{'; ' if i else ': '}{line}" for i, line in enumerate(lines[1:])) if lines else ""
    if root is not None:  # paths as the learner sees them
        for prefix in (str(root.resolve()) + "/", str(root) + "/"):
            text = text.replace(prefix, relative_path(root) + "/")
    return text


def run_check(exercise: Exercise, solution: bool, root: Path | str | None, timeout: float,
              build_dir: Path | str | None) -> Verdict:
    """The verdict of one exercise's check, run in a child process."""
    root = Path(root).resolve() if root is not None else (SOLUTIONS_DIR if solution else EXERCISES_DIR)
    build_dir = Path(build_dir) if build_dir is not None else _build_dir_for(root)
    with tempfile.TemporaryDirectory(prefix="myops-check-") as folder:
        stdout, stderr = Path(folder, "stdout"), Path(folder, "stderr")
        returncode = _server().run(dict(folder=exercise.folder, root=str(root), build_dir=str(build_dir),
                                        env=_child_environment(), stdout=str(stdout), stderr=str(stderr),
                                        timeout=timeout))
        if returncode is None:
            return Verdict(exercise.folder, "timeout",
                           f"not solved yet: the check did not finish within {timeout:.0f} s (an endless loop?)")
        out, err = stdout.read_text(errors="replace"), stderr.read_text(errors="replace")
    for line in reversed(out.splitlines()):
        if line.startswith(_VERDICT_TAG):
            found = json.loads(line[len(_VERDICT_TAG):])
            return Verdict(exercise.folder, found["status"], found["message"])
    if returncode < 0:
        return Verdict(exercise.folder, "crashed", crash_message(exercise, returncode, err, root))
    last = (err.strip().splitlines() or ["no output"])[-1]
    return Verdict(exercise.folder, "crashed", f"not solved yet: the check stopped without a verdict: {last}")


def _child_environment() -> dict[str, str]:
    """The parent's environment; the child's own processes (a compiler, a second Python) find the course."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))


def _read_at_startup(env: dict[str, str]) -> dict[str, str]:
    """The variables Python and torch read when they start (PYTHONPATH, TORCH_LOGS, ...), not when used: a server
    started with other values would give its children a start no fresh process would have."""
    return {key: value for key, value in env.items() if key.startswith(("PYTHON", "TORCH", "PYTORCH"))}


class ServerError(RuntimeError):
    """The checker's server could not run a check: the checker's fault, never the learner's."""


class _CheckServer:
    """The parent's side of `python -m myops.exercises _server`: one JSON request a line on its stdin; for each,
    the server answers "<id> pid <pid of the child>", then "<id> exit <its exit status>", "<id> timeout" or
    "<id> failed-to-fork:<reason>". Threads may run checks at once."""

    def __init__(self):
        env = _child_environment()
        self.startup = _read_at_startup(env)
        self._process = subprocess.Popen([sys.executable, "-m", "myops.exercises", "_server"], cwd=REPO_ROOT, env=env,
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, bufsize=1)
        self._ids = itertools.count()
        self._lock = threading.Lock()
        self._answers: dict[int, queue.Queue] = {}
        self._reader = threading.Thread(target=self._read_answers, daemon=True)
        self._reader.start()

    def alive(self) -> bool:
        return self._process.poll() is None and self._reader.is_alive()

    def run(self, request: dict) -> int | None:
        """The child's exit status (negative: the signal that ended it), or None if it ran past request["timeout"]
        (its supervisor killed it then)."""
        answers = queue.Queue()
        with self._lock:
            number = next(self._ids)
            self._answers[number] = answers
            self._process.stdin.write(json.dumps(dict(request, id=number)) + "\n")
        pid = None
        try:
            while True:
                try:  # the deadline is the supervisor's; this one only notices a supervisor that died
                    kind, value = answers.get(timeout=request["timeout"] + 120)
                except queue.Empty:
                    raise ServerError("the checker's server stopped answering") from None
                if kind == "pid":
                    pid = value
                elif kind in ("exit", "timeout"):
                    return value
                else:
                    raise ServerError(f"the checker's server could not run the check: {kind}")
        except BaseException:  # Ctrl-C, "interrupt the kernel": the child must not run on unwatched
            if pid is not None:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            raise
        finally:
            with self._lock:
                del self._answers[number]

    def _read_answers(self) -> None:
        try:
            for line in self._process.stdout:
                number, kind, *value = line.split()
                with self._lock:
                    answers = self._answers.get(int(number))
                if answers is not None:
                    answers.put((kind, int(value[0]) if value else None))
        finally:
            with self._lock:
                for answers in self._answers.values():
                    answers.put(("the server ended", None))


_the_server: _CheckServer | None = None
_server_lock = threading.Lock()


def _server() -> _CheckServer:
    global _the_server
    with _server_lock:
        if (_the_server is None or not _the_server.alive()
                or _the_server.startup != _read_at_startup(_child_environment())):
            _the_server = _CheckServer()
        return _the_server


def serve() -> None:
    """The server: import torch once, then fork a supervisor for each request, which forks the check's child,
    reports its pid, waits for it and reports how it ended. The server itself never waits: it reads the next
    request at once, and the kernel reaps its supervisors. Ctrl-C in a terminal reaches the parent and the child;
    answers go to a copy of stdout, so that what an import prints there lands on stderr instead."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGCHLD, signal.SIG_IGN)
    answers = os.dup(1)
    os.dup2(2, 1)
    import torch  # noqa: F401 -- what every child would otherwise import itself

    for line in sys.stdin:
        request = json.loads(line)
        try:
            supervisor = os.fork()
        except OSError as error:
            _answer(answers, request["id"], f"failed-to-fork:{error.strerror.replace(' ', '-')}")
            continue
        if supervisor == 0:
            _supervise(request, answers)


def _supervise(request: dict, answers: int) -> None:
    """Fork the child and watch it. The child never returns here: it ends through the interpreter's exit."""
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    try:
        pid = os.fork()
    except OSError as error:
        _answer(answers, request["id"], f"failed-to-fork:{error.strerror.replace(' ', '-')}")
        os._exit(0)
    if pid == 0:
        os.close(answers)
        _be_the_child(request)
    try:
        _answer(answers, request["id"], f"pid {pid}")
        _answer(answers, request["id"], _watch(pid, request["timeout"]))
    finally:
        os._exit(0)


def _watch(pid: int, timeout: float) -> str:
    """How the child ended; killed at the deadline, or as soon as the parent is gone (the request pipe, this
    process's stdin, then reports a hang-up)."""
    parent = select.poll()
    parent.register(0, 0)  # no events asked: poll() reports the hang-up alone
    deadline = time.monotonic() + timeout
    while True:
        ended, status = os.waitpid(pid, os.WNOHANG)
        if ended:
            return f"exit {os.waitstatus_to_exitcode(status)}"
        if time.monotonic() > deadline or parent.poll(50):
            os.kill(pid, signal.SIGKILL)  # not reaped yet: the pid is still this child's
            os.waitpid(pid, 0)
            return "timeout"


def _answer(answers: int, number: int, text: str) -> None:
    os.write(answers, f"{number} {text}\n".encode())  # one write: the lines of concurrent supervisors never mix


def _be_the_child(request: dict) -> None:
    """The check's child: the parent's environment, its output to the files the parent reads (a C++ exception that
    ends the process writes to file descriptor 2 itself). It ends as a fresh process would: exit status 0, or an
    exception's traceback on stderr and 1, and the interpreter's exit handlers run."""
    signal.signal(signal.SIGINT, signal.default_int_handler)
    for descriptor, path in ((0, os.devnull), (1, request["stdout"]), (2, request["stderr"])):
        opened = os.open(path, os.O_RDONLY if descriptor == 0 else os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(opened, descriptor)
        os.close(opened)
    sys.stdin = open(os.devnull)  # not the server's, whose buffer may hold the next requests
    os.environ.clear()
    os.environ.update(request["env"])
    tempfile.tempdir = None  # read TMPDIR again
    from myops.exercises import EXERCISES

    child_main(EXERCISES[request["folder"][:2]], request["root"], request["build_dir"])
    sys.exit(0)


# -- the child side --------------------------------------------------------------------------------------

@dataclass
class Context:
    """What a check knows: where the exercise's files are and how to refer to them in messages."""

    folder: Path  # the exercise's folder, e.g. <root>/02_cpu_kernel
    display: str  # the same, as shown to the learner: "exercises/02_cpu_kernel"
    build_dir: Path  # where this tree's libraries go

    def file(self, name: str) -> str:
        return f"{self.display}/{name}"

    def load_python(self, name: str):
        """Import the learner's Python file `name` of this exercise as a fresh module."""
        path = self.folder / name
        if not path.is_file():
            raise Unsolved(f"{self.file(name)} does not exist")
        spec = importlib.util.spec_from_file_location(f"exercise_{self.folder.name}", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
        except Exception as error:  # a syntax error, a failing import: say where, in one line
            raise Unsolved(f"importing {self.file(name)} failed: {one_line(error)}") from None
        return module


def one_line(error: BaseException) -> str:
    text = str(error).strip()
    for line in text.splitlines():
        if "not solved yet" in line:  # a stub's marker: report it as the learner wrote it
            return line[line.index("not solved yet"):]
    first = text.splitlines()[0] if text else ""
    return f"{type(error).__name__}: {first}" if first else type(error).__name__


class _BuildFailed(Exception):
    """(status, message) of a build that produced no library."""


def _build_and_load(root: Path, build_dir: Path, layer: str, display: str) -> None:
    """Build one exercise folder with the course's Builder (a no-op when up to date) and load it."""
    from myops.build import Builder, LayerBuildError, LayerUnavailableError

    try:  # its progress lines go to our stdout, which the parent does not show
        Builder(root, build_dir, prefix="exercise_").load(layer)
    except LayerUnavailableError as error:
        raise _BuildFailed("skipped", f"cannot be checked here: {error.reason}") from None
    except LayerBuildError as error:
        line = error.first_error or str(error).splitlines()[0]
        for prefix in (str(root.resolve()) + "/", str(root) + "/"):  # paths as the learner sees them
            line = line.replace(prefix, display + "/")
        raise _BuildFailed("compile-error", f"does not compile: {line.strip()}") from None


def _run_child(exercise: Exercise, root: Path, build_dir: Path) -> Verdict:
    display = relative_path(root)
    context = Context(root / exercise.folder, f"{display}/{exercise.folder}", build_dir)
    if not context.folder.is_dir():
        return Verdict(exercise.folder, "unsolved", f"not solved yet: {context.display}/ does not exist")
    if exercise.language in ("C++", "CUDA"):  # the stable-ABI exercise compiles its own way, in its check
        try:
            _build_and_load(root, build_dir, exercise.folder, display)
        except _BuildFailed as failed:
            return Verdict(exercise.folder, *failed.args)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # checks that look for warnings record them themselves
            note = importlib.import_module(exercise.module).check(context)
    except DoesNotCompile as error:
        return Verdict(exercise.folder, "compile-error", f"does not compile: {error}")
    except Unsolved as unsolved:
        message = str(unsolved)
        if not message.startswith("not solved yet"):
            message = f"not solved yet: {message}"
        return Verdict(exercise.folder, "unsolved", message)
    except Exception as error:  # a check must never end in a traceback: name the error in one line
        return Verdict(exercise.folder, "unsolved", f"not solved yet: {one_line(error)}")
    # A check may qualify its verdict: a note in brackets, or a whole message that starts with "solved".
    message = note if note and note.startswith("solved") else f"solved{f' ({note})' if note else ''}"
    return Verdict(exercise.folder, "solved", message)


def child_main(exercise: Exercise, root: str, build_dir: str) -> None:
    result = _run_child(exercise, Path(root), Path(build_dir))
    print("\n" + _VERDICT_TAG + json.dumps({"status": result.status, "message": result.message}), flush=True)
