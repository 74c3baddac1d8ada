"""The dialogue visualizer: the page it writes, checked in real headless Chromium."""

import json
import os
import subprocess
import sys
import time

import pytest

from sweet_rl.records import RecordError
from visualizers.visualize_dialogue_histories import render_dialogues_html
from visualizers.visualize_dialogue_histories import ViewerOptions, visualize

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SCRIPT = os.path.join(REPO_ROOT, "visualizers", "visualize_dialogue_histories.py")
CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
HOSTILE = "def f():\n    return '<script>window.__pwned=1</script>'  # </pre> <b>bold</b>"


def _dialogue(problem, answer, reference, reward=None, **extra):
    record = {
        "task": {"problem_description": problem, "ground_truth": reference,
                 "test_cases": {"test1": "f() == 1"}},
        "dialogue_history": [
            {"role": "user", "content": problem},
            {"role": "assistant", "content": "Which input type?", "input": "PROMPT<x>",
             "output": "RAW OUTPUT: Which input type?"},
            {"role": "user", "content": "A list of ints."},
            {"role": "assistant", "content": answer, "input": "PROMPT 2", "output": answer},
        ],
        "answer": answer,
    }
    if reward is not None:
        record["reward"] = reward
    record.update(extra)
    return record


DIALOGUES = [
    _dialogue("Sum a list of numbers.", "def f(xs):\n    return sum(xs)",
              "def f(xs):\n    return sum(xs)  # REFERENCE-ONE", reward=1.0),
    _dialogue("Reverse a string.", "def f(s):\n    return s", "def f(s):\n    return s[::-1]",
              reward=0.25),
    _dialogue("Count vowels.", "def f(s):\n    return 0", "def f(s):\n    return 3",
              error="simulator timed out"),
    _dialogue("Escape <this> & that.", HOSTILE, "def f():\n    return 1", reward=0.0),
]


@pytest.fixture()
def page(tmp_path):
    src = tmp_path / "traj.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in DIALOGUES), encoding="utf-8")
    out = tmp_path / "out" / "page.html"
    visualize(ViewerOptions(input_path=str(src), output_path=str(out), title="Test <run>"))
    return out


@pytest.fixture()
def browser():
    if not (os.path.exists(CHROMIUM) and os.path.exists(CHROMEDRIVER)):
        pytest.skip(
            f"needs {CHROMIUM} and {CHROMEDRIVER} (apt-get install chromium chromium-driver)"
        )
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--disable-background-networking", "--window-size=1280,1000"):
        options.add_argument(arg)
    options.binary_location = CHROMIUM
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def test_writes_page_sidecar_and_summary(tmp_path, capsys):
    src = tmp_path / "traj.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in DIALOGUES), encoding="utf-8")
    page = tmp_path / "out" / "page.html"
    visualize(ViewerOptions(input_path=str(src), output_path=str(page), title="Test <run>"))
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>")
    assert "<script>window.__pwned" not in text
    assert "http://" not in text and "https://" not in text  # nothing fetched from the network
    sidecar = json.loads((page.parent / "page.html.config.json").read_text())
    arguments = sidecar["stages"]["visualize_dialogue_histories"]
    assert arguments["title"] == "Test <run>" and arguments["max_dialogues"] is None
    line = capsys.readouterr().out.strip()
    assert line == f"visualized 4 dialogues (1 successful, mean reward 0.417) -> {page}"
    assert not [n for n in os.listdir(page.parent) if n.startswith(".tmp-")]


