"""The exercises and their checker: every solution passes, every untouched stub is reported unsolved, and
broken answers get the one-line verdict that says what is wrong (never a traceback).

The checker runs each exercise in a child process and builds its library into build/ (exercises and
solutions apart), so a warm run only loads them. Where pytest also runs the notebooks, each notebook's exercise
cell checks its own exercise's stub and solution; `check --all` here then leaves those to it (see
`notebook_proofs`), so no exercise is checked twice in one run.
"""
import ast
import os
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from myops import exercises
from myops.exercises import runner
from myops.paths import REPO_ROOT
from myops.toolchain import cuda_skip_reason
from test_exercise_answers import answer_tree

try:
    import nbformat
    from nbval.plugin import IPyNbCell, get_sanitize_patterns
except ImportError:  # no notebook is collected (see the root conftest.py)
    nbformat = IPyNbCell = get_sanitize_patterns = None

NUMBERS = exercises.numbers()
CUDA_SKIP = cuda_skip_reason()
PROVED = "checked by its notebook's exercise cell in this run"
needs_nbval = pytest.mark.skipif(IPyNbCell is None, reason="nbval is not installed here")


def run_checker(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "myops.exercises", *args], capture_output=True, text=True,
                          cwd=REPO_ROOT, timeout=1800)


def verdict_lines(done: subprocess.CompletedProcess) -> dict[str, str]:
    """folder -> message, from the one line per exercise the checker prints."""
    lines = done.stdout.strip().splitlines()
    assert "Traceback" not in done.stdout + done.stderr, done.stdout + done.stderr
    found = dict(line.split(": ", 1) for line in lines)
    assert list(found) == [exercises.folder(n) for n in NUMBERS], lines
    return found


def test_one_exercise_per_notebook_and_the_same_layout_in_both_trees():
    assert NUMBERS == [f"{n:02d}" for n in range(0, 20)]
    notebooks = sorted(p.stem for p in (REPO_ROOT / "notebooks").glob("[01][0-9]_*.ipynb"))
    assert [exercises.folder(n) for n in NUMBERS] == [name for name in notebooks if name[:2] in NUMBERS]
    for number in NUMBERS:
        name = exercises.folder(number)
        stub, solution = REPO_ROOT / "exercises" / name, REPO_ROOT / "solutions" / name
        assert sorted(p.name for p in stub.iterdir()) == sorted(p.name for p in solution.iterdir()), number
    languages = [exercises.EXERCISES[n].language for n in NUMBERS]
    assert sum(language != "Python" for language in languages) >= 12  # C++, CUDA or stable C++
    checks = sorted(p.stem for p in (REPO_ROOT / "myops" / "exercises").glob("ex[0-9][0-9]_*.py"))
    assert checks == [f"ex{exercises.folder(n)}" for n in NUMBERS]  # one check module per exercise, same name


