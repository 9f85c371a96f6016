"""myops.show displays csrc files and their marked slices."""
import pytest

import myops
from myops.source import source_slice


def test_slice_is_between_markers_and_dedented():
    text = source_slice("cpu/myadd.cpp", "registration")
    assert text.startswith("// An ordinary call reaches this kernel")
    assert "TORCH_LIBRARY_IMPL(myops, CPU, m)" in text and "// END" not in text


def test_whole_file_and_language():
    pytest.importorskip("IPython", reason="myops.show returns an IPython display object")
    code = myops.show("schema.cpp")
    assert "TORCH_LIBRARY(myops, m)" in code.data


def test_missing_marker_is_a_clear_error():
    with pytest.raises(KeyError, match="csrc/schema.cpp has no '// BEGIN nope' marker"):
        source_slice("schema.cpp", "nope")
