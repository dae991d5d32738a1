import pytest

from gpusvm._device import step_blocks as _step_blocks


@pytest.mark.parametrize(
    ("variable", "read", "on", "off"),
    [
        ("GPUSVM_CUDA_GRAPHS", _step_blocks.default_mode, "graph", "direct"),
        ("GPUSVM_FUSED_STEPS", _step_blocks.fused_steps_default, True, False),
    ],
)
def test_switches_read_zero_or_one_and_refuse_anything_else(monkeypatch, variable, read, on, off):
    monkeypatch.delenv(variable, raising=False)
    assert read() == off
    monkeypatch.setenv(variable, "1")
    assert read() == on
    monkeypatch.setenv(variable, "0")
    assert read() == off
    monkeypatch.setenv(variable, "yes")
    with pytest.raises(ValueError, match=f"{variable} must be '0' or '1', got 'yes'"):
        read()
