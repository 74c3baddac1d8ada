"""The design dialogue viewer: real screenshots from the offline renderer, the page it writes
checked in real headless Chromium."""

import base64
import io
import json
import os
import subprocess
import sys

import pytest

from sweet_rl.rendering import assets as page_assets
from sweet_rl.rendering.pool import DriverPool
from sweet_rl.rendering.processes import find_binary
from sweet_rl.records import RecordError
from sweet_rl.rendering.screenshots import default_screenshot_dir, screenshot_path, to_stored
from visualizers.page_parts import image_data_url
from visualizers.visualize_design_dialogue_histories import DesignViewerOptions, visualize_design

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO_ROOT, "visualizers", "visualize_design_dialogue_histories.py")
TAILWIND = ('<link href="https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/tailwind.min.css"'
            ' rel="stylesheet">')
FIRST = (f'<html>{TAILWIND}<body><header class="bg-blue-500 p-8 text-white">Draft</header>'
         '</body></html>')
FINAL = (f'<html>{TAILWIND}<body><header class="bg-green-500 p-8 text-white">Bakery</header>'
         '<img src="https://picsum.photos/id/48/300/200"></body></html>')
REFERENCE = (f'<html>{TAILWIND}<body><header class="bg-green-600 p-10 text-white">Bakery</header>'
             '<main class="p-4">Fresh bread</main></body></html>')
# Never rendered or inserted as markup: it must stay text.
HOSTILE_PAGE = '<html><body><script>window.__pwned_page=1</script><h1>hi</h1></body></html>'
SLOW_PAGE = "<html><body><p>loaded late</p></body></html>"
HOSTILE_REPLY = (
    "Make it <b>bold</b><script>window.__pwned=1</script> & <img src=x onerror=alert(1)>"
)


def _assistant(message, page=None, shot=None):
    return {"role": "assistant", "content": message, "input": "PROMPT <agent>",
            "output": f"OUTPUT: {message}", "html": page, "screenshot": shot}


@pytest.fixture(scope="module")
def run(render_assets, tmp_path_factory):
    """A frontend run per the trajectory contract, with screenshots rendered for real."""
    folder = tmp_path_factory.mktemp("run")
    jsonl = str(folder / "run.jsonl")
    shots = default_screenshot_dir(jsonl)
    os.makedirs(shots)
    stored = {}
    with DriverPool(size=1, assets_dir=render_assets) as pool:
        for html, kind in ((FIRST, "page"), (FINAL, "page"), (REFERENCE, "reference")):
            result = pool.render(html)
            assert result.ok, result.error
            stored[html] = to_stored(result.save(screenshot_path(shots, html, kind)), jsonl)
    dialogues = [
        {"task": {"problem_description": "A bakery site with a green header.",
                  "ground_truth": REFERENCE},
         "dialogue_history": [
             {"role": "user", "content": "A bakery site with a green header."},
             _assistant("Here is a first draft. [SEE RENDERED HTML]", FIRST, stored[FIRST]),
             {"role": "user", "content": HOSTILE_REPLY},
             _assistant("Green now. [SEE RENDERED HTML]", FINAL, stored[FINAL])],
         "answer": FINAL, "answer_screenshot": stored[FINAL],
         "reference_screenshot": stored[REFERENCE], "reward": 0.75},
        {"task": {"problem_description": "Escape <this> & that.", "ground_truth": REFERENCE},
         "dialogue_history": [
             {"role": "user", "content": "Escape <this> & that."},
             dict(_assistant("Slow one. [SEE RENDERED HTML]", SLOW_PAGE),
                  render_error="TimeoutException: <page load>"),
             {"role": "user", "content": "It did not load."},
             _assistant("Try this. [SEE RENDERED HTML]", HOSTILE_PAGE,
                        "run_screenshots/page_gone.png")],
         "answer": HOSTILE_PAGE, "answer_screenshot": "run_screenshots/page_gone.png",
         "reference_screenshot": stored[REFERENCE], "reward": 0.25},
        # the original code's files: no screenshot keys, no answer, no reward
        {"task": {"problem_description": "Old file", "ground_truth": REFERENCE},
         "dialogue_history": [{"role": "user", "content": "Old file"},
                              {"role": "assistant", "content": "What colour?"}]},
    ]
    with open(jsonl, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(d) + "\n" for d in dialogues)
    return jsonl


