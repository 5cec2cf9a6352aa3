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

from test_report_html import _survey_md, build_sample_report, catalogue_doc

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


# ------------------------------------------------------------------------------------------------
# layout (issue 45): real claims' statements, at 1280 and 390 px


@pytest.fixture(scope="module")
def layout_site(tmp_path_factory) -> Path:
    from proofs_checks.output import report as rep
    from proofs_checks.output.report import default_writers, write_report

    base = tmp_path_factory.mktemp("layout")
    sv = base / "survey"
    sv.mkdir()
    (sv / "index.md").write_text(_survey_md(), encoding="utf-8")
    (sv / "index.html").write_text("x", encoding="utf-8")
    (sv / "survey.json").write_text("{}", encoding="utf-8")  # what makes a folder a survey's page (44b F4)
    pointer = base / ".tverify" / "survey-latest.json"
    pointer.parent.mkdir()
    pointer.write_text('{"page": "%s", "created": "2026-01-01", "summary": {"ok": 6}}' % (sv / "index.html"))
    _as_if_tverify_wrote(sv, pointer)
    old = rep.SURVEY_POINTER
    rep.SURVEY_POINTER = pointer
    try:
        return write_report(base / "site", catalogue_doc(), extra_writers=default_writers())
    finally:
        rep.SURVEY_POINTER = old


_LAYOUT = """
const W = window.innerWidth;
const doc = document.documentElement.scrollWidth;
const st = document.querySelector('#status .badge') || document.querySelector('table.claims td.st .badge')
  || document.querySelector('nav a');  // a claim page / the index / the survey (its link back)
const r = st ? st.getBoundingClientRect() : null;
// text-bearing cells of one row (table cells, a hypothesis/clause item's name and body) never intersect
const overlaps = [];
function boxes(cells) { return cells.map(c => [c, c.getBoundingClientRect()]).filter(([c, b]) => b.width > 0); }
function inter(a, b) { return a.left < b.right - 1 && b.left < a.right - 1 && a.top < b.bottom - 1 && b.top < a.bottom - 1; }
const rows = Array.from(document.querySelectorAll('tr')).map(tr => Array.from(tr.children))
  .concat(Array.from(document.querySelectorAll('.item')).map(it => Array.from(it.children)));
for (const cells of rows) {
  const bs = boxes(cells);
  for (let i = 0; i < bs.length; i++) for (let j = i + 1; j < bs.length; j++)
    if (inter(bs[i][1], bs[j][1])) overlaps.push(bs[i][0].textContent.slice(0, 40) + ' / ' + bs[j][0].textContent.slice(0, 40));
  for (const [c, b] of bs) for (const g of c.querySelectorAll('.badge')) {  // a badge stays inside its cell
    const gb = g.getBoundingClientRect();
    if (gb.width > 0 && (gb.right > b.right + 1 || gb.left < b.left - 1)) overlaps.push('badge ' + g.textContent + ' leaves its cell');
  }
  // maths inside a cell stays inside it (it scrolls in its own box)
  for (const [c, b] of bs) for (const m of c.querySelectorAll('math')) {
    const mb = m.getBoundingClientRect(); const box = m.closest('.math, td, .ibody, .iname') || c;
    const cb = box.getBoundingClientRect();
    if (mb.width > 0 && box === c && mb.right > cb.right + 2 && getComputedStyle(box).overflowX === 'visible')
      overlaps.push('math spills out of ' + c.textContent.slice(0, 40));
  }
}
return {overlaps, W, doc, status: r && {left: r.left, right: r.right, top: r.top, bottom: r.bottom},
        h: window.innerHeight, text: document.body.innerText};
"""

LAYOUT_PAGES = ["index.html", "claims/icl.function_classes.html", "claims/icl.gamma_n_global_min.html",
                "claims/lyap.conditions.html", "claims/svm.softmax_saturation.html", "errata.html", "survey/index.html"]


@pytest.mark.parametrize("width", [1280, 390])
@pytest.mark.parametrize("page", LAYOUT_PAGES)
def test_layout_in_chromium(browser, layout_site, tmp_path, page, width):
    """No horizontal overflow at 1280 px, the status in view at 390 px, no text box over another
    (screenshots under $TVERIFY_SHOTS when set, else the test's tmp folder)."""
    browser.set_window_size(width, 900)
    browser.get((layout_site / page).resolve().as_uri())
    inner = browser.execute_script("return window.innerWidth")
    if inner != width:  # the window's frame: make the viewport itself the width asked for
        browser.set_window_size(2 * width - inner, 900)
    info = browser.execute_script(_LAYOUT)
    shots = Path(os.environ.get("TVERIFY_SHOTS") or tmp_path)
    shots.mkdir(parents=True, exist_ok=True)
    browser.save_screenshot(str(shots / f"{page.replace('/', '_')}-{width}.png"))
    assert info["doc"] <= info["W"], f"{page} at {width}: the page is {info['doc']} px wide in a {info['W']} px window"
    s = info["status"]
    assert s and 0 <= s["left"] and s["right"] <= info["W"] and 0 <= s["top"] < info["h"], f"{page}: status not in view: {s}"
    assert "Audit (issue" not in info["text"] and "(issue 33)" not in info["text"]
    assert "\\_" not in info["text"]
    assert not info["overlaps"], f"{page} at {width}: overlapping text: {info['overlaps'][:5]}"


def _as_if_tverify_wrote(survey_folder, pointer):
    """Record the hand-made survey folder and its pointer as tverify's own outputs (the report copies only a survey
    tverify wrote, unchanged: hostile pass 14a F7)."""
    from proofs_checks import owned

    files = sorted(str(f.relative_to(survey_folder)) for f in survey_folder.rglob("*") if f.is_file())
    assert owned.remember_folder(survey_folder, owned.folder_hashes(survey_folder, files)) and owned.remember(pointer)
