"""The HTML report in a real browser: headless Chromium opens the pages from ``file://``, and we
check that the MathML is laid out natively with non-zero size, that every image loads, that there
are no console errors, and keep a screenshot of each page (under the test's tmp folder).

Needs the Debian packages ``chromium`` and ``chromium-driver`` (``.ci/run`` installs them) and
``selenium`` (the ``dev`` extra). Skips, saying which, only when one of them cannot be found.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from test_report_html import build_sample_report

CHROMIUM_FLAGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                  "--disable-background-networking", "--disable-component-update", "--disable-sync",
                  "--disable-dev-shm-usage", "--window-size=1280,1600", "--hide-scrollbars"]


def _find(*names: str) -> str | None:
    for n in names:
        p = shutil.which(n) or (n if os.path.isabs(n) and os.access(n, os.X_OK) else None)
        if p:
            return p
    return None


@pytest.fixture(scope="module")
def browser(tmp_path_factory):
    chromium = _find("chromium", "/usr/bin/chromium", "chromium-browser", "google-chrome")
    if chromium is None:
        pytest.skip("Chromium not found (install the Debian package `chromium`; .ci/run does)")
    driver_bin = _find("chromedriver", "/usr/bin/chromedriver")
    if driver_bin is None:
        pytest.skip("chromedriver not found (install the Debian package `chromium-driver`; .ci/run does)")
    webdriver = pytest.importorskip("selenium.webdriver", reason="selenium not installed (pip install -e '.[dev]')")
    from selenium.webdriver.chrome.service import Service

    opts = webdriver.ChromeOptions()
    opts.binary_location = chromium
    for f in CHROMIUM_FLAGS:
        opts.add_argument(f)
    opts.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    os.environ.setdefault("SE_OFFLINE", "true")  # never let Selenium Manager go online for drivers
    drv = webdriver.Chrome(service=Service(executable_path=driver_bin), options=opts)
    drv.set_page_load_timeout(20)
    yield drv
    drv.quit()


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    return build_sample_report(tmp_path_factory.mktemp("browser") / "site")


_PROBE = """
const maths = Array.from(document.querySelectorAll('math')).map(m => {
  const r = m.getBoundingClientRect();
  return {w: r.width, h: r.height, display: getComputedStyle(m).display};
});
const fracs = Array.from(document.querySelectorAll('mfrac')).map(f => {
  const r = f.getBoundingClientRect(); return {w: r.width, h: r.height};
});
const imgs = Array.from(document.images).map(i => ({src: i.getAttribute('src'), complete: i.complete, w: i.naturalWidth}));
const line = parseFloat(getComputedStyle(document.body).lineHeight) || 20;
return {maths, fracs, imgs, line, title: document.title};
"""


@pytest.mark.parametrize("page, min_math, min_imgs", [
    ("index.html", 0, 0),
    ("claims/demo.identity.html", 4, 0),
    ("claims/demo.erratum.html", 2, 2),
    ("claims/demo.evidence.html", 1, 1),
    ("claims/demo.crash.html", 0, 0),
    ("errata.html", 2, 1),
])
def test_page_renders_in_chromium(browser, site, tmp_path, page, min_math, min_imgs):
    browser.get_log("browser")  # drop anything logged before this page
    browser.get((site / page).resolve().as_uri())
    info = browser.execute_script(_PROBE)
    shot = tmp_path / (page.replace("/", "_") + ".png")
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 1000

    assert len(info["maths"]) >= min_math, f"{page}: {len(info['maths'])} <math> elements"
    for m in info["maths"]:
        assert m["w"] > 0 and m["h"] > 0, f"{page}: a <math> element has no size: {m}"
        assert "math" in m["display"], f"{page}: <math> is not laid out as MathML (display {m['display']!r})"
    for f in info["fracs"]:  # a real fraction stacks numerator over denominator: taller than a line
        assert f["w"] > 0 and f["h"] > 0.9 * info["line"], f"{page}: <mfrac> not laid out as a fraction: {f}"
    assert len(info["imgs"]) >= min_imgs
    for i in info["imgs"]:
        assert i["complete"] and i["w"] > 0, f"{page}: image {i['src']} did not load"
    errors = [e for e in browser.get_log("browser") if e.get("level") in ("SEVERE", "ERROR")]
    assert not errors, f"{page}: console errors: {errors}"
