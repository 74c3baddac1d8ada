"""The frontend environment against a real headless Chromium, with a scripted agent and a
recording simulator (the real models are exercised in tests/cli/test_simulate_html.py)."""

from __future__ import annotations

import base64
import json
import os
from collections import Counter
from typing import List

import pytest

from sweet_rl.agents.base import Agent, AgentOutput
from sweet_rl.data.tasks import load_tasks
from sweet_rl.environments import DesignEnv, make_env
from sweet_rl.rendering import assets as page_assets
from sweet_rl.rendering.browser import VIEWPORT_WIDTH
from sweet_rl.rendering.pool import DriverPool
from sweet_rl.prompts import load_prompt
from sweet_rl.prompts.captions import load_captions
from sweet_rl.records import Task, Trajectory
from sweet_rl.rollouts.lockstep import run_dialogues
from sweet_rl.rendering.screenshots import resolve, screenshot_path
from sweet_rl.simulators.base import Simulator, SimulatorReply

pytestmark = pytest.mark.slow  # real Chromium (render_assets)

CDN = "https://cdn.jsdelivr.net/npm/tailwindcss@2.2.19/dist/tailwind.min.css"
RED_PAGE = (f'<html lang="en"><link href="{CDN}" rel="stylesheet"><body style="margin:0">'
            '<div class="bg-red-500" style="height:300px"></div></body></html>')
CAPTIONS = load_captions(None)  # the bundled sentences around the pictures
RED_500, YELLOW_800 = (0xEF, 0x44, 0x44), (0x92, 0x40, 0x0E)  # Tailwind 2.2.19 colours
# The main thread stays busy longer than the fast pool's page-load timeout: a real failure.
SLOW_PAGE = (
    "<html><body><script>var t=Date.now();while(Date.now()-t<8000){}</script>x</body></html>"
)


class ScriptedAgent(Agent):
    """Answers turn t of every dialogue with ``script[t]``."""

    def __init__(self, script: List[str]):
        self.script, self.calls = script, 0

    def generate(self, conversations, seeds=None, keys=None):
        self.calls += 1
        return [AgentOutput(prompt=f"PROMPT{sum(m['role'] == 'assistant' for m in c)}",
                            output=self.script[sum(m["role"] == "assistant" for m in c)])
                for c in conversations]


class RecordingSimulator(Simulator):
    def __init__(self, reply="y" * 1500):
        self.reply, self.seen = reply, []

    def reply_batch(self, conversations, keys=None):
        self.seen.extend(conversations)
        return [SimulatorReply(text=self.reply) for _ in conversations]


class CountingRenderer:
    """The real pool, counting what it is asked to render."""

    def __init__(self, pool):
        self.pool, self.size, self.pages = pool, pool.size, []

    def render(self, html):
        self.pages.append(html)
        return self.pool.render(html)


@pytest.fixture(scope="module")
def pool(render_assets):
    with DriverPool(size=2, assets_dir=render_assets) as p:
        yield p


@pytest.fixture(scope="module")
def fast_pool(render_assets):
    with DriverPool(size=1, assets_dir=render_assets, page_load_timeout=2, script_timeout=2) as p:
        yield p


def bakery() -> Task:
    return load_tasks(None, 1, task_type="html")[0]  # header in Tailwind's yellow-800


def make(task, renderer, folder, max_steps=10, **kwargs):
    return make_env("html", task, load_prompt(None, "agent", "html"),
                    load_prompt(None, "user", "html"), max_steps=max_steps, renderer=renderer,
                    screenshot_dir=str(folder / "run_screenshots"),
                    output_path=str(folder / "run.jsonl"), **kwargs)


def pixel(png: bytes, x: int, y: int):
    _, _, channels, rows = page_assets.decode_png(png)
    return tuple(rows[y][x * channels: x * channels + 3])


def close_to(got, want, tolerance=3):
    return max(abs(a - b) for a, b in zip(got, want)) <= tolerance


def decoded(part) -> bytes:
    url = part["image_url"]["url"]
    assert url.startswith("data:image/png;base64,")
    return base64.b64decode(url.split(",", 1)[1])


