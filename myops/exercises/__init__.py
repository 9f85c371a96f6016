"""Exercises the learner can check, one per notebook 00-16 (rustlings-style).

`exercises/NN_topic/` holds what the learner edits, `solutions/NN_topic/` the reference answers, in the same
layout, and `myops/exercises/exNN_topic.py` the check. A C++ exercise is one folder of `.cpp`/`.cu` files that
becomes one library of its own, with its own namespace (`ex02`, `ex04`, ...): a broken stub never touches
another exercise or the course's layers.

    python -m myops.exercises check 02          # one exercise
    python -m myops.exercises check --all       # every exercise
    python -m myops.exercises check 02 --solution

Each check prints one line, `NN_topic: solved`, `NN_topic: not solved yet: <what is missing>` or
`NN_topic: does not compile: <the first compiler error>`, and exits non-zero unless solved. It runs in a
child process per exercise: a process can load a namespace's TORCH_LIBRARY once (a second copy aborts it),
and a kernel that crashes must not take the checker down with it. This process never imports torch.
"""
from __future__ import annotations

import argparse
import os
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from myops.exercises.runner import DEFAULT_TIMEOUT_S, Exercise, Unsolved, Verdict, run_check
from myops.paths import relative_path

__all__ = ["Exercise", "Unsolved", "Verdict", "check", "check_all", "folder", "main", "numbers", "relative_path",
           "verdict"]

_BELOW_AUTOGRAD = ("{op} again without leaving the autograd keys, forever: call it under "
                   "at::AutoDispatchBelowADInplaceOrView")

# The exercises in order. Each folder name is also the notebook's (notebooks/NN_topic.ipynb) and the check's
# module (myops/exercises/exNN_topic.py); the namespace is exNN. The crash hint says what a SIGSEGV most
# likely is there: a stack overflow of a kernel that reaches itself again.
EXERCISES: dict[str, Exercise] = {e.number: e for e in (
    Exercise("00_dispatcher_tour", "Python"),
    Exercise("01_schema", "C++"),
    Exercise("02_cpu_kernel", "C++"),
    Exercise("03_cuda_kernel", "CUDA"),
    Exercise("04_autograd", "C++", "MyMulFunction::forward calls " + _BELOW_AUTOGRAD.format(op="ex04::mymul")),
    Exercise("05_not_implemented_fallback", "C++",
             "MyRMSNormFunction::forward calls " + _BELOW_AUTOGRAD.format(op="ex05::myrmsnorm")),
    Exercise("06_inplace_or_view", "C++", "the ADInplaceOrView kernel calls ex06::myscale_ again without leaving "
             "its key, forever: redispatch with keys & c10::after_ADInplaceOrView_keyset (redispatch follows the key "
             "set it is given, not the thread's guards), under at::AutoDispatchBelowADInplaceOrView"),
    Exercise("07_autocast", "C++", "the autocast wrapper calls ex07::mynorm again without leaving AutocastCPU, "
             "forever: take c10::impl::ExcludeDispatchKeyGuard(c10::DispatchKey::AutocastCPU) first (the key "
             "named Autocast is AutocastCUDA)"),
    Exercise("08_performance", "Python"),
    Exercise("09_compile_and_opcheck", "C++"),
    Exercise("10_vmap", "Python"),
    Exercise("11_python_torch_library", "Python"),
    Exercise("12_boxed_kernels_and_backends", "C++"),
    Exercise("13_migrating_from_2020", "C++", "a kernel calls ex13::mymul again without leaving its own key, "
             "forever: the autograd kernel needs at::AutoDispatchBelowADInplaceOrView, the autocast wrapper "
             "c10::impl::ExcludeDispatchKeyGuard on AutocastCPU (Autocast is a name of AutocastCUDA, which "
             "excludes nothing on CPU)"),
    Exercise("14_stable_abi_and_wheels", "stable C++"),
    Exercise("15_export_and_aotinductor", "C++"),
    Exercise("16_python_key_and_dtensor", "Python"),
    Exercise("17_triton_kernels", "Python"),
    Exercise("18_build_the_dispatcher", "Python"),
    Exercise("19_objects_through_the_dispatcher", "Python"),
)}


