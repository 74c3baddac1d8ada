"""Frontend design: the human wants a web page; the agent shows drafts, the human compares.

Each agent turn may hold one page (see :mod:`sweet_rl.environments.html_snippet`). It is
rendered to a screenshot; the simulated human — a vision-language model — sees the screenshot
of the agent's page of this turn next to the screenshot of the reference page (its hidden
information is that *image*, never the HTML) and describes the differences. Replies are cut to
1000 characters. As in the original:

* the simulated human gets one user message: the simulator prompt as written (the original
  fills in nothing; our bundled prompt has no placeholders, and a custom one may use
  ``{problem_description}`` and ``{dialogue_history}``), then the agent's page (or a note that
  this turn shows none), then the reference page — it does not see the conversation;
* a page is found by the original's case-sensitive rule (``lenient_pages=True``: the lenient
  one, see :mod:`sweet_rl.environments.html_snippet`);
* the turn's ``content`` keeps the page's HTML, so the agent sees its own earlier pages in
  later prompts (``page_placeholder=True`` replaces each by ``[SEE RENDERED HTML]`` instead);
* the answer is the last page the agent wrote (here its HTML; the original stored the path of
  its screenshot, which failed, and so scored as black, when the page did not render), or
  ``"No answer"`` when it never showed one.

Where it differs on purpose (docs/differences.md): the sentences that introduce the two pages,
and the note, are a template (``captions``, :mod:`sweet_rl.prompts.captions`), ours by
default; and a reference page that does not render ends the dialogue before the agent is asked
(the original asked the agent once and dropped its reply), with the reason in ``error``.

Rendering is the slow part, so the environment exposes what
:mod:`sweet_rl.rollouts.lockstep` needs to do it for a whole batch at once: ``prepare()`` renders
the reference (once per task: the screenshot folder is the cache), and ``record_workers`` says how
many environments may record turns concurrently (the renderer pool's size).
"""

from __future__ import annotations

from typing import Dict, List, Optional

from sweet_rl.models.chat_images import image_part, text_part
from sweet_rl.environments.base import CollaborationEnv, simulator_transcript
from sweet_rl.environments.html_snippet import split_page
from sweet_rl.rendering.page_shots import read_png, shoot
from sweet_rl.rendering.pictures import ANSWER_KEY, REFERENCE_KEY
from sweet_rl.environments.protocol import MAX_TURNS, NO_ANSWER, ParsedTurn
from sweet_rl.prompts import fill_template
from sweet_rl.prompts.captions import PageCaptions, load_captions
from sweet_rl.records import Task, Trajectory
from sweet_rl.rendering.screenshots import to_stored
from sweet_rl.types import ChatMessages

DESIGN_REPLY_CHARS = 1000

# What ``{hidden_information}`` becomes in a simulator template: the reference is an image.
HIDDEN_AS_IMAGE = "[the page you want is shown as an image at the end of this message]"


class DesignEnv(CollaborationEnv):
    """``renderer``: ``render(html) -> RenderResult`` (a thread-safe ``DriverPool``).

    ``screenshot_dir`` holds every PNG; ``output_path`` is the trajectory file the stored
    screenshot paths are relative to (absolute paths when None). ``max_image_side`` shrinks
    images sent to the simulator (see :mod:`sweet_rl.models.chat_images`).
    ``page_placeholder`` replaces each page in the turn's content by ``[SEE RENDERED HTML]``.
    ``captions``: the sentences around the pictures (default: the bundled file's);
    ``lenient_pages``: find pages by the lenient rule instead of the original's.
    """

    reply_chars = DESIGN_REPLY_CHARS

    def __init__(self, task: Task, agent_prompt: str, user_prompt: str,
                 max_steps: int = MAX_TURNS, reply_chars: Optional[int] = None, *,
                 renderer, screenshot_dir: str, output_path: Optional[str] = None,
                 max_image_side: Optional[int] = None, page_placeholder: bool = False,
                 captions: Optional[PageCaptions] = None, lenient_pages: bool = False,
                 **kwargs):
        self.renderer = renderer
        self.screenshot_dir = screenshot_dir
        self.output_path = output_path
        self.max_image_side = max_image_side
        self.page_placeholder = page_placeholder
        self.captions = captions or load_captions(None)
        self.lenient_pages = lenient_pages
        self.record_workers = max(1, int(getattr(renderer, "size", 1) or 1))
        self.reference_path: Optional[str] = None
        self.reference_error: Optional[str] = None
        self.prepared = False
        super().__init__(task, agent_prompt, user_prompt, max_steps=max_steps,
                         reply_chars=reply_chars, **kwargs)

    def reset(self):
        history = super().reset()
        self.answer_html: Optional[str] = None  # the last page the agent wrote
        self.answer_path: Optional[str] = None  # its screenshot, None if it did not render
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

    def record_agent_turn(self, prompt: str, raw_output: str, extra=None) -> bool:
        if not self.prepared:
            self.prepare()
            if self.done:  # nothing to compare with: the turn is dropped (the rollouts do
                return True  # not get here: they call prepare() before asking the agent)
        return super().record_agent_turn(prompt, raw_output, extra)

    def on_agent_turn(self, parsed: ParsedTurn) -> None:
        turn = self.history[-1]
        with_placeholder, html = split_page(parsed.message, self.lenient_pages)
        if self.page_placeholder:
            turn.content = with_placeholder
        self.latest_path = None
        turn.extra.update(html=html, screenshot=None)
        if html is None:
            return
        shot = shoot(self.renderer, html, self.screenshot_dir, "page")
        self.answer_html, self.answer_path = html, shot.path
        if shot.path is None:
            turn.extra["render_error"] = shot.error
            return
        self.latest_path = shot.path
        turn.extra["screenshot"] = self._stored(shot.path)

    def on_final_turn(self, parsed: ParsedTurn) -> None:
        self.answer = self.answer_html if self.answer_html is not None else NO_ANSWER

    def _stored(self, path: Optional[str]) -> Optional[str]:
        if path is None or self.output_path is None:
            return path
        return to_stored(path, self.output_path)

    # -- simulator side ------------------------------------------------------------------
    def simulator_messages(self) -> ChatMessages:
        """One user message: the prompt, the agent's page of this turn (or a note that there
        is none), then the reference page, images as PNG data URLs."""
        if self.reference_path is None:
            raise RuntimeError("the reference page is not rendered; call prepare() first")
        values = self.prompt_values()
        values["hidden_information"] = HIDDEN_AS_IMAGE
        values["dialogue_history"] = simulator_transcript(self.history, cue="")
        parts: List[Dict[str, object]] = [text_part(fill_template(self.user_prompt, values))]
        if self.latest_path is not None:
            parts += [text_part(self.captions.agent_page),
                      image_part(read_png(self.latest_path), self.max_image_side)]
        else:
            parts.append(text_part(self.captions.no_page))
        parts += [text_part(self.captions.reference_page),
                  image_part(read_png(self.reference_path), self.max_image_side)]
        return [{"role": "user", "content": parts}]

    # -- result --------------------------------------------------------------------------
    def trajectory(self) -> Trajectory:
        traj = super().trajectory()
        answer_path = self.answer_path if self.answer_html is not None else None
        traj.extra = {ANSWER_KEY: self._stored(answer_path),
                      REFERENCE_KEY: self._stored(self.reference_path),
                      **traj.extra}
        return traj
