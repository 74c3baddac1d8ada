"""Frontend dialogues through simulate, in lockstep and pipelined: the agent and the simulated
human are fake OpenAI-compatible servers replaying scripted replies, pages render in a real
Chromium, and what the simulator receives is compared with the message written out.

One test per rule the original's design environment and ours must state: the sentences around
the pictures (a template), which text is a page, a reference page that fails to render, and
the keys our rows add to the original's.
"""

from __future__ import annotations

import base64
import json
import re

import pytest

from sweet_rl.stages.simulate import simulate
from sweet_rl.stages.simulate_options import SimulateOptions
from sweet_rl.rendering.pool import DriverPool
from sweet_rl.rendering.screenshots import screenshot_path
from tests.conftest import REPO_ROOT
from tests.simulators.fake_openai_server import FakeOpenAIServer, Step, completion

pytestmark = pytest.mark.slow  # real Chromium (render_assets)

ROLLOUTS = ("lockstep", "pipelined")
REFERENCE = '<html><body style="margin:0;background:#0000ff"><h1>Bakery</h1></body></html>'
TASK = {"problem_description": "A blue page for my bakery.", "ground_truth": REFERENCE}
DRAFT = '<html><body style="margin:0;background:#ff0000"><p>draft</p></body></html>'
# The renderer stays busy longer than the pool's page-load timeout: a real failure.
STUCK = "<html><body><script>var t=Date.now();while(Date.now()-t<12000){}</script>x</body></html>"
BUNDLED_PROMPT = (REPO_ROOT / "sweet_rl/prompts/human_simulator_html_prompt.txt").read_text()
# The bundled captions (our words), as the simulator must receive them.
AGENT_PAGE = "The page the assistant showed you in its latest message:"
NO_PAGE = "The assistant did not show you a page in its latest message."
REFERENCE_PAGE = "The page you want (only you can see it):"


class Borrowed:
    """The module's browser pool lent to one simulate run (which closes what it opened)."""

    def __init__(self, pool):
        self.pool, self.size = pool, pool.size

    def render(self, html):
        return self.pool.render(html)

    def close(self):
        pass


@pytest.fixture(scope="module")
def pool(render_assets):
    with DriverPool(size=1, page_load_timeout=4, script_timeout=4, assets_dir=render_assets) as p:
        yield p


@pytest.fixture
def run(pool, tmp_path, monkeypatch):
    """``run(rollout, agent_replies, human_steps, task=TASK, **flags) -> (row, agent requests,
    simulator requests)``: simulate on one task; a test's runs share their screenshots
    (``tmp_path/shots``), so each page renders once per test."""
    monkeypatch.setattr("sweet_rl.rendering.pool.open_renderer",
                        lambda browser="chromium", size=None: (Borrowed(pool), "chromium (test)"))
    count = iter(range(100))

    def play(rollout, agent_replies, human_steps, task=TASK, **flags):
        number = next(count)
        tasks, out = tmp_path / f"tasks_{number}.jsonl", tmp_path / f"{rollout}_{number}.jsonl"
        tasks.write_text(json.dumps(task) + "\n")
        human_steps = [step if isinstance(step, Step) else Step(body=completion(step))
                       for step in human_steps] or [Step()]
        with FakeOpenAIServer([Step(body=completion(text)) for text in agent_replies]) as agent, \
                FakeOpenAIServer(human_steps) as human:
            simulate(SimulateOptions(
                task_type="html", input_path=str(tasks), output_path=str(out), rollout=rollout,
                agent_backend="openai", agent_model="fake", agent_base_url=agent.base_url,
                hostname=human.base_url, env_model="fake", screenshot_dir=str(tmp_path / "shots"),
                num_tasks=1, **flags))
        [row] = [json.loads(line) for line in out.read_text().splitlines()]
        return row, agent.requests, human.requests

    return play


def shot(tmp_path, html, kind="page"):
    return screenshot_path(str(tmp_path / "shots"), html, kind)


def picture(path):
    with open(path, "rb") as handle:
        data = base64.b64encode(handle.read()).decode("ascii")
    return {"type": "image_url", "image_url": {"url": "data:image/png;base64," + data}}


def text(words):
    return {"type": "text", "text": words}


def request(*parts):
    """The simulator's request: one user message, greedy, up to 4096 new tokens."""
    return {"messages": [{"role": "user", "content": list(parts)}], "model": "fake",
            "max_tokens": 4096, "temperature": 0}


def test_the_sentences_around_the_pictures_come_from_the_captions_file(run, tmp_path):
    agent = ["OUTPUT: A first draft:\n" + DRAFT, "OUTPUT: Which font do you like?",
             "OUTPUT: I WANT TO ANSWER: thanks"]
    captions = tmp_path / "captions.json"
    captions.write_text(json.dumps({"agent_page": "Draft from the designer:",
                                    "no_page": "No draft this time.",
                                    "reference_page": "What I have in mind:"}))
    prompt = tmp_path / "prompt.txt"
    prompt.write_text("Tell the designer what to change.\n")
    for rollout in ROLLOUTS:
        row, asked, heard = run(rollout, agent, ["Make it blue.", "A serif one."])
        draft, reference = picture(shot(tmp_path, DRAFT)), picture(shot(tmp_path, REFERENCE,
                                                                         "reference"))
        assert len(asked) == 3
        assert heard == [
            request(text(BUNDLED_PROMPT), text(AGENT_PAGE), draft, text(REFERENCE_PAGE),
                    reference),
            request(text(BUNDLED_PROMPT), text(NO_PAGE), text(REFERENCE_PAGE), reference)]
        assert [turn["content"] for turn in row["dialogue_history"][2::2]] == [
            "Make it blue.", "A serif one."]

        row, asked, heard = run(rollout, agent, ["Make it blue.", "A serif one."],
                                user_prompt_path=str(prompt), user_captions_path=str(captions))
        assert heard == [
            request(text("Tell the designer what to change.\n"),
                    text("Draft from the designer:"), draft, text("What I have in mind:"),
                    reference),
            request(text("Tell the designer what to change.\n"), text("No draft this time."),
                    text("What I have in mind:"), reference)]


