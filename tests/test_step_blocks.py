import pytest

from gpusvm._device import step_blocks as _step_blocks


@pytest.mark.parametrize(
    ("variable", "read", "default", "on", "off"),
    [
        ("GPUSVM_CUDA_GRAPHS", _step_blocks.default_mode, "graph", "graph", "direct"),
        # fused steps by default up to batch 64, measured faster than graphs there
        ("GPUSVM_FUSED_STEPS", lambda: _step_blocks.fused_steps_default(64), True, True, False),
        ("GPUSVM_FUSED_STEPS", lambda: _step_blocks.fused_steps_default(65), False, True, False),
    ],
)
def test_switches_read_zero_or_one_and_refuse_anything_else(monkeypatch, variable, read, default, on, off):
    monkeypatch.delenv(variable, raising=False)
    assert read() == default
    monkeypatch.setenv(variable, "1")
    assert read() == on
    monkeypatch.setenv(variable, "0")
    assert read() == off
    monkeypatch.setenv(variable, "yes")
    with pytest.raises(ValueError, match=f"{variable} must be '0' or '1', got 'yes'"):
        read()


def test_graphs_by_default_and_direct_launches_where_none_can_be_captured(monkeypatch):
    """'graph' is the default mode; a stepper whose launches cannot be captured, or a CuPy
    that captures nothing (the CPU emulation of CUDA), runs them direct."""
    from .conftest import NO_DEVICE, cupy_device_count

    if cupy_device_count() == 0:
        pytest.skip(NO_DEVICE)
    monkeypatch.delenv("GPUSVM_CUDA_GRAPHS", raising=False)
    expected = "graph" if _step_blocks.can_capture() else "direct"
    assert _step_blocks.StepBlocks(lambda length, launch: None).mode == expected
    assert _step_blocks.StepBlocks(lambda length, launch: None, capturable=False).mode == "direct"
    monkeypatch.setattr(_step_blocks, "can_capture", lambda: False)
    assert _step_blocks.StepBlocks(lambda length, launch: None).mode == "direct"
