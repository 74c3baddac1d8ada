"""Build agents and simulators from command-line flags (the original's names where it had them)."""

from __future__ import annotations

import logging
from typing import Optional, Sequence, Union

from sweet_rl.agents.base import Agent
from sweet_rl.simulators.base import Simulator

logger = logging.getLogger(__name__)
AGENT_BACKENDS = ("hf", "vllm", "openai")
SCRIPTED_SIMULATOR = "scripted"  # --env_model value for the rule-based human (no model)


def resolve_model(model: Optional[str]) -> str:
    """``None``/``"tiny"`` means the embedded tiny model, built once into the user cache."""
    if model in (None, "", "tiny"):
        from sweet_rl.tiny_model import ensure_tiny_model

        path = ensure_tiny_model()
        logger.info("using the embedded tiny model at %s", path)
        return path
    return model


def build_agent(backend: str, model: str, temperature: float = 1.0, max_new_tokens: int = 1024,
                device: Optional[str] = None, batch_size: int = 16,
                base_url: Optional[str] = None, api_key: Optional[str] = None,
                tokenizer: Optional[str] = None, seed: int = 0) -> Agent:
    if backend == "hf":
        from sweet_rl.agents.hf_agent import HFAgent

        return HFAgent(model, temperature=temperature, max_new_tokens=max_new_tokens,
                       device=device, batch_size=batch_size)
    if backend == "vllm":
        from sweet_rl.agents.vllm_agent import VLLMAgent

        return VLLMAgent(model, temperature=temperature, max_new_tokens=max_new_tokens, seed=seed)
    if backend == "openai":
        from sweet_rl.agents.openai_agent import OpenAIAgent

        if base_url is None:
            base_url = "https://api.openai.com/v1"
        return OpenAIAgent(model, base_url=base_url, api_key=api_key, temperature=temperature,
                           max_tokens=max_new_tokens, tokenizer=tokenizer)
    raise ValueError(f"unknown agent backend {backend!r}; choose from {AGENT_BACKENDS}")


def resolve_vlm(model: Optional[str]) -> str:
    """``None``/``"tiny"`` means the embedded tiny vision-language model (user cache)."""
    if model in (None, "", "tiny"):
        from sweet_rl.tiny_vlm import ensure_tiny_vlm

        path = ensure_tiny_vlm()
        logger.info("using the embedded tiny vision-language model at %s", path)
        return path
    return model


def build_simulator(hostname: Union[None, str, Sequence[str]], port: int,
                    env_model: Optional[str], max_tokens: int = 256,
                    device: Optional[str] = None, batch_size: int = 16,
                    api_key: Optional[str] = None, agent: Optional[Agent] = None,
                    task_type: str = "code") -> Simulator:
    """An HTTP simulator when ``hostname`` is given, else an in-process local model; with
    ``env_model="scripted"`` the rule-based human of the miniature benchmark
    (:mod:`sweet_rl.simulators.scripted_simulator`), backend tasks only.

    ``hostname`` may name several servers (a list, commas or a file, see
    :func:`sweet_rl.simulators.multi_host.parse_hosts`; ``port`` is for entries without one):
    one gives the plain :class:`OpenAISimulator`, several a :class:`MultiHostSimulator`.

    For ``task_type="html"`` the local model is a vision-language model (default: the tiny
    Qwen2-VL); the HTTP simulator sends the same image messages to the server as they are.
    The local text simulator reuses the ``hf`` agent's loaded model when both are the same
    model, so the CPU demo holds one copy.
    """
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

        base_urls = parse_hosts(hostname, port)
        if not env_model:
            raise ValueError("--env_model is required with --hostname: the model name the "
                             f"server at {', '.join(base_urls)} serves (as given to "
                             "`vllm serve`)")
        if len(base_urls) == 1:
            return OpenAISimulator(base_url=base_urls[0], model=env_model,
                                   api_key=api_key or "EMPTY", max_tokens=max_tokens)
        return MultiHostSimulator(env_model, base_urls, api_key=api_key or "EMPTY",
                                  max_tokens=max_tokens)
    if task_type == "html":
        from sweet_rl.simulators.local_vlm_simulator import LocalVLMSimulator

        return LocalVLMSimulator(resolve_vlm(env_model), max_new_tokens=max_tokens,
                                 device=device, batch_size=batch_size)
    from sweet_rl.simulators.local_simulator import LocalSimulator

    model_path = resolve_model(env_model)
    generator = getattr(agent, "generator", None)
    if generator is not None and getattr(agent, "model_path", None) == model_path:
        return LocalSimulator(model_path, max_new_tokens=max_tokens, generator=generator)
    return LocalSimulator(model_path, max_new_tokens=max_tokens, device=device,
                          batch_size=batch_size)


