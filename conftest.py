"""Every notebook twice in one kernel.

After nbval has run a notebook's code cells and compared their outputs, one more test item, "every cell again",
runs each code cell a second time in the same kernel: what a learner does with Run All twice. Python errors are
allowed on the second run (a "before" check fails once its layer is loaded, as it should); a dead kernel is not. It
would mean a cell loads C++ a process cannot take twice (see LayerReloadError in myops/build.py) or otherwise kills
the kernel. Reusing nbval's kernel spares a third execution of every notebook.

Where the notebook packages are not installed (a GPU machine's own Python, say), `tests/` still runs: the nbval
options of pyproject.toml's addopts are accepted and do nothing, and no notebook is collected.

How the items are shared among pytest-xdist's workers: as `--dist loadfile` does, each file goes to one worker
and runs there in order (a notebook's cells share one kernel; a test file's module fixtures are made once), except
the learner answers of tests/test_exercise_answers.py. Each of those builds a tree of its own, so they go to
whichever worker is free: on a fresh clone they compile about a hundred exercise libraries, which on one worker
would take longer than the rest of the suite.

The last section keeps everything the suite writes to a temporary folder in build/, and checks it.
"""
import os
import re
import tempfile
import time
from pathlib import Path
from queue import Empty

import pytest

from myops.paths import BUILD_DIR

try:
    from nbval.plugin import IPyNbFile
except ImportError:
    IPyNbFile = None
try:
    from xdist.scheduler import LoadFileScheduling
except ImportError:
    LoadFileScheduling = None

# The nbval options pyproject.toml's addopts passes: (flag, takes a value).
NBVAL_OPTIONS = (("--nbval", False), ("--nbval-current-env", False), ("--nbval-sanitize-with", True),
                 ("--nbval-cell-timeout", True))

RERUN_NAME = "every cell again"


class EveryCellAgain(pytest.Item):
    """Runs every code cell of the notebook once more in nbval's kernel; fails if the kernel dies or hangs."""

    def runtest(self):
        kernel = self.parent.kernel
        timeout = self.config.option.nbval_cell_timeout
        cells = [cell for cell in self.parent.nb.cells if cell.cell_type == "code"]
        for index, cell in enumerate(cells):
            if not kernel.is_alive():
                raise KernelDied(f"the kernel was dead before the second run of cell {index}")
            outcome = _run(kernel, cell.source, timeout)
            if outcome == "dead":
                raise KernelDied(f"the kernel died during the second run of cell {index}")
            if outcome == "timeout":
                raise KernelDied(f"the second run of cell {index} did not finish in {timeout} s")

    def repr_failure(self, excinfo):
        if isinstance(excinfo.value, KernelDied):
            return f"{self.parent.name}: {excinfo.value}"
        return super().repr_failure(excinfo)

    def reportinfo(self):
        return self.path, None, f"{self.parent.name}::{RERUN_NAME}"


class KernelDied(Exception):
    """The notebook's kernel did not survive the second run."""


def _run(kernel, source: str, timeout: float) -> str:
    """Execute `source`; "done" when the kernel replied, "dead" if it died first, "timeout" otherwise."""
    msg_id = kernel.execute_cell_input(source, allow_stdin=False)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not kernel.is_alive():
            return "dead"
        try:
            message = kernel.get_message(stream="shell", timeout=1)
        except Empty:
            continue
        if message["parent_header"].get("msg_id") == msg_id:
            return "done"
    return "timeout"


def pytest_addoption(parser):
    if IPyNbFile is None:
        group = parser.getgroup("nbval (not installed)")
        for flag, takes_value in NBVAL_OPTIONS:
            group.addoption(flag, action="store" if takes_value else "store_true",
                            help="accepted without effect: nbval is not installed, so no notebook is collected")


def pytest_report_header(config):
    if IPyNbFile is None:
        return "notebooks: not collected (nbval is not installed here; tests/ only)"
    return None


