"""The report in a real headless Chromium (Debian's chromium + chromium-driver, driven by selenium)."""
from __future__ import annotations

import base64
import shutil
import tempfile
from pathlib import Path

import pytest
from report_lab import CLUSTER, GLOO, SWEEP, documents, hostile_document, load  # noqa: F401 - fixtures

from dsv3_preflight.reports import write_html

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"

pytestmark = [pytest.mark.chromium, pytest.mark.slow]


@pytest.fixture
def browser(tmp_path):
    if not Path(CHROMIUM).exists() or not Path(CHROMEDRIVER).exists():
        pytest.skip(f"needs Debian's chromium and chromium-driver ({CHROMIUM}, {CHROMEDRIVER} not found; "
                    "apt-get install -y chromium chromium-driver)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="needs the selenium package (test extras)")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    profile_dir = tempfile.mkdtemp(prefix="chromium-", dir=tmp_path)
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-background-networking",
                "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage", "--window-size=1280,1100",
                f"--user-data-dir={profile_dir}"):
        options.add_argument(arg)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    # An explicit driver path: selenium never downloads a driver or a browser.
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER, log_output=str(tmp_path / "chromedriver.log")), options=options)
    driver.set_page_load_timeout(30)
    driver.set_script_timeout(10)
    try:
        yield driver
    finally:
        driver.quit()  # ends chromium and chromedriver


def console_problems(driver) -> list[dict]:
    return [e for e in driver.get_log("browser") if e["level"] in ("SEVERE", "WARNING")]


def click(driver, element) -> None:
    """Click as a person would after scrolling the element to the middle of the window (clear of the sticky bar)."""
    driver.execute_script("arguments[0].scrollIntoView({block: 'center'})", element)
    element.click()


def watch_text(driver, element) -> str:
    """Record every text the element shows from now on (the copy button says "copied", then reverts after 1.5 s:
    on a loaded machine a plain read can miss it); returns the script that reads the record."""
    driver.execute_script(
        "var el = arguments[0]; window.__texts = [el.textContent];"
        "new MutationObserver(function () { window.__texts.push(el.textContent); })"
        ".observe(el, {childList: true, characterData: true, subtree: true});", element)
    return "return window.__texts;"


def visible(driver, css: str):
    return [e for e in driver.find_elements("css selector", css) if e.is_displayed()]


def test_chromium_shows_verdict_matrix_and_opens_evidence_without_console_errors(browser, tmp_path, load):
    doc = load(CLUSTER)   # a lost node (lab-node3), two nodes exporting NODE_RANK=1
    page = write_html(doc, tmp_path / "report.html")
    browser.get(page.as_uri())

    assert browser.find_element("css selector", "header .big").text == "✘ NO-GO"
    assert "node lab-node3 is down (error)" in browser.find_element("css selector", "ul.why").text
    rows = visible(browser, "table.matrix tbody tr[data-check]")
    assert [r.get_attribute("data-check") for r in rows][0] == "cluster.node_run"
    checks = {r["name"] for r in doc["results"]}
    assert len(rows) == len(checks) == 6
    browser.save_screenshot(str(tmp_path / "top.png"))

    # a remediation's copy button copies (clipboard API, or the selection fallback) and says so
    button = browser.find_element("css selector", "#failures button.copy")
    seen = watch_text(browser, button)
    click(browser, button)
    from selenium.webdriver.support.wait import WebDriverWait

    WebDriverWait(browser, 10).until(lambda _: "copied" in browser.execute_script(seen))

    # a matrix cell opens its evidence: the NODE_RANK each node exports, 1 twice
    cell = browser.find_element("css selector", 'tr[data-check="cluster.node_rank"] td.st-fail a')
    assert cell.text == "✘ FAIL"
    target = cell.get_attribute("data-target")
    details = browser.find_element("id", target)
    assert details.get_attribute("open") is None
    click(browser, cell)
    assert details.get_attribute("open") == "true"
    exported = [r.text for r in visible(browser, f"#{target} table.kv tr") if r.text.startswith("lab-node")]
    assert exported[:3] == ["lab-node0 0", "lab-node1 1", "lab-node2 1"]
    browser.save_screenshot(str(tmp_path / "evidence.png"))

    # filters: only failures, then only one node
    click(browser, browser.find_element("css selector", 'input[name=status][value=pass]'))
    click(browser, browser.find_element("css selector", 'input[name=status][value=skip]'))
    shown = [r.get_attribute("data-check") for r in visible(browser, "table.matrix tbody tr[data-check]")]
    assert shown[0] == "cluster.node_run" and set(shown) == {
        r["name"] for r in doc["results"] if r["status"] not in ("pass", "skip")}
    assert browser.find_element("id", "shown").text == f"{len(shown)} of 6 checks shown"
    from selenium.webdriver.support.ui import Select

    Select(browser.find_element("css selector", "select[name=node]")).select_by_value("lab-node3")
    assert [h.text.split("\n")[0] for h in visible(browser, "table.matrix thead th[data-node]")] == ["lab-node3"]
    assert [r.get_attribute("data-check") for r in visible(browser, "table.matrix tbody tr[data-check]")] == [
        "cluster.node_run"]
    assert [d.get_attribute("data-check") for d in visible(browser, "details.result")] == ["cluster.node_run"]

    assert console_problems(browser) == []


def test_chromium_draws_the_bandwidth_chart_and_prints_to_pdf(browser, tmp_path, load):
    page = write_html(load(GLOO), tmp_path / "gloo.html")   # ranks that died: their log tails
    browser.get(page.as_uri())
    click(browser, browser.find_element("css selector", 'tr[data-check="dist.allreduce"] td a'))
    assert "Unable to find address for: ethX9" in visible(browser, "pre.log")[0].text
    page = write_html(load(SWEEP), tmp_path / "red.html")   # the recorded sweep, below min_busbw_gbps
    browser.get(page.as_uri())
    cell = browser.find_element("css selector", 'tr[data-check="dist.allreduce"] td a')
    target = cell.get_attribute("data-target")
    click(browser, cell)
    chart = visible(browser, f"#{target} figure.chart svg")
    assert chart and chart[0].size["width"] > 300 and chart[0].size["height"] > 100
    assert len(browser.find_elements("css selector", f"#{target} figure.chart polyline")) == 2
    chart[0].screenshot(str(tmp_path / "chart.png"))
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": "print"})
    assert visible(browser, "form.filters") == [] and visible(browser, "button.copy") == []
    browser.save_screenshot(str(tmp_path / "print.png"))
    browser.execute_cdp_cmd("Emulation.setEmulatedMedia", {"media": ""})
    pdf = base64.b64decode(browser.execute_cdp_cmd("Page.printToPDF", {"printBackground": True})["data"])
    (tmp_path / "red.pdf").write_bytes(pdf)
    assert pdf.startswith(b"%PDF") and pdf.count(b"/Type /Page") >= 2
    assert console_problems(browser) == []


def test_chromium_runs_no_script_injected_through_the_document(browser, tmp_path):
    page = write_html(hostile_document(), tmp_path / "hostile.html")
    browser.get(page.as_uri())
    for d in browser.find_elements("css selector", "details"):
        browser.execute_script("arguments[0].open = true", d)
    assert browser.execute_script("return window.__pwned === undefined")
    assert browser.find_elements("css selector", "img") == []
    assert "<script>window.__pwned=1</script>" in browser.find_element("css selector", "table.summary").text
    assert console_problems(browser) == []
