"""The options of the dialogue stage, in groups: the tasks, the agent, the simulated human, the
rollout, the frontend's pages, and Best-of-N picks (simulate's ``--pick_*`` are the rank
stage's judge options, :class:`~sweet_rl.stages.groups.JudgeOptions`, under a prefix).

:mod:`sweet_rl.stages.factory` builds the agent and the simulator from these groups.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from sweet_rl.stages.factory import AGENT_BACKENDS
from sweet_rl.flags import Options, flag, group
from sweet_rl.stages.groups import (BROWSERS, JudgeOptions, ResumeOptions, SamplingOptions,
                                    ShardOptions)

TASK_TYPES = ("code", "html")
ROLLOUTS = ("pipelined", "lockstep")


@dataclass(kw_only=True)
class TaskOptions(Options):
    """Tasks: which tasks the dialogues are about."""

    input_path: Optional[str] = flag(
        "task JSONL, ``hf://REPO/FILE`` on the hub, or omitted for the bundled tasks.", None)
    num_tasks: Optional[int] = flag(
        "the first N tasks (1000, the paper's backend test set; None: all).", 1000)
    task_type: str = flag(
        "``code`` (backend programming) or ``html`` (frontend design: pages render offline "
        "in a browser pool; without --hostname the simulator is the embedded tiny "
        "vision-language model, or --env_model as a local VLM).", "code", choices=TASK_TYPES)
    hf_cache_dir: Optional[str] = flag("the download cache for an ``hf://`` --input_path.", None)


@dataclass(kw_only=True)
class LocalModelOptions(Options):
    """In-process models: where the agent and the simulator run when they run here."""

    device: Optional[str] = flag(
        "where in-process models run (default: cuda when available, else cpu).", None)
    generation_batch_size: int = flag(
        "prompts per generate call of an in-process model, and agent requests batched at "
        "once when pipelined.", 16)


@dataclass(kw_only=True)
class ServerKeyOptions(Options):
    """Server key: the key of the OpenAI-compatible servers the stage talks to."""

    api_key: Optional[str] = flag(
        "key for the HTTP servers: the openai agent's and an LLM judge's (default: "
        "$OPENAI_API_KEY, else EMPTY) and the simulator's (default: EMPTY). Never written to "
        "disk.", None, secret=True)


@dataclass(kw_only=True)
class AgentOptions(SamplingOptions, LocalModelOptions, ServerKeyOptions):
    """Agent: the model that collaborates, and how it is served."""

    agent_model: Optional[str] = flag(
        "agent checkpoint (path or hub id); default: the embedded tiny model.", None)
    agent_backend: str = flag(
        "``hf`` (transformers), ``vllm``, or ``openai`` (any compatible endpoint, at "
        "--agent_base_url, key from --api_key or OPENAI_API_KEY).", "hf",
        choices=AGENT_BACKENDS)
    agent_base_url: Optional[str] = flag(
        "the server of ``--agent_backend openai`` (default: OpenAI's API).", None)
    agent_tokenizer: Optional[str] = flag(
        "``--agent_backend openai``: the served model's tokenizer, so turns record the exact "
        "chat-template prompt (needed to train on them).", None)
    agent_prompt_path: str = flag(
        "the agent's prompt file (``auto``: ours, bundled), sent verbatim as the system "
        "message, as the original. Pass the official files for the paper's prompts.", "auto")


@dataclass(kw_only=True)
class SimulatorOptions(LocalModelOptions, ServerKeyOptions):
    """Simulated human: the model that plays the person, and how it is reached."""

    hostname: Optional[str] = flag(
        "the simulator's OpenAI-compatible server: one host, several "
        "(``a,b:8001,http://c:8000/v1``) or a file of URLs; a dialogue stays on one server, a "
        "failing server is left out. Without it the simulator is --env_model in-process.",
        None)
    port: int = flag("the simulator server's port, for a --hostname given without one.", 8000)
    env_model: Optional[str] = flag(
        "the simulator's model (the served model name with --hostname; default: the tiny "
        "model), or ``scripted``: a rule-based human with no model (backend tasks, no "
        "--hostname) for the miniature benchmark's tasks (sweet_rl/recipes/mini/tasks.py).", None)
    simulator_max_tokens: int = flag(
        "the simulated human's budget per reply (greedy, as the original).", 4096)
    simulator_concurrency: int = flag(
        "requests in flight at once to an HTTP simulator, and to an HTTP agent "
        "(``--agent_backend openai``), when pipelined.", 64)
    user_prompt_path: str = flag(
        "the simulated human's prompt file (``auto``: ours, bundled); it gets "
        "{problem_description}, {hidden_information} and {dialogue_history}.", "auto")
    stop_on_rejected_request: bool = flag(
        "end a dialogue when the simulator server rejects a request (HTTP 400), recording "
        "the error, instead of the original's \"No response.\" reply.", False)
    resample_leaks: int = flag(
        "backend: ask the simulated human again, reminded not to write code, up to this many "
        "times when its reply leaks the reference (0: never, as the original). Rows record "
        "their leaking replies either way (``leak_turns``).", 0)
    max_error_share: float = flag(
        "the run exits with an error (exit 2; the rows stay written) when more than this "
        "share of its dialogues end with simulator errors, e.g. every request refused by a "
        "server that does not serve --env_model (1 never fails).", 0.1)

    def check(self) -> None:
        if self.simulator_concurrency < 1:
            raise ValueError("--simulator_concurrency must be at least 1")


@dataclass(kw_only=True)
class RolloutOptions(Options):
    """Rollout: how many dialogues, of how many turns, run how."""

    rollout: str = flag(
        "``pipelined`` (each dialogue advances on its own; agent requests are batched as they "
        "arrive) or ``lockstep`` (the original: one batched agent call, then one simulator "
        "call, per turn). Both give the same trajectories.", "pipelined", choices=ROLLOUTS)
    batch_size: int = flag(
        "dialogues open at once (pipelined) or per lockstep batch (the original's).", 1000)
    max_steps: int = flag("the most agent turns in one dialogue.", 10)
    best_of_n: int = flag("rollouts per task (k); the task list is written k times over.", 1)
    single_turn: bool = flag(
        "the paper's single-turn setting (one agent turn, single-turn prompt).", False)
    seed: int = flag("the run's seed; each dialogue's seed derives from it and the row's index.",
                     0)

    def check(self) -> None:
        if self.batch_size < 1 or self.best_of_n < 1:
            raise ValueError("--batch_size and --best_of_n must be at least 1")


@dataclass(kw_only=True)
class FrontendOptions(Options):
    """Frontend pages (--task_type html): how pages are shot and shown to the human."""

    screenshot_dir: Optional[str] = flag(
        "where page screenshots go (default: ``<output stem>_screenshots/`` beside the "
        "output); names are content hashes, so a resumed run reuses them.", None)
    render_workers: Optional[int] = flag("browsers rendering at once (default: the pool's).",
                                         None)
    browser: str = flag("``chromium`` or ``firefox``.", "chromium", choices=BROWSERS)
    max_image_side: Optional[int] = flag(
        "shrink screenshots whose longer side exceeds this many pixels before they are sent "
        "to the simulator (default: never).", None)
    page_placeholder: bool = flag(
        "replace each page in the dialogue by [SEE RENDERED HTML] (the agent then never sees "
        "its earlier pages; the original kept them).", False)
    user_captions_path: str = flag(
        "JSON file of the three sentences around the pictures in the simulated human's "
        "message, ``{\"agent_page\": ..., \"no_page\": ..., \"reference_page\": ...}`` "
        "(``auto``: ours, bundled; docs/differences.md says how to give the original's).",
        "auto")
    lenient_pages: bool = flag(
        "find the agent's page with tag names in any case (``<HTML>``) and ``</html >`` "
        "closing it; the original's rule, the default, reads lower case only.", False)


@dataclass(kw_only=True)
class SimulateOptions(TaskOptions, AgentOptions, SimulatorOptions, RolloutOptions,
                      FrontendOptions, ResumeOptions, ShardOptions):
    """Simulate ColBench dialogues and write one trajectory per line to --output_path.

    Example (embedded tiny models on the CPU, bundled sample tasks):
        python scripts/simulate_interactions.py --output_path outputs/demo.jsonl --max_new_tokens 32

    With a real agent and a `vllm serve` simulator:
        python scripts/simulate_interactions.py --agent_model meta-llama/Llama-3.1-8B-Instruct \\
            --agent_backend vllm --hostname localhost --port 8000 \\
            --env_model meta-llama/Llama-3.1-70B-Instruct --num_tasks 1000 \\
            --input_path hf://facebook/collaborative_agent_bench/backend_tasks/test.jsonl \\
            --output_path outputs/test.jsonl

    Frontend example (embedded tiny models, bundled sample frontend tasks):
        python scripts/simulate_interactions.py --task_type html \\
            --output_path outputs/demo_html.jsonl --max_new_tokens 32
    """

    # the original's parameters, in its order: arguments without a flag fill them
    POSITIONAL = ("hostname", "input_path", "output_path", "user_prompt_path",
                  "agent_prompt_path", "agent_model", "env_model", "batch_size", "num_tasks",
                  "max_steps", "best_of_n", "train", "task_type", "port", "temperature",
                  "temp_path", "to_continue")
    output_path: str = flag(
        "the trajectory JSONL to write, one dialogue per line (+ .config.json).",
        "outputs/trajectories.jsonl")
    train: bool = flag("accepted for the original's commands; it had no effect there either.",
                       False)
    temp_path: Optional[str] = flag(
        "the original's screenshot folder: html: --screenshot_dir when that is not given; "
        "code: not used.", None)
    pick_n: int = flag(
        "Best-of-N evaluation (paper Figure 3a; backend, hf agent): each turn the agent "
        "samples this many replies and the step critic --pick_critic picks the one played "
        "(assistant turns keep ``candidates``, ``candidate_scores``, ``picked``). 1: off.", 1)
    pick: JudgeOptions = group(JudgeOptions, prefix="pick_", rename={
        "model_id": "pick_critic", "no_use_ground_truth": "pick_without_ground_truth"})

    def check(self) -> None:
        if self.pick_n < 1:
            raise ValueError(f"--pick_n must be at least 1, got {self.pick_n}")
        if self.pick_n > 1 and (self.agent_backend != "hf" or self.task_type != "code"):
            raise ValueError("--pick_n (Best-of-N) needs --agent_backend hf and --task_type code")
        if self.pick_n > 1 and self.pick.critic_type != "random" and not self.pick.model_id:
            raise ValueError(f"--pick_critic is required for --pick_critic_type "
                             f"{self.pick.critic_type} (or pass --pick_critic_type random)")