@pytest.mark.slow  # real Chromium
def test_page_in_chromium(page, browser, tmp_path):
    from selenium.webdriver.common.by import By

    browser.get(page.as_uri())
    sections = browser.find_elements(By.CSS_SELECTOR, "section.dialogue")
    assert len(sections) == 4
    assert browser.title == "Test <run>"
    assert browser.find_element(By.ID, "count-total").text == "4"
    assert browser.find_element(By.ID, "count-successful").text == "1"
    assert browser.find_element(By.ID, "mean-reward").text == "0.417"

    # rewards, badges, reference code
    assert "reward: 1.000" in sections[0].text and "success" in sections[0].text
    assert "reward: 0.250" in sections[1].text
    assert "reward: not evaluated" in sections[2].text
    assert "simulator timed out" in sections[2].text
    assert [s.find_element(By.CSS_SELECTOR, ".badge").text for s in sections] == \
        ["success", "fail", "not evaluated", "fail"]
    assert "REFERENCE-ONE" in sections[0].find_element(By.CSS_SELECTOR, "pre.reference").text

    # hostile text shows as text and never runs
    answer = sections[3].find_element(By.CSS_SELECTOR, "pre.answer").text
    assert "<script>window.__pwned=1</script>" in answer and "</pre> <b>bold</b>" in answer
    assert browser.execute_script("return typeof window.__pwned") == "undefined"
    assert not sections[3].find_elements(By.CSS_SELECTOR, "pre.answer b")
    assert "Escape <this> & that." in sections[3].text

    # raw output folded away until its <details> is opened
    raw = sections[0].find_elements(By.CSS_SELECTOR, ".turn.assistant details pre")[1]
    assert not raw.is_displayed()
    raw.find_element(By.XPATH, "..").find_element(By.TAG_NAME, "summary").click()
    assert raw.is_displayed() and "RAW OUTPUT" in raw.text

    # every link to an anchor lands on an element that exists
    hrefs = [
        a.get_attribute("href") for a in browser.find_elements(By.CSS_SELECTOR, "a[href*='#']")
    ]
    assert len(hrefs) >= 4 + 2 * 3  # sidebar + previous/next
    for href in hrefs:
        assert browser.find_elements(By.ID, href.split("#", 1)[1]), href
    nexts = browser.find_elements(By.CSS_SELECTOR, "a[data-step='next']")
    assert [a.get_attribute("href").split("#")[1] for a in nexts] == \
        ["dialogue-1", "dialogue-2", "dialogue-3"]

    browser.save_screenshot(str(tmp_path / "all.png"))
    # filters
    browser.find_element(By.CSS_SELECTOR, "button[data-filter='success']").click()
    assert [s.is_displayed() for s in sections] == [True, False, False, False]
    assert browser.find_element(By.ID, "shown-count").text == "1"
    items = browser.find_elements(By.CSS_SELECTOR, "#dialogue-list li")
    assert [li.is_displayed() for li in items] == [True, False, False, False]
    browser.find_element(By.CSS_SELECTOR, "button[data-filter='failed']").click()
    assert [s.is_displayed() for s in sections] == [False, True, False, True]
    # with the filter on, "next" skips the hidden unevaluated dialogue
    sections[1].find_element(By.CSS_SELECTOR, "a[data-step='next']").click()
    assert browser.execute_script("return location.hash") == "#dialogue-3"
    browser.find_element(By.CSS_SELECTOR, "button[data-filter='unevaluated']").click()
    assert [s.is_displayed() for s in sections] == [False, False, True, False]
    browser.find_element(By.CSS_SELECTOR, "button[data-filter='all']").click()
    assert all(s.is_displayed() for s in sections)
    assert browser.find_element(By.ID, "shown-count").text == "4"
    if os.environ.get("SWEET_RL_SCREENSHOT"):
        browser.save_screenshot(os.environ["SWEET_RL_SCREENSHOT"])


def test_max_dialogues_and_default_title(tmp_path, capsys):
    src = tmp_path / "traj.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in DIALOGUES), encoding="utf-8")
    out = tmp_path / "page.html"
    visualize(ViewerOptions(input_path=str(src), output_path=str(out), max_dialogues=2))
    text = out.read_text(encoding="utf-8")
    assert text.count('<section class="dialogue"') == 2
    assert "<title>Dialogues: traj.jsonl</title>" in text
    assert "visualized 2 dialogues (1 successful, mean reward 0.625)" in capsys.readouterr().out


def test_render_empty_list():
    text = render_dialogues_html([], "empty")
    assert "No dialogues in this file." in text and 'id="mean-reward">n/a<' in text


def test_bad_json_names_file_and_line(tmp_path):
    src = tmp_path / "bad.jsonl"
    src.write_text(json.dumps(DIALOGUES[0]) + "\n{not json\n", encoding="utf-8")
    out = tmp_path / "page.html"
    with pytest.raises(RecordError) as err:
        visualize(ViewerOptions(input_path=str(src), output_path=str(out)))
    assert str(src) in str(err.value) and "line 2" in str(err.value)
    assert not out.exists() and not (tmp_path / "page.html.config.json").exists()


