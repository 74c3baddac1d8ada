"""Build agents, simulators and step critics from their option groups (:mod:`sweet_rl.stages`)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Optional, Sequence, Union

from sweet_rl.agents.base import Agent
from sweet_rl.simulators.base import Simulator

if TYPE_CHECKING:  # the option groups these builders read (no import at run time needed)
    from sweet_rl.stages.groups import EngineOptions, JudgeOptions
    from sweet_rl.stages.simulate_options import AgentOptions, SimulateOptions, SimulatorOptions

logger = logging.getLogger(__name__)
AGENT_BACKENDS = ("hf", "vllm", "openai")
SCRIPTED_SIMULATOR = "scripted"  # --env_model value for the rule-based human (no model)


def resolve_model(model: Optional[str]) -> str:
    """``None``/``"tiny"`` means the embedded tiny model, built once into the user cache."""
    if model in (None, "", "tiny"):
        from sweet_rl.models.tiny_model import ensure_tiny_model

        path = ensure_tiny_model()
        logger.info("using the embedded tiny model at %s", path)
        return path
    return model


def build_agent(opts: "AgentOptions", seed: int = 0) -> Agent:
    """The agent ``opts`` describe (the embedded tiny model when no --agent_model is given);
    ``seed``: vLLM's sampling seed (the run's)."""
    if opts.agent_backend == "hf":
        from sweet_rl.agents.hf_agent import HFAgent

        return HFAgent(resolve_model(opts.agent_model), temperature=opts.temperature,
                       max_new_tokens=opts.max_new_tokens, device=opts.device,
                       batch_size=opts.generation_batch_size)
    if opts.agent_backend == "vllm":
        from sweet_rl.agents.vllm_agent import VLLMAgent

        return VLLMAgent(resolve_model(opts.agent_model), temperature=opts.temperature,
                         max_new_tokens=opts.max_new_tokens, seed=seed)
    if opts.agent_backend == "openai":
        from sweet_rl.agents.openai_agent import OpenAIAgent

        return OpenAIAgent(opts.agent_model, base_url=opts.agent_base_url
                           or "https://api.openai.com/v1", api_key=opts.api_key,
                           temperature=opts.temperature, max_tokens=opts.max_new_tokens,
                           tokenizer=opts.agent_tokenizer)
    raise ValueError(f"unknown agent backend {opts.agent_backend!r}; choose from "
                     f"{AGENT_BACKENDS}")


def resolve_vlm(model: Optional[str]) -> str:
    """``None``/``"tiny"`` means the embedded tiny vision-language model (user cache)."""
    if model in (None, "", "tiny"):
        from sweet_rl.models.tiny_vlm import ensure_tiny_vlm

        path = ensure_tiny_vlm()
        logger.info("using the embedded tiny vision-language model at %s", path)
        return path
    return model


def build_simulator(opts: "SimulatorOptions", task_type: str = "code",
                    agent: Optional[Agent] = None) -> Simulator:
    """An HTTP simulator when --hostname is given, else an in-process local model; with
    ``--env_model scripted`` the rule-based human of the miniature benchmark
    (:mod:`sweet_rl.simulators.scripted_simulator`), backend tasks only.

    --hostname may name several servers (commas or a file, see
    :func:`sweet_rl.simulators.multi_host.parse_hosts`; --port is for entries without one):
    one gives the plain :class:`OpenAISimulator`, several a :class:`MultiHostSimulator`.

    For ``task_type="html"`` the local model is a vision-language model (default: the tiny
    Qwen2-VL); the HTTP simulator sends the same image messages to the server as they are.
    The local text simulator reuses the ``hf`` agent's loaded model when both are the same
    model, so the CPU demo holds one copy.
    """
    hostname, env_model, max_tokens = opts.hostname, opts.env_model, opts.simulator_max_tokens
    if env_model == SCRIPTED_SIMULATOR:
        # checked before --hostname, and refused with it: which human answers must never
        # depend on which of two conflicting flags wins
        if hostname or task_type != "code":
            raise ValueError("--env_model scripted is an in-process rule-based human for "
                             "backend tasks: drop --hostname and use --task_type code")
        from sweet_rl.simulators.scripted_simulator import ScriptedSimulator

        return ScriptedSimulator()
    if hostname:
        from sweet_rl.simulators.multi_host import MultiHostSimulator, parse_hosts
        from sweet_rl.simulators.openai_simulator import OpenAISimulator

        base_urls = parse_hosts(hostname, opts.port)
        if not env_model:
            raise ValueError("--env_model is required with --hostname: the model name the "
                             f"server at {', '.join(base_urls)} serves (as given to "
                             "`vllm serve`)")
        if len(base_urls) == 1:
            return OpenAISimulator(base_url=base_urls[0], model=env_model,
                                   api_key=opts.api_key or "EMPTY", max_tokens=max_tokens)
        return MultiHostSimulator(env_model, base_urls, api_key=opts.api_key or "EMPTY",
                                  max_tokens=max_tokens)
    if task_type == "html":
        from sweet_rl.simulators.local_vlm_simulator import LocalVLMSimulator

        return LocalVLMSimulator(resolve_vlm(env_model), max_new_tokens=max_tokens,
                                 device=opts.device, batch_size=opts.generation_batch_size)
    from sweet_rl.simulators.local_simulator import LocalSimulator

    model_path = resolve_model(env_model)
    generator = getattr(agent, "generator", None)
    if generator is not None and getattr(agent, "model_path", None) == model_path:
        return LocalSimulator(model_path, max_new_tokens=max_tokens, generator=generator)
    return LocalSimulator(model_path, max_new_tokens=max_tokens, device=opts.device,
                          batch_size=opts.generation_batch_size)


def build_judge(judge: "JudgeOptions", engine: Optional["EngineOptions"] = None, *,
                use_sum: bool = False, prompt_cache: bool = True, api_key: str = "EMPTY",
                screenshots_from: Union[None, str, Sequence[str]] = None):
    """The step critic ``judge`` describes (:mod:`sweet_rl.stepwise.judges`), its model loaded
    as ``engine`` says (default: hf, in-process defaults): for the rank stage and for
    Best-of-N's picks. It is built here, not in ``stepwise/``, because the head critics load
    through ``sweet_rl.training.heads``.

    ``screenshots_from`` (``vlm_regression`` only): the evaluated frontend trajectory file(s)
    whose ``reference_screenshot`` each record's turn is scored with, looked up by the
    record's ``ground_truth`` (the rank stage's ``--screenshots_from``)."""
    from sweet_rl.stages.groups import EngineOptions
    from sweet_rl.stepwise.judges import HeadJudge, PairwiseJudge, RandomJudge

    engine = engine or EngineOptions()
    kind, truth = judge.critic_type, not judge.no_use_ground_truth
    device, dtype, batch_size = engine.device, engine.dtype, engine.batch_size
    if kind == "random":
        return RandomJudge(engine.seed)
    model_id = judge.model_id if judge.judge_base_url else resolve_model(judge.model_id)
    if kind == "vlm_regression":
        return _vlm_judge(model_id, truth, device, dtype, batch_size, screenshots_from)
    if kind == "logprob":
        from sweet_rl.stepwise.judges import LogProbJudge
        from sweet_rl.stepwise.ranking import build_scorer

        scorer = build_scorer(engine.backend, model_id, device, dtype, batch_size, prompt_cache,
                              engine.seed)
        return LogProbJudge(scorer, truth, judge.score_tokens, use_sum)
    if kind in ("regression", "value"):
        from sweet_rl.training.heads import load_scalar_critic

        critic = load_scalar_critic(model_id, device=device, dtype=dtype)
        if critic.kind != kind:
            raise ValueError(f"{model_id} holds a {critic.kind} head, not {kind} "
                             "(train_dpo.py --critic_head decides which)")
        return HeadJudge(critic, truth, batch_size)
    if judge.judge_base_url:
        from sweet_rl.models.openai_compat import ChatClient

        client = ChatClient(judge.judge_base_url, model_id, api_key=api_key)
        return PairwiseJudge(lambda batch: [r.text for r in client.complete_batch(
            batch, temperature=0.0, max_tokens=4)])
    from sweet_rl.models.hf_generation import HFGenerator

    generator = HFGenerator(model_id, device=device, dtype=dtype, max_new_tokens=4,
                            temperature=0.0, batch_size=batch_size)
    return PairwiseJudge(lambda batch: generator.generate([generator.format(m) for m in batch]))


def _vlm_judge(model_id, use_ground_truth, device, dtype, batch_size, screenshots_from):
    """The frontend's VLM critic with the reference screenshots of the records' tasks."""
    from sweet_rl.stepwise.judges import ImageHeadJudge, ReferenceScreenshots
    from sweet_rl.training.vlm_heads import load_vlm_critic

    if not use_ground_truth:
        raise ValueError("--critic_type vlm_regression always sees the reference page (its "
                         "training-time information): --no_use_ground_truth does not apply")
    sources = ([screenshots_from] if isinstance(screenshots_from, str)
               else list(screenshots_from or []))
    if not sources:
        raise ValueError("--critic_type vlm_regression scores each turn with its task's "
                         "reference screenshot: pass --screenshots_from, the evaluated "
                         "trajectory file the step records were sampled from")
    screenshots = ReferenceScreenshots(sources)  # read (and checked) before the model loads
    return ImageHeadJudge(load_vlm_critic(model_id, device=device, dtype=dtype), screenshots,
                          batch_size)


def build_pick_agent(opts: "SimulateOptions", rows: Sequence) -> Agent:
    """simulate's Best-of-N mode (paper Figure 3a): the hf agent samples --pick_n replies per
    turn and the step critic of --pick_* picks one (``random``: a uniform pick); see
    :class:`sweet_rl.agents.critic_pick.CriticPickAgent`. ``rows``: the run's tasks in row
    order (a dialogue's key is its row)."""
    import os

    from sweet_rl.agents.critic_pick import CriticPickAgent
    from sweet_rl.stages.groups import EngineOptions

    judge = None
    if opts.pick.critic_type != "random":
        engine = EngineOptions(device=opts.device, batch_size=opts.generation_batch_size,
                               seed=opts.seed)
        judge = build_judge(opts.pick, engine, api_key=opts.api_key
                            or os.environ.get("OPENAI_API_KEY", "EMPTY"))
    return CriticPickAgent(resolve_model(opts.agent_model), opts.pick_n,
                           lambda key: rows[key].ground_truth, judge=judge,
                           temperature=opts.temperature, max_new_tokens=opts.max_new_tokens,
                           device=opts.device, batch_size=opts.generation_batch_size)
