"""``MIRROR_GIL_SWITCH_US``: set where a mirror starts, 0 leaves Python's interval alone."""

from __future__ import annotations

import sys
from collections.abc import Iterator

import pytest

from workers.mirror.host import tune_gil_switch

pytestmark = pytest.mark.unit


@pytest.fixture(autouse=True)
def _restore_interval() -> Iterator[None]:
    before = sys.getswitchinterval()
    yield
    sys.setswitchinterval(before)


def test_a_positive_setting_becomes_the_switch_interval() -> None:
    tune_gil_switch(1000)
    assert sys.getswitchinterval() == pytest.approx(0.001)


def test_zero_leaves_the_interval_as_it_was() -> None:
    sys.setswitchinterval(0.004)
    tune_gil_switch(0)
    assert sys.getswitchinterval() == pytest.approx(0.004)
