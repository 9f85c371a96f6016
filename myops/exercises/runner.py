"""Running one check: the parent starts a child process and reads its verdict; the child builds, loads and
checks one exercise. The parent side imports no torch (a check's child imports it once)."""
from __future__ import annotations

import hashlib
import importlib
import importlib.util
import json
import os
import re
import signal
import subprocess
import sys
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
    command = [sys.executable, "-m", "myops.exercises", "_child", exercise.number, str(root), str(build_dir)]
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(REPO_ROOT), os.environ.get("PYTHONPATH")])))
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=timeout, cwd=REPO_ROOT, env=env)
    except subprocess.TimeoutExpired:
        return Verdict(exercise.folder, "timeout",
                       f"not solved yet: the check did not finish within {timeout:.0f} s (an endless loop?)")
    for line in reversed(done.stdout.splitlines()):
        if line.startswith(_VERDICT_TAG):
            found = json.loads(line[len(_VERDICT_TAG):])
            return Verdict(exercise.folder, found["status"], found["message"])
    if done.returncode < 0:
        return Verdict(exercise.folder, "crashed", crash_message(exercise, done.returncode, done.stderr, root))
    last = (done.stderr.strip().splitlines() or ["no output"])[-1]
    return Verdict(exercise.folder, "crashed", f"not solved yet: the check stopped without a verdict: {last}")


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
