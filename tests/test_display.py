"""myops.display: the display helpers the notebooks import (failures, first_line, show_py, show_py_lines)."""
import sys

import pytest
import torch

import myops
from myops.display import failures, first_line, show_py, show_py_lines


# Throwaway Python operators, so that these tests need no compiled layer.
@torch.library.custom_op("showtest::twice", mutates_args=())
def twice(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice.register_fake
def twice_fake(x):
    return torch.empty_like(x)


@torch.library.custom_op("showtest::twice_fake_float32", mutates_args=())
def twice_fake_float32(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@twice_fake_float32.register_fake
def float32_fake(x):
    return torch.empty_like(x, dtype=torch.float32)  # wrong for every other dtype


@torch.library.custom_op("showtest::twice_without_fake", mutates_args=())
def twice_without_fake(x: torch.Tensor) -> torch.Tensor:
    return x * 2


def test_failures_is_empty_when_all_four_tests_pass():
    assert failures(twice, torch.randn(3)) == {}


def test_failures_names_each_failed_test_with_the_first_line_of_its_error():
    assert failures(twice_fake_float32, torch.randn(3, dtype=torch.float64)) == {
        "test_faketensor": "When comparing the output of showtest.twice_fake_float32.default on FakeTensor and "
                           "concrete Tensors, found mismatched tensor metadata: Dtypes torch.float64 and "
                           "torch.float32 are not equal!"}
    missing = failures(twice_without_fake, torch.randn(3))
    assert set(missing) == {"test_faketensor", "test_aot_dispatch_dynamic"}
    assert missing["test_faketensor"].startswith(
        "There was no fake impl registered for <CustomOpDef(showtest::twice_without_fake)>.")
    assert all("\n" not in message for message in missing.values())


def test_first_line():
    def raises(kind):
        def call():
            raise kind("first line\nsecond line")
        return call

    assert first_line(raises(RuntimeError)) == "first line"
    assert first_line(raises(NotImplementedError)) == "first line"
    assert first_line(lambda: 1 + 1) == "no error"
    with pytest.raises(ValueError):  # only the two errors the dispatcher raises are caught
        first_line(raises(ValueError))


def test_show_py_prints_the_function_a_custom_op_was_made_from(capsys):
    show_py(twice, twice_fake)
    assert capsys.readouterr().out == (
        '@torch.library.custom_op("showtest::twice", mutates_args=())\n'
        "def twice(x: torch.Tensor) -> torch.Tensor:\n"
        "    return x * 2\n"
        "\n"
        "@twice.register_fake\n"
        "def twice_fake(x):\n"
        "    return torch.empty_like(x)\n"
        "\n")


def test_show_py_lines_prints_matching_lines_only(tmp_path, monkeypatch, capsys):
    (tmp_path / "registrations.py").write_text("CALLS = []\nCALLS.append('register_fake')\nCALLS.append('register_vmap')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    import registrations

    show_py_lines(registrations, "register_")
    assert capsys.readouterr().out == "CALLS.append('register_fake')\nCALLS.append('register_vmap')\n"