@pytest.fixture()
def browser():
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--window-size=1280,1000"):
        options.add_argument(arg)
    options.binary_location = find_binary("SWEET_RL_CHROMIUM", ("/usr/bin/chromium",), "chromium")
    driver_bin = find_binary("SWEET_RL_CHROMEDRIVER", ("/usr/bin/chromedriver",), "chromedriver")
    driver = webdriver.Chrome(service=Service(driver_bin), options=options)
    try:
        yield driver
    finally:
        driver.quit()


# real Chromium (render_assets)
@pytest.mark.slow
def test_page_in_chromium(run, browser, tmp_path, capsys):
    from selenium.webdriver.common.by import By

    out = tmp_path / "page.html"
    visualize_design(DesignViewerOptions(input_path=run, output_path=str(out),
                                         title="Design <run>"))
    text = out.read_text(encoding="utf-8")
    assert "<script>window.__pwned" not in text and "<b>bold</b>" not in text
    line = capsys.readouterr().out.strip()
    assert line == (f"visualized 3 design dialogues (2 evaluated, mean similarity 0.500; "
                    f"6 screenshots shown, 3 missing) -> {out}")

    browser.get(out.as_uri())
    assert browser.title == "Design <run>"
    sections = browser.find_elements(By.CSS_SELECTOR, "section.dialogue")
    assert len(sections) == 3
    assert browser.find_element(By.ID, "mean-similarity").text == "0.500"
    assert browser.find_element(By.ID, "count-missing").text == "3"

    # nothing loads from anywhere: images are data URLs, links are in-page anchors
    links = browser.execute_script(
        "return Array.from(document.querySelectorAll('[src],[href]'))"
        ".map(function (e) { return e.getAttribute('src') || e.getAttribute('href'); })")
    assert links and all(v.startswith("data:image/") or v.startswith("#") for v in links)
    assert browser.execute_script("return performance.getEntriesByType('resource').length") == 0

    # every embedded screenshot decodes, scaled to 640 px wide
    images = browser.find_elements(By.TAG_NAME, "img")
    assert len(images) == 6
    sizes = [browser.execute_script("return [arguments[0].complete, arguments[0].naturalWidth]", i)
             for i in images]
    assert sizes == [[True, 640]] * 6

    first = sections[0]
    assert "similarity: 0.750" in first.text
    assert len(first.find_elements(By.CSS_SELECTOR, ".turn.assistant img")) == 2
    assert len(first.find_elements(By.CSS_SELECTOR, ".pair img")) == 2  # final beside reference
    captions = [c.text for c in first.find_elements(By.CSS_SELECTOR, ".pair figcaption")]
    assert captions == ["final page", "reference page"]

    # hostile text shows as text and never runs; the agent's page is source only
    assert HOSTILE_REPLY in first.text
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert browser.execute_script("return typeof window.__pwned_page") == "undefined"
    assert not first.find_elements(By.CSS_SELECTOR, ".turn b")
    second = sections[1]
    assert "Escape <this> & that." in second.text and "similarity: 0.250" in second.text
    source = second.find_elements(By.CSS_SELECTOR, "pre.page-source")[-1]
    assert not source.is_displayed()
    source.find_element(By.XPATH, "..").find_element(By.TAG_NAME, "summary").click()
    assert source.text == HOSTILE_PAGE
    assert not browser.find_elements(By.CSS_SELECTOR, "main h1")

    # missing screenshots say so
    notes = [n.text for n in second.find_elements(By.CSS_SELECTOR, ".noshot")]
    assert notes == ["no screenshot: the page did not render (TimeoutException: <page load>)"] + \
        ["no screenshot: run_screenshots/page_gone.png not found"] * 2
    third = sections[2]
    assert "not evaluated" not in third.find_element(By.CSS_SELECTOR, ".badge").text
    assert third.find_element(By.CSS_SELECTOR, ".badge").text == "no final page"
    assert "the agent showed no page" in third.text
    assert len(third.find_elements(By.TAG_NAME, "img")) == 1  # the reference, found by its name

    # the filter of the shared frame
    browser.find_element(By.CSS_SELECTOR, "button[data-filter='nopage']").click()
    assert [s.is_displayed() for s in sections] == [False, False, True]
    assert browser.find_element(By.ID, "shown-count").text == "1"
    if os.environ.get("SWEET_RL_SCREENSHOT"):
        browser.save_screenshot(os.environ["SWEET_RL_SCREENSHOT"])


