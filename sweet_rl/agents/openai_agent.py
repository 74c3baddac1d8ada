"""The ``openai`` agent: any OpenAI-compatible chat endpoint plays the agent.

This is how the paper evaluates API models (GPT-4o, o1-mini), and it also drives a model behind
vLLM or ``transformers serve``. The server applies the chat template itself, so what the model
"saw" is only known exactly when we are given the same tokenizer; ``AgentOutput.prompt`` is:

* with ``tokenizer`` (a transformers tokenizer, or a path to load one): the chat-template text
  ``apply_chat_template(messages, tokenize=False, add_generation_prompt=True)`` — identical to
  what the ``hf``/``vllm`` backends record, so the turns can be used for training;
* without: a readable rendering, one block per message, ``<|role|>\\ncontent\\n``, followed by
  ``<|assistant|>\\n`` (the turn being generated). Fine for logs and evaluation, not for
  token-level training.

A request the server rejects (HTTP 400, e.g. the dialogue outgrew the context window) is
recorded as ``output=""`` with a logged warning: the environment treats an empty answer as an
empty message, so that dialogue goes on (and usually fails) rather than stopping the whole run.
An unreachable server raises :class:`~sweet_rl.models.openai_compat.EndpointUnavailable`.

Reasoning models (o1, o3, o4 families) reject ``max_tokens`` and any ``temperature`` but 1:
for them the limit is sent as ``max_completion_tokens`` and no temperature is sent. The model
name prefix decides unless ``reasoning_model`` is given explicitly.
"""

from __future__ import annotations

import logging
import os
from typing import List, Optional

from sweet_rl.agents.base import Agent
from sweet_rl.types import AgentOutput, ChatMessages
from sweet_rl.models.openai_compat import ChatClient

logger = logging.getLogger(__name__)

REASONING_PREFIXES = ("o1", "o3", "o4")


def is_reasoning_model(model: str) -> bool:
    """``o1-mini``, ``o3``, ``openai/o4-mini``... : models that take ``max_completion_tokens``."""
    return model.rsplit("/", 1)[-1].lower().startswith(REASONING_PREFIXES)


def render_messages(messages: ChatMessages) -> str:
    """Plain-text prompt record when no tokenizer is known (see the module docstring)."""
    parts = []
    for message in messages:
        content = message.get("content", "")
        if not isinstance(content, str):  # list of parts: keep the text ones
            content = "".join(part.get("text", "") for part in content
                              if isinstance(part, dict))
        parts.append(f"<|{message.get('role', 'user')}|>\n{content}\n")
    parts.append("<|assistant|>\n")
    return "".join(parts)


class OpenAIAgent(Agent):
    name = "openai"
    parallel_requests = True  # a server (e.g. `vllm serve`): many requests in flight at once

    def __init__(self, model: str, base_url: str, api_key: Optional[str] = None,
                 temperature: float = 1.0, max_tokens: int = 1024, tokenizer=None,
                 reasoning_model: Optional[bool] = None, check: bool = True, **client_kwargs):
        if api_key is None:
            api_key = os.environ.get("OPENAI_API_KEY") or "EMPTY"
        if reasoning_model is None:
            reasoning_model = is_reasoning_model(model)
        if reasoning_model and temperature != 1.0:
            logger.warning("%s is a reasoning model: temperature %s is not sent (they only "
                           "accept 1)", model, temperature)
        if isinstance(tokenizer, (str, os.PathLike)):
            from sweet_rl.models.hf_generation import load_tokenizer

            tokenizer = load_tokenizer(str(tokenizer))
        self.tokenizer = tokenizer
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.client = ChatClient(base_url, model, api_key=api_key,
                                 reasoning_model=reasoning_model, **client_kwargs)
        if check:
            self.client.check_reachable()

    def format_prompt(self, messages: ChatMessages) -> str:
        if self.tokenizer is None:
            return render_messages(messages)
        from sweet_rl.models.hf_generation import format_chat

        return format_chat(self.tokenizer, messages)

    def generate(self, conversations: List[ChatMessages], seeds: Optional[List[int]] = None,
                 keys=None) -> List[AgentOutput]:
        results = self.client.complete_batch(conversations, temperature=self.temperature,
                                             max_tokens=self.max_tokens, seeds=seeds)
        outputs = []
        for messages, result in zip(conversations, results):
            if result.error is not None:
                logger.warning("agent request rejected by %s, recording an empty answer: %s",
                               self.client.base_url, result.error)
            outputs.append(AgentOutput(prompt=self.format_prompt(messages),
                                       output=result.text or ""))
        return outputs

    def close(self) -> None:
        self.client.close()
