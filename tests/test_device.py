"""The demo device (csrc/device/): an out-of-tree backend on PrivateUse1 whose memory is host memory.

Its aten::add kernels against torch.add on the CPU, the boxed run-on-CPU kernel of the myops operators,
the fallback for every other operator, autograd through the device, and what loading it changes. The cases
live in tests/device_cases.py and run in one pytest process of their own (loading the device changes the
process for good); each is reported here as a test of its own, with the child's result.
"""
import subprocess
import sys
import xml.etree.ElementTree as ElementTree

import pytest

from myops.build import REPO_ROOT

CASES = REPO_ROOT / "tests" / "device_cases.py"
# Plain pytest in the child: the notebook and xdist plugins would only add seconds of start-up.
CHILD = [sys.executable, "-m", "pytest", "-o", "addopts=", "-p", "no:cacheprovider", "-p", "no:nbval",
         "-p", "no:xdist"]


def collect_cases() -> list[str]:
    """The node ids of the device cases, as the child pytest collects them."""
    result = subprocess.run([*CHILD, "--collect-only", "-q", str(CASES)], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=300)
    ids = [line.split("::", 1)[1] for line in result.stdout.splitlines() if "::" in line]
    assert result.returncode == 0 and ids, result.stdout[-3000:] + result.stderr[-2000:]
    return ids


@pytest.fixture(scope="module")
def outcomes(tmp_path_factory):
    """Run every case once in a child pytest; each case's outcome and message by node id."""
    report = tmp_path_factory.mktemp("device") / "report.xml"
    result = subprocess.run([*CHILD, "-q", f"--junitxml={report}", str(CASES)], capture_output=True, text=True,
                            cwd=REPO_ROOT, timeout=900)
    assert report.exists(), result.stdout[-3000:] + result.stderr[-2000:]
    found = {}
    for case in ElementTree.parse(report).iter("testcase"):
        node_id = case.get("classname").rsplit(".", 1)[-1] + "::" + case.get("name")
        problem = next((child for child in case if child.tag in ("failure", "error", "skipped")), None)
        found[node_id] = ("passed", "") if problem is None else (problem.tag, problem.get("message", "") + "\n" +
                                                                 (problem.text or "")[-3000:])
    return found


@pytest.mark.parametrize("case", collect_cases())
def test_device(outcomes, case):
    outcome, message = outcomes.get(case, ("missing", "the child pytest did not report this case"))
    if outcome == "skipped":
        pytest.skip(message)
    assert outcome == "passed", message
