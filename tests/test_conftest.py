"""The suite's own set-up: how `make test` shares the tests between its pytest-xdist workers."""

from __future__ import annotations

from tests.conftest import KEPT_TOGETHER, ROOT, work_unit


def test_each_test_is_its_own_unit_except_in_a_module_kept_together() -> None:
    one = "tests/config/test_settings.py::test_defaults_load[dev]"
    assert work_unit(one) == one
    for module, group in KEPT_TOGETHER.items():
        assert (ROOT / module).is_file(), f"{module} was moved: update KEPT_TOGETHER in tests/conftest.py"
        assert work_unit(f"{module}::test_a") == work_unit(f"{module}::test_b[x]") == group
    readers = [module for module, group in KEPT_TOGETHER.items() if group == "finished-runs"]
    assert len({work_unit(f"{module}::test") for module in readers}) == 1 < len(readers)