def numbers() -> list[str]:
    """The exercise numbers, in order: "00" ... "15"."""
    return list(EXERCISES)


def folder(number: str | int) -> str:
    """The folder name of exercise `number` (e.g. "02" -> "02_cpu_kernel")."""
    return _exercise(number).folder


def _exercise(number: str | int) -> Exercise:
    text = str(number).strip().split("_")[0]
    key = text.zfill(2) if text.isdigit() else text
    if key not in EXERCISES:
        raise ValueError(f"myops.exercises: no exercise {number!r}; the exercises are {', '.join(numbers())}")
    return EXERCISES[key]


def verdict(number: str | int, solution: bool = False, root: Path | str | None = None,
            timeout: float = DEFAULT_TIMEOUT_S, build_dir: Path | str | None = None) -> Verdict:
    """Check one exercise in a child process and return the verdict, printing nothing.

    `solution=True` checks `solutions/` instead of `exercises/`; `root` checks another tree of the same
    layout (a copy), building into `build_dir` (default: a folder of build/ named after the tree's path).
    """
    return run_check(_exercise(number), solution, root, timeout, build_dir)


def check(number: str | int, solution: bool = False, root: Path | str | None = None,
          build_dir: Path | str | None = None) -> bool:
    """Check one exercise, print its one-line verdict, and return whether it is solved.

    `solution=True` checks the reference solution instead of the learner's stub.
    """
    result = verdict(number, solution=solution, root=root, build_dir=build_dir)
    print(result, flush=True)
    return result.solved


def check_all(solution: bool = False, root: Path | str | None = None, jobs: int | None = None,
              build_dir: Path | str | None = None) -> list[Verdict]:
    """Check every exercise (`jobs` children at a time), print each verdict in order, and return them."""
    jobs = jobs or os.cpu_count() or 1
    with ThreadPoolExecutor(max_workers=jobs) as pool:
        futures = [pool.submit(verdict, n, solution, root, DEFAULT_TIMEOUT_S, build_dir) for n in numbers()]
        results = []
        for future in futures:  # printed in exercise order as they complete
            results.append(future.result())
            print(results[-1], flush=True)
    return results


def main(argv: list[str] | None = None) -> int:
    """`python -m myops.exercises check NN | --all [--solution]`: check exercises, one line each."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["_server"]:  # where checks run (runner.serve)
        from myops.exercises.runner import serve

        serve()
        return 0
    parser = argparse.ArgumentParser(prog="python -m myops.exercises", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    checker = commands.add_parser("check", help="check one exercise, or all of them")
    checker.add_argument("number", nargs="?", help=f"the exercise: {', '.join(numbers())}")
    checker.add_argument("--all", action="store_true", help="check every exercise")
    checker.add_argument("--solution", action="store_true", help="check the reference solutions in solutions/")
    checker.add_argument("--root", type=Path, help="check this tree of exercise folders instead")
    checker.add_argument("--build", type=Path, help="where the libraries of --root go")
    checker.add_argument("--jobs", type=int, help="exercises checked at a time with --all (default: one per core)")
    commands.add_parser("list", help="list the exercises")
    args = parser.parse_args(argv)
    if args.command == "list":
        width = max(len(exercise.folder) for exercise in EXERCISES.values()) + 2
        for exercise in EXERCISES.values():
            print(f"{exercise.folder:<{width}}{exercise.language}")
        return 0
    if args.all == (args.number is not None):
        parser.error("give one exercise number or --all")
    if args.all:
        results = check_all(solution=args.solution, root=args.root, jobs=args.jobs, build_dir=args.build)
        return 0 if all(r.solved or r.status == "skipped" for r in results) else 1
    try:
        result = verdict(args.number, solution=args.solution, root=args.root, build_dir=args.build)
    except ValueError as error:
        print(error)
        return 2
    print(result)
    return 0 if result.solved else 1
