"""The exercises and their checker: every solution passes, every untouched stub is reported unsolved, and
broken answers get the one-line verdict that says what is wrong (never a traceback).

The checker runs each exercise in a child process and builds its library into build/ (exercises and
solutions apart), so a warm run only loads them.
"""
import hashlib
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from myops import exercises
from myops.paths import REPO_ROOT
from myops.toolchain import cuda_skip_reason

NUMBERS = exercises.numbers()
CUDA_SKIP = cuda_skip_reason()


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
    assert NUMBERS == [f"{n:02d}" for n in range(0, 15)]
    notebooks = sorted(p.stem for p in (REPO_ROOT / "notebooks").glob("[01][0-9]_*.ipynb"))
    assert [exercises.folder(n) for n in NUMBERS] == [name for name in notebooks if name[:2] in NUMBERS]
    for number in NUMBERS:
        name = exercises.folder(number)
        stub, solution = REPO_ROOT / "exercises" / name, REPO_ROOT / "solutions" / name
        assert sorted(p.name for p in stub.iterdir()) == sorted(p.name for p in solution.iterdir()), number
    languages = [exercises.EXERCISES[n].language for n in NUMBERS]
    assert sum(language != "Python" for language in languages) >= 11  # C++, CUDA or stable C++
    checks = sorted(p.stem for p in (REPO_ROOT / "myops" / "exercises").glob("ex[0-9][0-9]_*.py"))
    assert checks == [f"ex{exercises.folder(n)}" for n in NUMBERS]  # one check module per exercise, same name


def test_the_checkers_parent_process_does_not_import_torch():
    done = subprocess.run([sys.executable, "-c", "import sys, myops.exercises; print('torch' in sys.modules)"],
                          capture_output=True, text=True, cwd=REPO_ROOT, timeout=60)
    assert done.stdout == "False\n", done.stderr


def test_every_solution_passes(capsys):
    status = exercises.main(["check", "--all", "--solution"])  # in this process; each check in a child
    found = verdict_lines(subprocess.CompletedProcess([], status, capsys.readouterr().out, ""))
    for folder, message in found.items():
        if folder == "03_cuda_kernel" and CUDA_SKIP:
            assert message.startswith("cannot be checked here:"), message
        else:
            assert message.startswith("solved"), f"{folder}: {message}"
    assert status == 0, found


def test_every_untouched_stub_is_reported_unsolved():
    done = run_checker("check", "--all")
    found = verdict_lines(done)
    for folder, message in found.items():
        if folder == "03_cuda_kernel" and CUDA_SKIP:
            continue
        assert message.startswith("not solved yet: "), f"{folder}: {message}"
        assert "\n" not in message
    assert done.returncode == 1


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
    """A copy of one solution folder, edited: returns (root, build dir, folder) after applying (old, new)."""
    def make(number: str, old: str, new: str, file: str):
        folder = exercises.folder(number)
        root = tmp_path / "broken"
        shutil.copytree(REPO_ROOT / "solutions" / folder, root / folder)
        path = root / folder / file
        text = path.read_text()
        assert old in text
        path.write_text(text.replace(old, new, 1))
        # A fixed build folder per case: identical sources are not compiled again on the next run.
        case = hashlib.sha256(f"{number}|{old}|{new}".encode()).hexdigest()[:12]
        build = REPO_ROOT / "build" / "test-exercises" / case
        return root, build, folder
    return make


def test_compile_error_is_reported_by_its_first_compiler_error(broken):
    root, build, folder = broken("02", "o[i] = a[i] * b[i];", "o[i] = a[i] * b[i]", "mymul.cpp")
    result = exercises.verdict("02", root=root, build_dir=build)
    assert result.status == "compile-error"
    assert re.fullmatch(r"does not compile: broken/02_cpu_kernel/mymul\.cpp:\d+:\d+: error: expected [‘'];[’'] .*",
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
    root, build, folder = broken("08", "import", "while True:\n    pass\nimport", "timing.py")
    result = exercises.verdict("08", root=root, build_dir=build, timeout=20)
    assert (result.status, result.message) == (
        "timeout", "not solved yet: the check did not finish within 20 s (an endless loop?)")


def test_an_answer_that_exits_the_process_is_reported_with_its_last_words(broken):
    root, build, folder = broken("08", "import", "import os, sys\nsys.stderr.write('leaving now\\n')\nos._exit(3)\n"
                                 "import", "timing.py")
    result = exercises.verdict("08", root=root, build_dir=build)
    assert (result.status, result.message) == (
        "crashed", "not solved yet: the check stopped without a verdict: leaving now")


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