def test_a_page_is_lower_case_html_unless_lenient_pages(run, tmp_path):
    upper = '<HTML><BODY style="margin:0;background:#00ff00">x</BODY></HTML>'
    agent = ["OUTPUT: Here it is:\n" + upper, "OUTPUT: I WANT TO ANSWER: the page above"]
    for rollout in ROLLOUTS:
        # The original's rule: no page, so the human is told there is none and the final
        # answer is "No answer".
        row, _, heard = run(rollout, agent, ["I see no page."])
        reference = picture(shot(tmp_path, REFERENCE, "reference"))
        assert heard == [request(text(BUNDLED_PROMPT), text(NO_PAGE), text(REFERENCE_PAGE),
                                 reference)]
        turn = row["dialogue_history"][1]
        assert turn["content"] == " Here it is:\n" + upper
        assert (turn["html"], turn["screenshot"]) == (None, None)
        assert row["answer"] == "No answer" and row["answer_screenshot"] is None

        row, _, heard = run(rollout, agent, ["Make it blue."], lenient_pages=True)
        assert heard == [request(text(BUNDLED_PROMPT), text(AGENT_PAGE),
                                 picture(shot(tmp_path, upper)), text(REFERENCE_PAGE),
                                 reference)]
        assert row["dialogue_history"][1]["html"] == upper and row["answer"] == upper


def test_a_reference_that_does_not_render_ends_the_dialogue_before_the_agent_speaks(run):
    task = dict(TASK, ground_truth=STUCK)
    rows = {}
    for rollout in ROLLOUTS:
        row, asked, heard = run(rollout, ["OUTPUT: never asked"], [], task=task)
        assert asked == [] and heard == []  # the original asked the agent once, in vain
        error = row.pop("error")
        assert re.match(r"reference page did not render: .*Timeout", error)
        assert row == {"task": task,
                       "dialogue_history": [{"role": "user",
                                             "content": task["problem_description"]}],
                       "answer": "No answer", "answer_screenshot": None,
                       "reference_screenshot": None}
        rows[rollout] = row
    assert rows["lockstep"] == rows["pipelined"]


# The keys of the original's rows (its row writer and its environment's dialogue history).
ORIGINAL_ROW = ["task", "dialogue_history", "answer"]
ORIGINAL_AGENT_TURN = ["role", "content", "input", "output"]
ORIGINAL_HUMAN_TURN = ["role", "content"]


def test_the_keys_a_frontend_row_adds_to_the_originals_are_named_in_the_docs(run, tmp_path):
    agent = ["OUTPUT: A first draft:\n" + DRAFT, "OUTPUT: Better?\n" + STUCK,
             "OUTPUT: I WANT TO ANSWER: done"]
    rows = {}
    for rollout in ROLLOUTS:
        row, asked, heard = run(rollout, agent, ["Make it blue.", Step(400)],
                                max_error_share=1.0)
        assert len(asked) == 3 and len(heard) == 2
        history = row["dialogue_history"]
        assert list(row) == ORIGINAL_ROW + ["answer_screenshot", "reference_screenshot",
                                            "simulator_errors"]
        assert [list(turn) for turn in history] == [
            ORIGINAL_HUMAN_TURN, ORIGINAL_AGENT_TURN + ["html", "screenshot"],
            ORIGINAL_HUMAN_TURN, ORIGINAL_AGENT_TURN + ["html", "screenshot", "render_error"],
            ORIGINAL_HUMAN_TURN, ORIGINAL_AGENT_TURN + ["html", "screenshot"]]
        # what each holds: the page and its screenshot (relative to the JSONL file), why a
        # page did not render, the reference's screenshot, the final page's (None: it failed)
        assert [(turn["html"], turn["screenshot"]) for turn in history[1::2]] == [
            (DRAFT, "shots/" + shot(tmp_path, DRAFT).rsplit("/", 1)[1]), (STUCK, None),
            (None, None)]
        assert "Timeout" in history[3]["render_error"]
        assert [turn["content"] for turn in history[2::2]] == ["Make it blue.", "No response."]
        assert row["simulator_errors"] == ["simulator: HTTP 400: scripted 400"]
        assert row["answer"] == STUCK and row["answer_screenshot"] is None
        assert row["reference_screenshot"] == \
            "shots/" + shot(tmp_path, REFERENCE, "reference").rsplit("/", 1)[1]
        rows[rollout] = row
    assert rows["lockstep"] == rows["pipelined"]
    # Every key the original's rows lack, "error" included (see the test above), is named in
    # docs/differences.md as the key itself.
    differences = (REPO_ROOT / "docs" / "differences.md").read_text()
    added = {"answer_screenshot", "reference_screenshot", "simulator_errors", "html",
             "screenshot", "render_error", "error"}
    assert [key for key in sorted(added) if f"`{key}`" not in differences] == []