def test_pages_are_rendered_shown_to_the_simulator_and_answered(pool, tmp_path):
    task = bakery()
    env = make(task, pool, tmp_path)
    assert isinstance(env, DesignEnv) and env.reply_chars == 1000
    first = ("draft <html><body>not shown</body></html> OUTPUT: Here is a draft:\n"
             f"{RED_PAGE}\nDoes it look right?")
    script = [first, "OUTPUT: Which colour should the header have?",
              "OUTPUT: I WANT TO ANSWER: thanks, the page above is my answer"]
    simulator = RecordingSimulator()
    [traj] = run_dialogues([env], ScriptedAgent(script), simulator)

    # The page is stored under its content name; the turn's content keeps it, as the
    # original's did (the text after OUTPUT:, not stripped).
    page_png = screenshot_path(str(tmp_path / "run_screenshots"), RED_PAGE)
    ref_png = screenshot_path(str(tmp_path / "run_screenshots"), task.ground_truth, "reference")
    assert os.path.isfile(page_png) and os.path.isfile(ref_png)
    turn = traj.dialogue_history[1]
    assert turn.content == f" Here is a draft:\n{RED_PAGE}\nDoes it look right?"
    assert turn.output == first and turn.input == "PROMPT0"
    assert turn.extra == {
        "html": RED_PAGE,
        "screenshot": "run_screenshots/" + os.path.basename(page_png),
    }
    assert traj.dialogue_history[3].extra == {"html": None, "screenshot": None}
    # Replies are cut to 1000 characters.
    assert [len(t.content) for t in traj.dialogue_history[2::2]] == [1000, 1000]

    # Turn 1: one user message (no system message): the prompt as written, the agent's page,
    # the reference page. As in the original, the human sees no conversation text.
    assert len(simulator.seen) == 2
    [message] = simulator.seen[0]
    assert message["role"] == "user"
    parts = message["content"]
    assert [p["type"] for p in parts] == ["text", "text", "image_url", "text", "image_url"]
    prompt = parts[0]["text"]
    assert prompt == load_prompt(None, "user", "html")
    assert task.problem_description not in prompt and "Does it look right" not in prompt
    assert (parts[1]["text"], parts[3]["text"]) == (CAPTIONS.agent_page, CAPTIONS.reference_page)
    agent_image, reference_image = decoded(parts[2]), decoded(parts[4])
    assert agent_image == open(page_png, "rb").read()
    assert reference_image == open(ref_png, "rb").read()
    assert page_assets.png_size(agent_image)[0] == VIEWPORT_WIDTH
    assert close_to(pixel(agent_image, 20, 20), RED_500)
    assert close_to(pixel(reference_image, VIEWPORT_WIDTH - 4, 6), YELLOW_800)
    # Turn 2 showed no page: a note instead of the agent's image, the reference still there.
    parts = simulator.seen[1][0]["content"]
    assert [p["type"] for p in parts] == ["text", "text", "text", "image_url"]
    assert parts[1]["text"] == CAPTIONS.no_page and decoded(parts[3]) == reference_image

    # The answer is the last page written, although the final message holds none.
    assert traj.answer == RED_PAGE
    assert resolve(traj.extra["answer_screenshot"], str(tmp_path / "run.jsonl")) == page_png
    assert resolve(traj.extra["reference_screenshot"], str(tmp_path / "run.jsonl")) == ref_png
    row = traj.to_dict()
    assert list(row) == ["task", "dialogue_history", "answer", "answer_screenshot",
                         "reference_screenshot"]
    assert list(row["dialogue_history"][1]) == ["role", "content", "input", "output", "html",
                                                "screenshot"]
    again = Trajectory.from_dict(json.loads(json.dumps(row)))
    assert again.to_dict() == row


def test_reference_rendered_once_for_environments_sharing_the_folder(pool, tmp_path):
    task = bakery()
    renderer = CountingRenderer(pool)
    envs = [make(task, renderer, tmp_path, max_steps=1) for _ in range(2)]
    assert envs[0].record_workers == 2  # the batch renders through both browsers at once
    script = [f"OUTPUT: I WANT TO ANSWER: {RED_PAGE}"]
    trajs = run_dialogues(envs, ScriptedAgent(script), RecordingSimulator())
    assert Counter(renderer.pages) == Counter({task.ground_truth: 1, RED_PAGE: 1})
    assert all(t.answer == RED_PAGE and "error" not in t.extra for t in trajs)
    # A later environment (a resumed run) finds both screenshots on disk.
    later = make(task, renderer, tmp_path, max_steps=1)
    [traj] = run_dialogues([later], ScriptedAgent(script), RecordingSimulator())
    assert len(renderer.pages) == 2 and traj.to_dict() == trajs[0].to_dict()