# real Chromium (render_assets)
@pytest.mark.slow
def test_render_missing_fills_the_gaps(run, render_assets, tmp_path, capsys):
    out = tmp_path / "page.html"
    visualize_design(DesignViewerOptions(
        input_path=run, output_path=str(out), render_missing=True, pool_size=1,
        assets_dir=render_assets, max_dialogues=2))
    assert "8 screenshots shown, 0 missing" in capsys.readouterr().out
    text = out.read_text(encoding="utf-8")
    assert "not found" not in text and "did not render" not in text and text.count("<img ") == 8
    sidecar = json.loads((tmp_path / "page.html.config.json").read_text())
    assert sidecar["stages"]["visualize_design_dialogue_histories"]["render_missing"] is True


def test_image_data_url_scales_crops_and_refuses_non_images(monkeypatch):
    Image = pytest.importorskip("PIL.Image")
    rows = [bytes([y % 256, 0, 0]) * 200 for y in range(500)]
    png = page_assets.encode_png(200, 500, rows)
    shot = image_data_url(png, 100, 300)
    assert shot.url.startswith("data:image/jpeg;base64,") and shot.note == "top 300 of 500 px shown"
    picture = Image.open(io.BytesIO(base64.b64decode(shot.url.split(",", 1)[1])))
    assert picture.size == (100, 150)
    whole = image_data_url(png, 0, 0)  # original bytes, untouched
    assert base64.b64decode(whole.url.split(",", 1)[1]) == png and whole.note == ""
    for junk in (b"#!/bin/sh\necho hi\n", png[:60]):
        for width, height in ((640, 3000), (0, 0)):
            bad = image_data_url(junk, width, height)
            assert bad.url is None and bad.note.startswith("no screenshot")
    monkeypatch.setitem(sys.modules, "PIL", None)  # without Pillow: original PNGs only
    assert image_data_url(png, 100, 300) == whole
    assert image_data_url(b"GIF89a....", 100, 300).note == "no screenshot: the file is not a PNG"


