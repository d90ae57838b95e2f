"""The history pages in a real browser: uvicorn serves the app on a free loopback port over a SQLite database
filled by a replay tune and jobs in several states; headless Debian Chromium, driven by Selenium through
Debian's chromedriver, opens ``/``, clicks through to a problem page, checks what is visible there and takes
a screenshot of it; then opens ``/docs`` (Swagger UI from the packaged assets, host names unresolvable so that
nothing can come from a CDN) and ``/redoc``. ``CONVTUNE_UPDATE_SCREENSHOT=1`` writes the screenshots to
``docs/screenshot_problem.png`` and ``docs/screenshot_docs_offline.png`` (committed); otherwise they go to the
test's temporary folder, so a test run leaves the work tree clean.

Skipped, saying why, where Chromium, its driver or Selenium is missing (CI installs Debian's ``chromium`` and
``chromium-driver``; the browser is never downloaded).
"""

from __future__ import annotations

import itertools
import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from test_pages import TRIALS, TUNED, Filled, fill_database, make_app

ROOT = Path(__file__).resolve().parents[2]
SCREENSHOT = ROOT / "docs" / "screenshot_problem.png"
DOCS_SCREENSHOT = ROOT / "docs" / "screenshot_docs_offline.png"
CHROMIUM_NAMES = ("chromium", "chromium-browser", "google-chrome")
FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
         "--disable-background-networking", "--disable-component-update", "--disable-sync",
         "--disable-dev-shm-usage", "--hide-scrollbars", "--force-device-scale-factor=1",
         # offline: every host name but the loopback server's fails to resolve (a CDN could not be reached)
         "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1")


def _browser() -> tuple[str, str] | str:
    """(chromium, chromedriver) paths, or why the test cannot run."""
    try:
        import selenium  # noqa: F401
    except ImportError:
        return "needs the Python package selenium (pip install -e '.[dev]')"
    chromium = next((p for p in map(shutil.which, CHROMIUM_NAMES) if p), None)
    driver = shutil.which("chromedriver")
    if chromium is None or driver is None:
        missing = " and ".join(n for n, p in (("chromium", chromium), ("chromedriver", driver)) if p is None)
        return f"needs {missing}: apt-get install -y chromium chromium-driver (Debian)"
    return chromium, driver


_FOUND = _browser()
pytestmark = pytest.mark.skipif(isinstance(_FOUND, str), reason=_FOUND if isinstance(_FOUND, str) else "")


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    return fill_database(tmp_path_factory.mktemp("browser"), escape_probes=False)


@pytest.fixture(scope="module")
def server(filled: Filled) -> Iterator[str]:
    """The app under uvicorn in a thread, on a loopback socket bound to a free port; yields the base URL."""
    import uvicorn

    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    config = uvicorn.Config(make_app(filled.url), log_level="warning", lifespan="on")
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(10)
    sock.close()


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    assert not isinstance(_FOUND, str)
    chromium, driver_path = _FOUND
    profile = tempfile.mkdtemp(prefix="convtune-chromium-")
    options = webdriver.ChromeOptions()
    options.binary_location = chromium
    for flag in (*FLAGS, f"--user-data-dir={profile}", "--window-size=1400,1000"):
        options.add_argument(flag)
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SE_OFFLINE", "true")  # Selenium Manager must not look for a browser or driver online
        driver = webdriver.Chrome(options=options, service=Service(executable_path=driver_path))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()
        shutil.rmtree(profile, ignore_errors=True)


def _ceilings(filled: Filled) -> tuple[float, float]:
    """(copy bandwidth B/s, fp32 peak FLOP/s) of the H200 row the report plots."""
    from convtune.storage import make_engine, session_scope
    from convtune.storage import queries as repo

    engine = make_engine(filled.url)
    try:
        with session_scope(engine) as session:
            device = repo.get_device(session, filled.h200_id)
            return device.copy_bandwidth_bytes_per_s, device.fp32_peak_flops_per_s
    finally:
        engine.dispose()


def _visible_text(browser: Any, css: str) -> str:
    from selenium.webdriver.common.by import By

    element = browser.find_element(By.CSS_SELECTOR, css)
    assert element.is_displayed(), css
    return str(element.text)