def test_bad_field_via_cli_exits_nonzero(tmp_path):
    src = tmp_path / "bad.jsonl"
    broken = dict(DIALOGUES[0], task={"problem_description": "x"})  # no ground_truth
    src.write_text(json.dumps(DIALOGUES[0]) + "\n" + json.dumps(broken) + "\n", encoding="utf-8")
    out = tmp_path / "page.html"
    proc = subprocess.run([sys.executable, SCRIPT, str(src), str(out)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0
    assert (
        str(src) in proc.stderr and "line 2" in proc.stderr and "task.ground_truth" in proc.stderr
    )
    assert not out.exists()


def test_cli_runs_from_repo_root(tmp_path):
    src = tmp_path / "traj.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in DIALOGUES), encoding="utf-8")
    out = tmp_path / "page.html"
    proc = subprocess.run([sys.executable, "visualizers/visualize_dialogue_histories.py", str(src),
                           str(out), "--title", "cli run", "--max_dialogues", "3"],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "visualized 3 dialogues (1 successful, mean reward 0.625)" in proc.stdout
    assert "<title>cli run</title>" in out.read_text(encoding="utf-8")


def test_help_is_quick():
    start = time.monotonic()
    proc = subprocess.run([sys.executable, SCRIPT, "--help"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60, env=dict(os.environ, PAGER="cat"))
    elapsed = time.monotonic() - start
    assert proc.returncode == 0
    assert "max_dialogues" in proc.stdout + proc.stderr
    assert elapsed < 10, f"--help took {elapsed:.1f}s"


def test_help_imports_nothing_heavy():
    code = (
        "import sys\n"
        "sys.path.insert(0, '.')\n"
        "import visualizers.visualize_dialogue_histories\n"
        "heavy = [m for m in ('torch', 'transformers', 'selenium', 'vllm') if m in sys.modules]\n"
        "print('HEAVY', heavy)"
    )
    proc = subprocess.run([sys.executable, "-c", code], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60)
    assert "HEAVY []" in proc.stdout, proc.stdout + proc.stderr


def test_one_argument_puts_the_page_beside_the_input(tmp_path):
    """The original README's ``visualize_dialogue_histories.py FILE``: the page is FILE with
    .html instead of .jsonl; ``--saved_path`` (the original's parameter name) works too."""
    src = tmp_path / "temp_test.jsonl"
    src.write_text("".join(json.dumps(d) + "\n" for d in DIALOGUES), encoding="utf-8")
    proc = subprocess.run([sys.executable, SCRIPT, str(src)], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    beside = tmp_path / "temp_test.html"
    assert (
        proc.stdout.strip()
        == f"visualized 4 dialogues (1 successful, mean reward 0.417) -> {beside}"
    )
    assert beside.read_text(encoding="utf-8").count('<section class="dialogue"') == 4
    beside.unlink()
    proc = subprocess.run([sys.executable, SCRIPT, "--saved_path", str(src)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert beside.exists()
    proc = subprocess.run(
        [sys.executable, SCRIPT, str(src), "--saved_path", str(tmp_path / "other.jsonl")],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "--saved_path" in proc.stderr and "disagree" in proc.stderr


LEAK_ROWS = [
    _dialogue("Sum a list of numbers.", "def f(xs):\n    return sum(xs)",
              "def f(xs):\n    return sum(xs)", reward=1.0, leaked_replies=1, leak_turns=[2]),
    _dialogue("Reverse a string.", "def f(s):\n    return s", "def f(s):\n    return s[::-1]",
              reward=0.0, leaked_replies=0, leak_turns=[]),
    DIALOGUES[1],  # an older row, no leak keys
    _dialogue("Count vowels.", "def f(s):\n    return 0", "def f(s):\n    return 3",
              leaked_replies="many", leak_turns=[True, 99, "2"]),  # odd values: ignored
]


def test_leaking_replies_are_tagged_and_the_rate_is_in_the_header():
    text = render_dialogues_html(LEAK_ROWS, "leaks")
    assert text.count('class="turn user leak"') == 1
    assert text.count('<span class="leak-tag">leaks the reference</span>') == 1
    tagged = text.split('class="turn user leak"', 1)[1]
    assert tagged.split("</div></div>", 1)[0].endswith('<div class="text">A list of ints.')
    assert text.index('class="turn user leak"') < text.index('id="dialogue-1"')
    assert text.count('<span class="leak-count">1 leaking reply</span>') == 1
    # two rows were checked, one reply each, one of them leaking
    assert '<span id="leak-rate">leak rate 0.500 (1 of 2 replies)</span>' in text


def test_rows_without_leak_information_show_none():
    text = render_dialogues_html(DIALOGUES + [LEAK_ROWS[3]], "no leaks")
    assert "leak-rate" not in text.split("</header>")[0]
    assert 'class="turn user leak"' not in text and 'class="leak-count"' not in text
    assert 'class="leak-tag"' not in text


@pytest.mark.slow  # real Chromium
def test_leak_tag_in_chromium(browser, tmp_path):
    from selenium.webdriver.common.by import By

    src, out = tmp_path / "leaks.jsonl", tmp_path / "leaks.html"
    src.write_text("".join(json.dumps(d) + "\n" for d in LEAK_ROWS), encoding="utf-8")
    visualize(ViewerOptions(input_path=str(src), output_path=str(out)))
    browser.get(out.as_uri())
    assert browser.find_element(By.ID, "leak-rate").text == "leak rate 0.500 (1 of 2 replies)"
    [turn] = browser.find_elements(By.CSS_SELECTOR, ".turn.leak")
    tag = turn.find_element(By.CSS_SELECTOR, ".leak-tag")
    assert tag.is_displayed() and tag.text == "leaks the reference"
    assert turn.value_of_css_property("border-top-color") == "rgba(207, 34, 46, 1)"
    assert "A list of ints." in turn.text
    assert turn.find_element(By.XPATH, "./ancestor::section").get_attribute("id") == "dialogue-0"