def test_bad_field_via_cli_exits_nonzero(tmp_path):
    src, out = tmp_path / "bad.jsonl", tmp_path / "page.html"
    good = {"task": {"problem_description": "p", "ground_truth": "<html></html>"},
            "dialogue_history": [{"role": "user", "content": "p"}], "answer": ""}
    bad = dict(good, dialogue_history=[{"role": "user", "content": "p"},
                                       {"role": "assistant", "content": "x", "screenshot": 5}])
    src.write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n", encoding="utf-8")
    proc = subprocess.run([sys.executable, SCRIPT, str(src), str(out)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert f"{src}, line 2: field 'dialogue_history[1].screenshot'" in proc.stderr
    assert not out.exists()
    with pytest.raises(RecordError):
        visualize_design(DesignViewerOptions(input_path=str(src), output_path=str(out)))


def _png(path, colour):
    """A screenshot stand-in drawn with Pillow (no browser needed)."""
    from PIL import Image

    os.makedirs(os.path.dirname(path), exist_ok=True)
    Image.new("RGB", (200, 120), colour).save(path)
    return path


def test_pages_in_content_and_original_rows(tmp_path, capsys):
    """Turns whose ``content`` keeps the agent's whole page (the original's rows and ours): the
    text shows the placeholder where the page was, the screenshot (found by the page's
    content name in the run's screenshot folder) sits under it, and the source is escaped and
    folded. Original rows: ``answer`` is the final screenshot's path, or "No answer"."""
    pytest.importorskip("PIL")
    from sweet_rl.environments.html_snippet import PAGE_PLACEHOLDER

    folder = tmp_path / "run"
    jsonl = str(folder / "temp_test_html.jsonl")
    shots = default_screenshot_dir(jsonl)
    _png(screenshot_path(shots, HOSTILE_PAGE, "page"), "red")  # found by content name
    _png(screenshot_path(shots, REFERENCE, "reference"), "white")
    _png(str(folder / "final_0.png"), "blue")  # the original's answer: a screenshot path
    message = f"Here it is:\n{HOSTILE_PAGE}\nDoes it look right? {HOSTILE_REPLY}"
    rows = [
        {
            "task": {"problem_description": "Shop", "ground_truth": REFERENCE},
            "dialogue_history": [
                {"role": "user", "content": "Shop"},
                {
                    "role": "assistant",
                    "content": message,
                    "input": "PROMPT",
                    "output": f"OUTPUT:{message}",
                },
                {"role": "user", "content": "More red."},
            ],
            "answer": "final_0.png",
            "reward": 0.5,
        },
        {
            "task": {"problem_description": "Blog", "ground_truth": REFERENCE},
            "dialogue_history": [
                {"role": "user", "content": "Blog"},
                {"role": "assistant", "content": "What colours?"},
            ],
            "answer": "No answer",
            "reward": 0.1,
        },
    ]
    with open(jsonl, "w", encoding="utf-8") as handle:
        handle.writelines(json.dumps(r) + "\n" for r in rows)
    visualize_design(DesignViewerOptions(
        input_path=jsonl))  # one argument: the page goes beside the input
    out = folder / "temp_test_html.html"
    text = out.read_text(encoding="utf-8")
    line = capsys.readouterr().out.strip()
    # shown: the turn's page, the final page, the reference twice; nothing missing
    assert line == (f"visualized 2 design dialogues (2 evaluated, mean similarity 0.300; "
                    f"4 screenshots shown, 0 missing) -> {out}")
    # nothing from the file is markup: no live script, no live tag from the reply
    assert "<script>window.__pwned" not in text and "<b>bold</b>" not in text
    assert "<h1>hi</h1>" not in text and "&lt;h1&gt;hi&lt;/h1&gt;" in text
    # the text of the turn, with the placeholder in place of the page
    import html as html_lib

    shown = html_lib.escape(f"Here it is:\n{PAGE_PLACEHOLDER}\nDoes it look right? {HOSTILE_REPLY}")
    assert f'<div class="text">{shown}</div>' in text
    turn = text.split(f'<div class="text">{shown}</div>', 1)[1].split('<div class="turn', 1)[0]
    assert turn.startswith(
        '<figure class="turn-page"><img alt="page shown at turn 1" src="data:image/'
    )
    assert f'<pre class="page-source">{html_lib.escape(HOSTILE_PAGE)}</pre>' in turn
    sections = text.split('<section class="dialogue"')[1:]
    assert 'data-status="evaluated"' in sections[0] and '<img alt="final page"' in sections[0]
    assert 'data-status="nopage"' in sections[1] and "the agent showed no page" in sections[1]
    assert '<span class="badge nopage">no final page</span>' in sections[1]


def test_a_folder_as_second_argument_is_refused(tmp_path):
    """The original design viewer's second argument was its screenshot scratch folder; here the
    second argument is the page, so a folder there is refused before anything is written."""
    src = tmp_path / "run.jsonl"
    src.write_text(
        json.dumps(
            {
                "task": {"problem_description": "p", "ground_truth": "<html></html>"},
                "dialogue_history": [],
                "answer": "No answer",
            }
        )
        + "\n"
    )
    scratch = tmp_path / "driver_cache"
    scratch.mkdir()
    proc = subprocess.run([sys.executable, SCRIPT, str(src), str(scratch)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert proc.stderr.strip() == (
        f"error: OUTPUT_PATH {scratch} is a folder: give the page's file "
        "name (a screenshot folder of the original's commands goes in --temp_path)"
    )
    assert os.listdir(scratch) == [] and sorted(os.listdir(tmp_path)) == [
        "driver_cache",
        "run.jsonl",
    ]