def test_a_page_that_fails_to_render_is_not_shown(pool, fast_pool, tmp_path):
    task = bakery()
    make(task, pool, tmp_path).prepare()  # the reference is on disk before the fast pool runs
    green = "<html><body style='margin:0;background:#00ff00'><p>ok</p></body></html>"
    script = [f"OUTPUT: first {green}", f"OUTPUT: second {SLOW_PAGE}", "OUTPUT: I WANT TO ANSWER:"]
    simulator = RecordingSimulator(reply="fine")
    [traj] = run_dialogues([make(task, fast_pool, tmp_path)], ScriptedAgent(script), simulator)
    failed = traj.dialogue_history[3]
    assert failed.content == f" second {SLOW_PAGE}"
    assert failed.extra["html"] == SLOW_PAGE and failed.extra["screenshot"] is None
    assert "imeout" in failed.extra["render_error"]
    assert simulator.seen[1][0]["content"][1]["text"] == CAPTIONS.no_page
    # As in the original, the answer is the last page written even though it did not render
    # (the original stored no screenshot path then, which scores as a black image).
    assert traj.answer == SLOW_PAGE and traj.extra["answer_screenshot"] is None


def test_page_placeholder_hides_pages_from_later_prompts(pool, tmp_path):
    task = bakery()
    env = make(task, pool, tmp_path, page_placeholder=True)
    script = [f"OUTPUT: Here:\n{RED_PAGE}\nRight?", "OUTPUT: I WANT TO ANSWER: done"]
    agent = ScriptedAgent(script)
    [traj] = run_dialogues([env], agent, RecordingSimulator(reply="ok"))
    assert traj.dialogue_history[1].content == " Here:\n[SEE RENDERED HTML]\nRight?"
    assert traj.dialogue_history[1].extra["html"] == RED_PAGE and traj.answer == RED_PAGE


def test_a_dialogue_without_any_page_has_no_answer(pool, tmp_path):
    env = make(bakery(), pool, tmp_path, max_steps=2)
    [traj] = run_dialogues([env], ScriptedAgent(["OUTPUT: a question?", "OUTPUT: another?"]),
                           RecordingSimulator(reply="ok"))
    assert traj.answer == "No answer" and traj.extra["answer_screenshot"] is None


def test_a_reference_that_fails_to_render_ends_the_dialogue(fast_pool, tmp_path):
    task = Task(problem_description="A page that never finishes loading.", ground_truth=SLOW_PAGE)
    renderer = CountingRenderer(fast_pool)
    agent, simulator = ScriptedAgent(["OUTPUT: hello"]), RecordingSimulator()
    trajs = run_dialogues([make(task, renderer, tmp_path), make(task, renderer, tmp_path)],
                          agent, simulator)
    for traj in trajs:
        assert traj.extra["error"].startswith("reference page did not render: ")
        assert "imeout" in traj.extra["error"]
        assert traj.answer == "No answer" and traj.extra["reference_screenshot"] is None
        assert len(traj.dialogue_history) == 1  # the request only
        assert Trajectory.from_dict(json.loads(json.dumps(traj.to_dict()))).extra == traj.extra
    assert agent.calls == 0 and simulator.seen == []
    assert renderer.pages == [SLOW_PAGE]  # the failure is remembered for the second rollout


def test_bundled_frontend_samples_are_colbench_shaped_and_render(pool):
    tasks = load_tasks(None, task_type="html")
    assert len(tasks) == 3 and load_tasks(None)[0].test_cases  # backend default unchanged
    for task, result in zip(tasks, pool.render_many([t.ground_truth for t in tasks])):
        assert task.ground_truth.startswith("<html>") and task.ground_truth.endswith("</html>")
        assert CDN in task.ground_truth and "https://picsum.photos/id/48/" in task.ground_truth
        assert result.ok, result.error
    with pytest.raises(ValueError, match="no bundled sample tasks for task_type 'css'"):
        load_tasks(None, task_type="css")
