"""What README.md promises a newcomer agrees with the files that decide it."""
import re
import tomllib

from packaging.specifiers import SpecifierSet
from packaging.version import Version

from myops.build import REPO_ROOT

README = (REPO_ROOT / "README.md").read_text()
PROJECT = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["project"]


def supported_row(name: str) -> list[str]:
    """The cells of one row of the README's *Supported versions* table."""
    row = next(line for line in README.splitlines() if line.startswith(f"| {name} |"))
    return [cell.strip() for cell in row.strip("|").split("|")]


def test_every_python_version_the_readme_states_is_pyprojects():
    required = SpecifierSet(PROJECT["requires-python"])
    # "Python ≥ 3.11" in prose (English and Chinese), and the supported cell of the table; CPython ≥ 3.10 is the
    # stable wheel's own range (stable/pyproject.toml), not the course's.
    stated = re.findall(r"(?<!C)Python ≥ (\d+\.\d+)", README) + re.findall(r"^≥ (\d+\.\d+)", supported_row("Python")[2])
    assert len(stated) >= 3 and {SpecifierSet(f">={v}") for v in stated} == {required}, stated
    tested = re.findall(r"\b3\.\d+\b", supported_row("Python")[1])
    assert tested and all(Version(v) in required for v in tested)


def test_the_torch_range_the_readme_states_is_pyprojects():
    declared = SpecifierSet(next(d for d in PROJECT["dependencies"] if d.startswith("torch")).removeprefix("torch"))
    major, minor, last_major, last_minor = re.match(r"(\d+)\.(\d+) – (\d+)\.(\d+)", supported_row("PyTorch")[2]).groups()
    # "2.13 – 2.14" means every 2.13.x and 2.14.x release
    assert SpecifierSet(f">={major}.{minor},<{last_major}.{int(last_minor) + 1}") == declared
    tested = re.match(r"(\d+\.\d+\.\d+)", supported_row("PyTorch")[1]).group(1)
    pinned = re.search(r"^torch==(\S+)", (REPO_ROOT / "requirements.txt").read_text(), re.M).group(1)
    assert tested == pinned and Version(tested) in declared


def test_the_license_file_is_the_declared_license():
    assert PROJECT["license"] == "BSD-3-Clause"
    text = (REPO_ROOT / "LICENSE").read_text()
    assert text.startswith("BSD 3-Clause License") and "Neither the name of the copyright holder" in text


def test_the_chinese_part_is_the_chinese_editions_front():
    chinese = README[README.index("## 中文"):]
    commands = re.search(r"```bash\n(.+?)```", chinese, re.S).group(1)
    assert [line.split("#")[0].strip() for line in commands.splitlines()] == ["make lab-zh", "make test"]
    makefile = (REPO_ROOT / "Makefile").read_text()
    for target in re.findall(r"`make ([\w-]+)`", chinese) + ["lab-zh", "test"]:
        assert re.search(rf"^{target}:", makefile, re.M), target
    for path in re.findall(r"`((?:docs|tests|build|csrc|exercises|solutions)/[^`*]*|requirements.txt|LICENSE)`", chinese):
        assert path.startswith("build/") or (REPO_ROOT / path.rstrip("/")).exists(), path
