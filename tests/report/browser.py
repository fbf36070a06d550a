"""Open a page in Debian's headless Chromium (Selenium + chromedriver) and report what happened.

``deploy/install.sh`` installs ``chromium`` and ``chromium-driver``. What is collected: a
full-page PNG screenshot, the ids of the page's elements, the console messages at level SEVERE
(errors), every URL the browser requested (DevTools ``Network.requestWillBeSent`` from the
performance log) and every ``src``/``href`` attribute (SVG ``xlink:href`` included).
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"


@dataclass(frozen=True)
class PageVisit:
    screenshot: bytes
    ids: frozenset[str]
    console_errors: tuple[str, ...]
    requests: tuple[str, ...]
    references: tuple[str, ...]  # src and href attribute values
    figures_drawn: frozenset[str]  # ids of the <figure> elements holding an <svg> with content
    title: str


_REFERENCES = """
const out = [];
for (const el of document.querySelectorAll('*')) {
  for (const name of ['src', 'href', 'xlink:href', 'srcset', 'poster', 'data']) {
    const v = el.getAttribute(name);
    if (v !== null) out.push(v);
  }
}
return out;
"""


def visit(url: str) -> PageVisit:
    """Load ``url`` headless, wait for it, and collect what happened."""
    missing = [path for path in (CHROMIUM, CHROMEDRIVER) if not shutil.which(path)]
    assert not missing, f"{missing} missing: run deploy/install.sh (apt packages chromium, chromium-driver)"
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for argument in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                     "--window-size=1280,1000", "--no-first-run", "--disable-background-networking"):
        options.add_argument(argument)
    options.set_capability("goog:loggingPrefs", {"browser": "ALL", "performance": "ALL"})
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        driver.set_page_load_timeout(60)
        driver.get(url)
        height = int(driver.execute_script("return document.documentElement.scrollHeight"))
        driver.set_window_size(1280, min(max(height, 1000), 16000))
        screenshot = driver.get_screenshot_as_png()
        ids = frozenset(driver.execute_script("return Array.from(document.querySelectorAll('[id]'), e => e.id)"))
        references = tuple(driver.execute_script(_REFERENCES))
        drawn = frozenset(driver.execute_script(
            "return Array.from(document.querySelectorAll('figure > svg'))"
            ".filter(s => s.getBBox().width > 0 && s.querySelectorAll('path, text').length > 0)"
            ".map(s => s.parentElement.id)"
        ))
        errors = tuple(entry["message"] for entry in driver.get_log("browser") if entry["level"] == "SEVERE")
        requests = []
        for entry in driver.get_log("performance"):
            message = json.loads(entry["message"])["message"]
            if message.get("method") == "Network.requestWillBeSent":
                requests.append(message["params"]["request"]["url"])
        return PageVisit(screenshot, ids, errors, tuple(requests), references, drawn, driver.title)
    finally:
        driver.quit()


def is_local_reference(value: str) -> bool:
    """A fragment or inline data: nothing the page must fetch."""
    return value.startswith("#") or value.startswith("data:")