# where the vlm_regression judge finds the reference screenshots when build_judge is not told


def build_judge(critic_type: str, model_id: Optional[str] = None, *, use_ground_truth=True,
                score_tokens="original", use_sum=False, backend="hf", device=None,
                dtype="auto", batch_size=16, prompt_cache=True, seed=0,
                judge_base_url: Optional[str] = None, api_key: str = "EMPTY",
                screenshots_from: Union[None, str, Sequence[str]] = None):
    """The step critic of ``critic_type`` (:mod:`sweet_rl.stepwise.judges`), its model loaded:
    for the rank stage's ``--critic_type`` and Best-of-N's picks. It is built here, not in
    ``stepwise/``, because the head critics load through ``sweet_rl.training.heads``.

    ``screenshots_from`` (``vlm_regression`` only): the evaluated frontend trajectory file(s)
    whose ``reference_screenshot`` each record's turn is scored with, looked up by the
    record's ``ground_truth`` (the rank stage's ``--screenshots_from``)."""
    from sweet_rl.stepwise.judges import CRITIC_TYPES, HeadJudge, PairwiseJudge, RandomJudge

    if critic_type not in CRITIC_TYPES:
        raise ValueError(f"--critic_type must be one of {CRITIC_TYPES}, got {critic_type!r}")
    if critic_type == "random":
        return RandomJudge(seed)
    if critic_type == "vlm_regression":
        return _vlm_judge(model_id, use_ground_truth, device, dtype, batch_size,
                          screenshots_from)
    if critic_type == "logprob":
        from sweet_rl.stepwise.judges import LogProbJudge
        from sweet_rl.stepwise.ranking import build_scorer

        scorer = build_scorer(backend, model_id, device, dtype, batch_size, prompt_cache, seed)
        return LogProbJudge(scorer, use_ground_truth, score_tokens, use_sum)
    if critic_type in ("regression", "value"):
        from sweet_rl.training.heads import load_scalar_critic

        critic = load_scalar_critic(model_id, device=device, dtype=dtype)
        if critic.kind != critic_type:
            raise ValueError(f"{model_id} holds a {critic.kind} head, not {critic_type} "
                             "(train_dpo.py --critic_head decides which)")
        return HeadJudge(critic, use_ground_truth, batch_size)
    if judge_base_url:
        from sweet_rl.openai_compat import ChatClient

        client = ChatClient(judge_base_url, model_id, api_key=api_key)
        return PairwiseJudge(lambda batch: [r.text for r in client.complete_batch(
            batch, temperature=0.0, max_tokens=4)])
    from sweet_rl.hf_generation import HFGenerator

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


def build_pick_agent(agent_model: str, n: int, rows: Sequence, critic: Optional[str],
                     critic_type: str = "logprob", *, temperature: float = 1.0,
                     max_new_tokens: int = 1024, device: Optional[str] = None,
                     batch_size: int = 16, use_ground_truth: bool = True,
                     score_tokens: str = "original", judge_base_url: Optional[str] = None,
                     api_key: str = "EMPTY", seed: int = 0) -> Agent:
    """simulate's Best-of-N mode (paper Figure 3a): the hf agent samples ``n`` replies per
    turn and the step critic ``critic`` of ``critic_type`` picks one (``random``, or no
    critic: a uniform pick); see :class:`sweet_rl.agents.critic_pick.CriticPickAgent`.
    ``rows``: the run's tasks in row order (a dialogue's key is its row)."""
    from sweet_rl.agents.critic_pick import CriticPickAgent

    judge = None
    if critic_type != "random":
        if not critic:
            raise ValueError(f"--pick_critic is required for --pick_critic_type {critic_type} "
                             "(or pass --pick_critic_type random)")
        model = critic if judge_base_url else resolve_model(critic)
        judge = build_judge(critic_type, model, use_ground_truth=use_ground_truth,
                            score_tokens=score_tokens, device=device, batch_size=batch_size,
                            seed=seed, judge_base_url=judge_base_url, api_key=api_key)
    return CriticPickAgent(agent_model, n, lambda key: rows[key].ground_truth, judge=judge,
                           temperature=temperature, max_new_tokens=max_new_tokens,
                           device=device, batch_size=batch_size)