def test_pages_in_chromium(server: str, browser: Any, filled: Filled, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    # the index: best configs per device with efficiency, runs, problems (and jobs)
    browser.get(server + "/")
    assert browser.title.startswith("history")
    best = _visible_text(browser, "#best-configs")
    assert filled.best_config.split()[1] in best  # e.g. "tile_h=8" of the best config
    assert f"{filled.best_efficiency:.1%}" in best and "measured" in best
    assert "NVIDIA H200" in _visible_text(browser, "main")
    assert f"#{filled.run_id}" in _visible_text(browser, "#runs")
    jobs = _visible_text(browser, "#jobs")
    assert "running" in jobs and "queued" in jobs and "40 / 100 trials" in jobs and "100 / 100 trials" in jobs
    # no external resources: everything the page loaded came from the server
    resources = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(str(r).startswith(server) for r in resources), resources

    # click through to the tuned problem's page
    link = browser.find_element(By.CSS_SELECTOR, "#best-configs a.problem-link")
    assert link.text == TUNED.key()
    link.click()
    WebDriverWait(browser, 10).until(ec.url_contains(f"/problems/{filled.problem_id}"))
    assert _visible_text(browser, "#problem-key") == TUNED.key()
    problem_best = _visible_text(browser, "#best-configs")
    assert f"{filled.best_efficiency:.1%}" in problem_best and "overall" in problem_best
    rows = browser.find_elements(By.CSS_SELECTOR, "#trials tbody tr")
    assert len(rows) == TRIALS and all(r.is_displayed() for r in rows[:5])
    failed = browser.find_elements(By.CSS_SELECTOR, "#trials tbody tr.failed")
    assert len(failed) == filled.failed and "wrong" in failed[0].text
    # the report plot is there and has a size
    svg = browser.find_element(By.CSS_SELECTOR, "#report-svg")
    assert svg.is_displayed() and svg.size["width"] > 600 and svg.size["height"] > 250
    assert browser.find_element(By.CSS_SELECTOR, "#best-so-far").is_displayed()
    assert browser.find_element(By.CSS_SELECTOR, "#best-point").is_displayed()
    assert browser.find_elements(By.CSS_SELECTOR, "#failed-trials path.failed")
    assert "kept" in _visible_text(browser, "#runs")
    # the roofline as Chromium laid it out: every marker under the roof, no two labels (or the legend) overlapping
    bandwidth, peak = _ceilings(filled)
    markers = browser.find_elements(By.CSS_SELECTOR, "#roofline .floor-point, #roofline .best-point")
    assert len(markers) == 3  # the direct and Winograd floors, the best
    for marker in markers:
        intensity = float(marker.get_attribute("data-intensity") or "nan")
        flops_per_s = float(marker.get_attribute("data-flops-per-s") or "nan")
        assert flops_per_s <= min(peak, bandwidth * intensity) * (1 + 1e-5), marker.get_attribute("id")
    boxes = browser.execute_script(
        "return [...document.querySelectorAll('#roofline text[id], #roofline .legend rect')].map(e => {"
        "const r = e.getBoundingClientRect(); return [e.id || 'legend', r.left, r.top, r.right, r.bottom]; })")
    assert {"peak-label", "efficiency-label", "legend"} <= {b[0] for b in boxes}, boxes
    for a, b in itertools.combinations(boxes, 2):
        apart = a[3] <= b[1] or b[3] <= a[1] or a[4] <= b[2] or b[4] <= a[2]
        assert apart, (a, b)

    # the screenshot: the same page with a short page of trials, so that it fits
    browser.get(f"{server}/problems/{filled.problem_id}?per_page=8")
    height = browser.execute_script("return document.documentElement.scrollHeight")
    browser.set_window_size(1400, min(int(height) + 20, 4000))
    target = _screenshot_target(SCREENSHOT, tmp_path)
    assert browser.save_screenshot(str(target))
    assert target.stat().st_size > 20_000 and target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def _screenshot_target(committed: Path, tmp_path: Path) -> Path:
    target = committed if os.environ.get("CONVTUNE_UPDATE_SCREENSHOT") == "1" else tmp_path / committed.name
    target.parent.mkdir(parents=True, exist_ok=True)
    return target


def test_docs_render_offline_in_chromium(server: str, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    browser.set_window_size(1400, 1000)
    browser.get(server + "/docs")
    # Swagger UI rendered the schema: the app's title, and an operation of every tag
    title = WebDriverWait(browser, 20).until(
        ec.visibility_of_element_located((By.CSS_SELECTOR, ".swagger-ui .info .title")))
    assert title.text.startswith("convtune")
    operations = browser.find_elements(By.CSS_SELECTOR, ".swagger-ui .opblock-summary-path")
    paths = {o.get_attribute("data-path") for o in operations}
    assert {"/v1/tune", "/metrics", "/v1/problems/{problem_id}/report.svg"} <= paths, paths
    resources = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert resources and all(str(r).startswith(server) for r in resources), resources
    target = _screenshot_target(DOCS_SCREENSHOT, tmp_path)
    assert browser.save_screenshot(str(target))
    assert target.stat().st_size > 20_000 and target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"

    browser.get(server + "/redoc")
    heading = WebDriverWait(browser, 20).until(
        ec.visibility_of_element_located((By.CSS_SELECTOR, ".api-info h1")))
    assert heading.text.startswith("convtune")
    resources = browser.execute_script("return performance.getEntriesByType('resource').map(e => e.name)")
    assert all(str(r).startswith(server) for r in resources), resources