def test_the_checkers_parent_process_does_not_import_torch():
    done = subprocess.run([sys.executable, "-c", "import sys, myops.exercises; print('torch' in sys.modules)"],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert done.stdout == "False\n", done.stderr


def cell_proofs(number: str, cell, compared: bool, sanitize_patterns=()) -> set[str]:
    """What notebook `number`'s code cell `cell` proves when nbval runs it: "stub", "solution", both or neither.

    The stub: a statement of its own prints `myops.exercises.check("NN")`'s verdict, and nbval compares the
    cell's output (`compared`) with a stored "NN_topic: not solved yet: ..." line that sanitizing leaves as it
    is. The solution: the cell asserts `myops.exercises.check("NN", solution=True)`, or names
    `myops.exercises.verdict("NN", solution=True)` and asserts its `.solved` (or, as notebook 03 does, its
    status "skipped" where CUDA cannot be built). Any other form proves nothing: `check --all` below checks
    that part itself.
    """
    try:
        body = ast.parse(cell.source).body
    except SyntaxError:
        return set()
    stub, solution = f"myops.exercises.check('{number}')", f"myops.exercises.check('{number}', solution=True)"
    statements = [ast.unparse(statement) for statement in body]
    proofs = set()
    stored = "".join(output.get("text", "") for output in cell.get("outputs", ())
                     if output.get("output_type") == "stream" and output.get("name") == "stdout")
    verdicts = [line for line in stored.splitlines(keepends=True)
                if line.startswith(f"{exercises.folder(number)}: not solved yet: ")]
    if (compared and cell.get("execution_count") is not None and stub in statements and len(verdicts) == 1
            and all(re.sub(regex, replace, verdicts[0]) == verdicts[0] for regex, replace in sanitize_patterns)):
        proofs.add("stub")
    names = {ast.unparse(statement.targets[0]) for statement in body
             if isinstance(statement, ast.Assign) and len(statement.targets) == 1
             and isinstance(statement.targets[0], ast.Name)
             and ast.unparse(statement.value) == f"myops.exercises.verdict('{number}', solution=True)"}
    for statement in body:
        if not isinstance(statement, ast.Assert):
            continue
        test = statement.test
        if ast.unparse(test) == solution:
            proofs.add("solution")
        for name in names:
            first, rest = (test.values[0], test.values[1:]) if isinstance(test, ast.BoolOp) and isinstance(
                test.op, ast.Or) else (test, [])
            if ast.unparse(first) == f"{name}.solved" and all(ast.unparse(other) == f"{name}.status == 'skipped' "
                                                              "and toolchain.cuda_skip_reason() is not None"
                                                              for other in rest):
                proofs.add("solution")
    return proofs


def notebook_proofs(session: pytest.Session) -> dict[str, set[str]]:
    """number -> what the exercise cells of the notebooks this run runs prove (see `cell_proofs`): none where
    nbval is absent or no notebook is selected, a cell nbval skips or lets raise proves nothing."""
    if IPyNbCell is None:
        return {}
    option = getattr(session.config.option, "nbval_sanitize_with", None)  # a path nbval opens as given
    patterns = get_sanitize_patterns(Path(option).read_text() if option else "")
    proofs = {}
    for item in session.items:
        number = item.path.stem[:2]
        if (not isinstance(item, IPyNbCell) or item.options["skip"] or item.options["check_exception"]
                or number not in NUMBERS or item.path.stem != exercises.folder(number)):
            continue
        proofs.setdefault(number, set()).update(cell_proofs(number, item.cell, item.options["check"], patterns))
    return proofs


@pytest.fixture(scope="session")
def proved(request) -> dict[str, set[str]]:
    return notebook_proofs(request.session)


def check_all_but_proved(part: str, proved, monkeypatch, capfd):
    """`check --all` (of the solutions for part "solution"), in this process, each check in a child; an
    exercise whose `part` a notebook of this run proves gets the verdict "skipped" with message PROVED."""
    checked = exercises.verdict

    def verdict(number, solution=False, *args, **kwargs):
        if part in proved.get(number, ()):
            return exercises.Verdict(exercises.folder(number), "skipped", PROVED)
        return checked(number, solution, *args, **kwargs)

    monkeypatch.setattr(exercises, "verdict", verdict)
    status = exercises.main(["check", "--all"] + (["--solution"] if part == "solution" else []))
    out, err = capfd.readouterr()
    return status, verdict_lines(subprocess.CompletedProcess([], status, out, err))


def test_every_solution_passes(capfd, monkeypatch, proved):
    status, found = check_all_but_proved("solution", proved, monkeypatch, capfd)
    for folder, message in found.items():
        if "solution" in proved.get(folder[:2], ()):
            assert message == PROVED, f"{folder}: {message}"
        elif folder == "03_cuda_kernel" and CUDA_SKIP:
            assert message.startswith("cannot be checked here:"), message
        else:
            assert message.startswith("solved"), f"{folder}: {message}"
    assert status == 0, found


def test_every_untouched_stub_is_reported_unsolved(capfd, monkeypatch, proved):
    status, found = check_all_but_proved("stub", proved, monkeypatch, capfd)
    for folder, message in found.items():
        if "stub" in proved.get(folder[:2], ()):
            assert message == PROVED, f"{folder}: {message}"
            continue
        if folder == "03_cuda_kernel" and CUDA_SKIP:
            continue
        assert message.startswith("not solved yet: "), f"{folder}: {message}"
        assert "\n" not in message
    assert status == (0 if all(message == PROVED for message in found.values()) else 1), found


@needs_nbval
def test_each_notebooks_exercise_cell_proves_its_stub_and_solution():
    """What `check --all` leaves to the notebooks: a notebook whose run cells check its exercise (00 has none)
    does so in a form `cell_proofs` reads, for the stub and the solution alike."""
    patterns = get_sanitize_patterns((REPO_ROOT / "notebooks" / "sanitize.cfg").read_text())
    checking = []
    for number in NUMBERS:
        path = REPO_ROOT / "notebooks" / f"{exercises.folder(number)}.ipynb"
        cells = [cell for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"
                 and cell.execution_count is not None
                 and re.search(rf"myops\.exercises\.(check|verdict)\(\"{number}\"", cell.source)]
        if cells:
            checking.append(number)
            proofs = set().union(*(cell_proofs(number, cell, True, patterns) for cell in cells))
            assert proofs == {"stub", "solution"}, path.name
    assert len(checking) >= 14, checking


@pytest.mark.parametrize("source, outputs, compared, proves", [
    ('myops.exercises.check("02")\nmyops.exercises.check("02", solution=True)', "02_cpu_kernel: not solved yet: x\n",
     True, {"stub"}),  # the solution's verdict is printed, not asserted
    ('myops.exercises.check("02")\nassert myops.exercises.check("03", solution=True)',
     "02_cpu_kernel: not solved yet: x\n", False, set()),  # output not compared; another exercise's solution
    ('if False:\n    myops.exercises.check("02")\n    assert myops.exercises.check("02", solution=True)',
     "02_cpu_kernel: not solved yet: x\n", True, set()),  # not statements of their own
    ('myops.exercises.check("02")', "02_cpu_kernel: solved\n", True, set()),  # the stored verdict is not unsolved
    ('r = myops.exercises.verdict("02", solution=True)\nassert r.solved or r.status != "solved"', "", True, set()),
    ('r = myops.exercises.verdict("02", solution=True)\nassert r.solved or r.status == "skipped"', "", True, set()),
    ('r = myops.exercises.verdict("02", solution=True)\n'
     'assert r.solved or (r.status == "skipped" and toolchain.cuda_skip_reason() is not None)', "", True,
     {"solution"}),  # notebook 03's form
], ids=["printed-solution", "not-compared", "nested", "stored-solved", "assert-anything", "skipped-anyhow",
        "skipped-without-cuda"])
@needs_nbval
def test_a_cell_proves_only_what_it_checks(source, outputs, compared, proves):
    cell = nbformat.v4.new_code_cell(source, execution_count=1,
                                     outputs=[nbformat.v4.new_output("stream", name="stdout", text=outputs)])
    assert cell_proofs("02", cell, compared) == proves


def test_one_unsolved_exercise_exits_nonzero_with_one_line(capsys):
    assert exercises.main(["check", "2"]) == 1
    assert capsys.readouterr().out == (
        "02_cpu_kernel: not solved yet: ex02::mymul has no kernel on the CPU key (the dispatch table shows nothing "
        "there); register mymul_cpu in the TORCH_LIBRARY_IMPL(ex02, CPU, m) block\n")


def test_unknown_exercise(capsys):
    assert exercises.main(["check", "99"]) == 2
    expected = "myops.exercises: no exercise '99'; the exercises are " + ", ".join(NUMBERS)
    assert capsys.readouterr().out == expected + "\n"


def test_check_prints_the_verdict_and_returns_a_bool(capsys):
    assert exercises.check("08") is False
    assert capsys.readouterr().out == ("08_performance: not solved yet: write seconds_per_call in "
                                       "exercises/08_performance/timing.py\n")
    assert exercises.check("08", solution=True) is True
    assert capsys.readouterr().out == "08_performance: solved\n"


@pytest.fixture
def broken(tmp_path):
    """A copy of one solution folder, edited: returns (root, build dir, folder) after replacing `old`, which
    must occur once in `file`, by `new` (see answer_tree)."""
    def make(number: str, old: str, new: str, file: str):
        root, build = answer_tree(tmp_path, number, ((file, old, new),))
        return root, build, exercises.folder(number)
    return make


def test_compile_error_is_reported_by_its_first_compiler_error(broken):
    root, build, folder = broken("02", "o[i] = a[i] * b[i];", "o[i] = a[i] * b[i]", "mymul.cpp")
    result = exercises.verdict("02", root=root, build_dir=build)
    assert result.status == "compile-error"
    assert re.fullmatch(r"does not compile: answer/02_cpu_kernel/mymul\.cpp:\d+:\d+: error: expected [‘'];[’'] .*",
                        result.message), result.message


def test_wrong_values_are_reported_with_what_was_expected(broken):
    root, build, folder = broken("02", "o[i] = a[i] * b[i];", "o[i] = a[i] + b[i];", "mymul.cpp")
    result = exercises.verdict("02", root=root, build_dir=build)
    assert result.status == "unsolved"
    assert re.fullmatch(r"not solved yet: ex02::mymul on contiguous torch\.float32 inputs returned wrong values: "
                        r"at index \[\d+, \d+\] expected -?[\d.e+-]+, got -?[\d.e+-]+", result.message), result.message


def test_a_python_answer_timed_with_one_thread_is_told_why(broken):
    root, build, folder = broken("08", "num_threads=torch.get_num_threads(),", "", "timing.py")
    result = exercises.verdict("08", root=root, build_dir=build)
    assert result.message == ("not solved yet: seconds_per_call ran the function with [1] thread(s) while torch "
                              "uses 3; pass num_threads=torch.get_num_threads() to the Timer")


def test_a_kernel_that_recurses_is_reported_as_a_crash_not_a_traceback(broken):
    guard = "  c10::impl::ExcludeDispatchKeyGuard no_autocast(c10::DispatchKey::AutocastCPU);\n"
    root, build, folder = broken("07", guard, "", "mynorm.cpp")
    result = exercises.verdict("07", root=root, build_dir=build)
    assert result.status == "crashed"
    assert result.message == (
        "not solved yet: the check crashed with SIGSEGV (most likely a stack overflow: the autocast wrapper calls "
        "ex07::mynorm again without leaving AutocastCPU, forever: take "
        "c10::impl::ExcludeDispatchKeyGuard(c10::DispatchKey::AutocastCPU) first (the key named Autocast is "
        "AutocastCUDA))")


# -- the checker's own behaviours: verdicts without a check's answer, the command line ----------------------
def test_an_answer_that_never_returns_gets_the_timeout_verdict(broken):
    root, build, folder = broken("08", "import torch\n", "while True:\n    pass\nimport torch\n", "timing.py")
    result = exercises.verdict("08", root=root, build_dir=build, timeout=20)
    assert (result.status, result.message) == (
        "timeout", "not solved yet: the check did not finish within 20 s (an endless loop?)")


def test_an_answer_that_exits_the_process_is_reported_with_its_last_words(broken):
    root, build, folder = broken("08", "import torch\n", "import os, sys\nsys.stderr.write('leaving now\\n')\n"
                                 "os._exit(3)\nimport torch\n", "timing.py")
    result = exercises.verdict("08", root=root, build_dir=build)
    assert (result.status, result.message) == (
        "crashed", "not solved yet: the check stopped without a verdict: leaving now")


def test_checks_run_at_once_and_a_child_killed_by_a_signal_leaves_the_next_checks_running(broken):
    """Each check's child is forked from one server per parent process (runner.serve): threads share it, and a
    child that dies takes nothing else with it."""
    root, build, folder = broken("08", "import torch\n", "import os, signal\nos.kill(os.getpid(), signal.SIGKILL)\n"
                                 "import torch\n", "timing.py")
    with ThreadPoolExecutor(max_workers=2) as pool:
        killed = pool.submit(exercises.verdict, "08", root=root, build_dir=build)
        solved = pool.submit(exercises.verdict, "01", solution=True)
        assert (killed.result().status, killed.result().message) == (
            "crashed", "not solved yet: the check crashed with SIGKILL")
        assert solved.result().solved, solved.result()
    server = runner._server()
    assert exercises.verdict("01", solution=True).solved
    assert runner._server() is server and server.alive()


def test_a_tree_without_the_exercise_folder_is_told_which_folder_is_missing(tmp_path):
    (tmp_path / "mine").mkdir()
    result = exercises.verdict("11", root=tmp_path / "mine", build_dir=tmp_path / "build")
    assert (result.status, result.message) == (
        "unsolved", f"not solved yet: {exercises.relative_path(tmp_path / 'mine')}/11_python_torch_library/ "
                    "does not exist")


def test_list_names_every_exercise_and_its_language(capsys):
    assert exercises.main(["list"]) == 0
    rows = [line.split(maxsplit=1) for line in capsys.readouterr().out.splitlines()]
    assert [row[0] for row in rows] == [exercises.folder(n) for n in NUMBERS]
    assert {row[1] for row in rows} == {"C++", "CUDA", "Python", "stable C++"} and ["08_performance", "Python"] in rows


@pytest.mark.parametrize("argv", [["check"], ["check", "02", "--all"]], ids=["nothing", "both"])
def test_check_needs_one_number_or_all(capsys, argv):
    with pytest.raises(SystemExit) as exit_:
        exercises.main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.strip().endswith("error: give one exercise number or --all")


def test_root_and_build_check_a_copy_and_build_where_asked(tmp_path):
    shutil.copytree(REPO_ROOT / "solutions" / exercises.folder("01"), tmp_path / "copy" / exercises.folder("01"))
    done = run_checker("check", "01", "--root", str(tmp_path / "copy"), "--build", str(tmp_path / "libraries"))
    assert (done.returncode, done.stdout) == (0, "01_schema: solved\n"), done.stderr
    assert list((tmp_path / "libraries").rglob("*.so")), "the copy's library was not built under --build"


def test_the_triton_check_leaves_nothing_in_the_temp_folder(tmp_path):
    """Inductor writes its cache (a large precompiled header among it) under the temp folder whatever
    TORCHINDUCTOR_CACHE_DIR says; exercise 17's check, which compiles, keeps it in build/ instead."""
    temp = tmp_path / "tmp"
    temp.mkdir()
    done = subprocess.run([sys.executable, "-m", "myops.exercises", "check", "17", "--solution"], capture_output=True,
                          text=True, cwd=REPO_ROOT, timeout=1800, env=dict(os.environ, TMPDIR=str(temp)))
    assert (done.returncode, done.stdout) == (0, "17_triton_kernels: solved\n"), done.stderr
    assert sorted(p.name for p in temp.iterdir()) == []
