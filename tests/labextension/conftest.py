"""Browser-test plumbing: each test's outcome is on its node, so fixtures can screenshot failures."""

import pytest


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