def pytest_collection_modifyitems(session, config, items):
    """Put an "every cell again" item right after the last cell of each notebook."""
    if IPyNbFile is None:
        return
    last_index = {}
    for index, item in enumerate(items):
        if isinstance(item.parent, IPyNbFile):
            last_index[item.parent] = index
    for notebook, index in sorted(last_index.items(), key=lambda pair: pair[1], reverse=True):
        items.insert(index + 1, EveryCellAgain.from_parent(notebook, name=RERUN_NAME))


# Tests whose items may run on any worker, apart from the rest of their file.
SPREAD = ("tests/test_exercise_answers.py::test_each_answer_gets_its_verdict[",)

if LoadFileScheduling is not None:
    class FilesButSpread(LoadFileScheduling):
        """`--dist loadfile`, except that each item of SPREAD is a unit of its own."""

        def _split_scope(self, nodeid: str) -> str:
            return nodeid if nodeid.startswith(SPREAD) else super()._split_scope(nodeid)

    # optional: a run with `-p no:xdist` knows no such hook.
    @pytest.hookimpl(optionalhook=True)
    def pytest_xdist_make_scheduler(config, log):
        return FilesButSpread(config, log)


# Nothing the suite runs writes to the machine's temporary folder. This process, the workers, the notebook kernels
# and every child process inherit a temporary folder in build/, and Inductor's cache there: torch puts its default
# cache, precompiled headers included (torch/_inductor/codecache.py: _HEADER_DIR), under the temporary folder, and
# the AOTInductor loader extracts each package it loads there and never removes it. pytest's own tmp_path folders
# stay where pytest keeps them, pytest-of-<user> in the machine's temporary folder (it removes all but the last
# three runs): a learner's answer tree made there is outside the repository, so verdicts name it as a learner's own.
# A pytest started by the suite (a worker, a test's inner run) inherits all this and leaves it as it is.
SUITE_TEMP = BUILD_DIR / "tmp" / "suite"
OUTERMOST = os.environ.get("MYOPS_SUITE_TEMP") is None
MACHINE_TEMP = Path(tempfile.gettempdir())
if OUTERMOST:
    SUITE_TEMP.mkdir(parents=True, exist_ok=True)
    os.environ.update(MYOPS_SUITE_TEMP=str(SUITE_TEMP), TMPDIR=str(SUITE_TEMP), PYTEST_DEBUG_TEMPROOT=str(MACHINE_TEMP),
                      TORCHINDUCTOR_CACHE_DIR=str(BUILD_DIR / "inductor"))
    tempfile.tempdir = None  # Python's tempfile reads TMPDIR again
_TEMP_BEFORE = pytest.StashKey[set]()


# What the suite's tools name what they leave in a temporary folder: Inductor and its AOT loader, Python's tempfile
# (not the shell's mktemp, tmp.XXXXXXXXXX), gcc, nvcc, multiprocessing, torchrun, Jupyter kernels, Chromium and
# Playwright, and our own. Other programs of the same user may write there meanwhile: their files are not the suite's.
SUITE_LEFTOVERS = re.compile(r"torchinductor_.*|aotinductor_.*|tmp[a-z0-9_]{8}(\..*)?|cc\w{6}\..*|tmpxft_.*|pymp-.*|"
                             r"torchelastic_.*|kernel-.*\.json|\.org\.chromium\..*|playwright.*|myops.*")


def _ours(folder: Path) -> set[str]:
    """What this user owns in `folder` under a name the suite's tools give, by name."""
    names = set()
    for entry in os.scandir(folder):
        try:
            if entry.stat(follow_symlinks=False).st_uid == os.getuid() and SUITE_LEFTOVERS.fullmatch(entry.name):
                names.add(entry.name)
        except FileNotFoundError:  # removed meanwhile
            pass
    return names


def pytest_sessionstart(session):
    if OUTERMOST:
        session.config.stash[_TEMP_BEFORE] = _ours(MACHINE_TEMP)


def pytest_sessionfinish(session, exitstatus):
    """Fails the run if it left anything in the machine's temporary folder."""
    if _TEMP_BEFORE not in session.config.stash:
        return
    left = sorted(_ours(MACHINE_TEMP) - session.config.stash[_TEMP_BEFORE])
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        reporter.write_line(f"FAILED: the suite left {len(left)} entries in {MACHINE_TEMP}: {', '.join(left[:20])}",
                            red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
