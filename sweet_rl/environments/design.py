"""Frontend design: the human wants a web page; the agent shows drafts, the human compares.

Each agent turn may hold one page (see :mod:`sweet_rl.environments.html_snippet`). It is
rendered to a screenshot; the simulated human — a vision-language model — sees the screenshot
of the agent's latest page next to the screenshot of the reference page (its hidden
information is that *image*, never the HTML) and describes the differences. Replies are cut to
1000 characters. The answer is the HTML of the last page the human was shown, as in the
original, whose answer was the last rendered page: a final message without a page keeps the
earlier one, and a page that failed to render was never shown.

Rendering is the slow part, so the environment exposes what :mod:`sweet_rl.rollout` needs to
do it for a whole batch at once: ``prepare()`` renders the reference (once per task: the
screenshot folder is the cache), and ``record_workers`` says how many environments may record
turns concurrently (the renderer pool's size).
"""

from __future__ import annotations

from typing import Dict, List, Optional

from sweet_rl.environments.base import CollaborationEnv
from sweet_rl.environments.html_snippet import split_page
from sweet_rl.environments.page_shots import read_png, shoot
from sweet_rl.environments.protocol import MAX_TURNS, ParsedTurn
from sweet_rl.prompts import fill_template
from sweet_rl.records import Task, Trajectory
from sweet_rl.screenshots import to_stored
from sweet_rl.simulators.base import Conversation
from sweet_rl.simulators.images import image_part, text_part

DESIGN_REPLY_CHARS = 1000

# Text parts that introduce the images (the template itself stays plain text).
AGENT_PAGE_INTRO = "The page the assistant showed you in its latest message:"
NO_PAGE_NOTE = "The assistant did not show you a page in its latest message."
REFERENCE_INTRO = "The page you want (only you can see it):"
# What ``{hidden_information}`` becomes in a simulator template: the reference is an image.
HIDDEN_AS_IMAGE = "[the page you want is shown as an image at the end of this message]"


class DesignEnv(CollaborationEnv):
    """``renderer``: ``render(html) -> RenderResult`` (a thread-safe ``DriverPool``).

    ``screenshot_dir`` holds every PNG; ``output_path`` is the trajectory file the stored
    screenshot paths are relative to (absolute paths when None). ``max_image_side`` shrinks
    images sent to the simulator (see :mod:`sweet_rl.simulators.images`).
    """

    reply_chars = DESIGN_REPLY_CHARS

    def __init__(self, task: Task, agent_prompt: str, user_prompt: str,
                 max_steps: int = MAX_TURNS, reply_chars: Optional[int] = None, *,
                 renderer, screenshot_dir: str, output_path: Optional[str] = None,
                 max_image_side: Optional[int] = None):
        self.renderer = renderer
        self.screenshot_dir = screenshot_dir
        self.output_path = output_path
        self.max_image_side = max_image_side
        self.record_workers = max(1, int(getattr(renderer, "size", 1) or 1))
        self.reference_path: Optional[str] = None
        self.reference_error: Optional[str] = None
        self.prepared = False
        super().__init__(task, agent_prompt, user_prompt, max_steps=max_steps,
                         reply_chars=reply_chars)

    def reset(self):
        history = super().reset()
        self.shown_html: Optional[str] = None  # the last page the human saw
        self.shown_path: Optional[str] = None
        self.latest_path: Optional[str] = None  # this turn's screenshot, None if no page
        if self.reference_error is not None:
            self._fail_reference()
        return history

    # -- rendering -----------------------------------------------------------------------
    def prepare(self) -> None:
        """Render the reference page (or find its screenshot); a failure ends the dialogue."""
        if self.prepared:
            return
        self.prepared = True
        shot = shoot(self.renderer, self.task.ground_truth, self.screenshot_dir, "reference")
        self.reference_path = shot.path
        if shot.path is None:
            self.reference_error = shot.error
            self._fail_reference()

    def _fail_reference(self) -> None:
        self.error = f"reference page did not render: {self.reference_error}"
        self.done = True

    def record_agent_turn(self, prompt: str, raw_output: str) -> bool:
        if not self.prepared:
            self.prepare()
            if self.done:  # nothing to compare with: the turn is dropped
                return True
        return super().record_agent_turn(prompt, raw_output)

    def on_agent_turn(self, parsed: ParsedTurn) -> None:
        turn = self.history[-1]
        turn.content, html = split_page(parsed.message)
        self.latest_path = None
        turn.extra.update(html=html, screenshot=None)
        if html is None:
            return
        shot = shoot(self.renderer, html, self.screenshot_dir, "page")
        if shot.path is None:
            turn.extra["render_error"] = shot.error
            return
        self.latest_path = self.shown_path = shot.path
        self.shown_html = html
        turn.extra["screenshot"] = self._stored(shot.path)

    def on_final_turn(self, parsed: ParsedTurn) -> None:
        self.answer = self.shown_html or ""

    def _stored(self, path: Optional[str]) -> Optional[str]:
        if path is None or self.output_path is None:
            return path
        return to_stored(path, self.output_path)

    # -- simulator side ------------------------------------------------------------------
    def simulator_messages(self) -> Conversation:
        """One user message: the filled template, the agent's page (or a note that there is
        none), then the reference page, images as PNG data URLs."""
        if self.reference_path is None:
            raise RuntimeError("the reference page is not rendered; call prepare() first")
        values = self.prompt_values()
        values["hidden_information"] = HIDDEN_AS_IMAGE
        parts: List[Dict[str, object]] = [text_part(fill_template(self.user_prompt, values))]
        if self.latest_path is not None:
            parts += [text_part(AGENT_PAGE_INTRO),
                      image_part(read_png(self.latest_path), self.max_image_side)]
        else:
            parts.append(text_part(NO_PAGE_NOTE))
        parts += [text_part(REFERENCE_INTRO),
                  image_part(read_png(self.reference_path), self.max_image_side)]
        return [{"role": "user", "content": parts}]

    # -- result --------------------------------------------------------------------------
    def trajectory(self) -> Trajectory:
        traj = super().trajectory()
        answer_path = self.shown_path if self.answer else None
        traj.extra = {"answer_screenshot": self._stored(answer_path),
                      "reference_screenshot": self._stored(self.reference_path),
                      **traj.extra}
        return traj
