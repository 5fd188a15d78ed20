"""Browser-test plumbing: each test's outcome is on its node, so fixtures can screenshot failures;
`browser` is Debian's chromium driven by Playwright, shared by the browser tests."""

import pytest


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture
def browser(request):
    """Chromium; when the test fails, each open page is saved as <test>-failure-<n>.png.
    (Each test module skips itself first when chromium or playwright is missing.)"""
    from playwright.sync_api import sync_playwright

    from labserver import CHROMIUM, CHROMIUM_ARGS, OUTPUT

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS)
        try:
            yield b
            report = getattr(request.node, "rep_call", None)
            if report is not None and report.failed:
                OUTPUT.mkdir(parents=True, exist_ok=True)
                for i, page in enumerate(p for c in b.contexts for p in c.pages):
                    page.screenshot(path=str(OUTPUT / f"{request.node.name}-failure-{i}.png"))
        finally:
            b.close()
