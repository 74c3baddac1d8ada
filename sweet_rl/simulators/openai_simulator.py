"""The HTTP human simulator: any OpenAI-compatible chat server, greedy decoding.

The paper's simulator is Llama-3.1-70B-Instruct behind vLLM
(``vllm serve meta-llama/Llama-3.1-70B-Instruct --port 8000``); ``transformers serve`` and the
OpenAI API work the same way. Decoding is always greedy (temperature 0) so that, given the same
dialogue, the simulated human answers the same way across runs and across agents.
"""

from __future__ import annotations

from typing import List, Optional

from sweet_rl.models.openai_compat import ChatClient, base_url_from
from sweet_rl.simulators.base import DialogueKeys, Simulator
from sweet_rl.types import ChatMessages, SimulatorReply


class OpenAISimulator(Simulator):
    """Replies from ``model`` served at ``base_url`` (e.g. ``http://localhost:8000/v1``).

    ``check=True`` probes the server at construction, so a run with a wrong host or port stops
    within seconds with a :class:`~sweet_rl.models.openai_compat.EndpointUnavailable` naming the
    URL, instead of after the agent's first (possibly long) generation. Rejected requests (HTTP 400,
    e.g. a dialogue that outgrew the simulator's context) give ``SimulatorReply(text=None,
    error=...)``.

    With ``transformers serve MODEL``, ``model`` must be the same string as ``MODEL``: the
    server answers 400 for any other name.
    """

    name = "openai"
    parallel_requests = True  # a server: the pipelined loop sends requests from many threads

    def __init__(self, model: str, base_url: Optional[str] = None, api_key: str = "EMPTY",
                 max_tokens: int = 512, hostname: Optional[str] = None,
                 port: Optional[int] = None, check: bool = True,
                 client: Optional[ChatClient] = None, **client_kwargs):
        if client is None:
            if base_url is None:
                if hostname is None:
                    raise ValueError("OpenAISimulator needs base_url or hostname (and port)")
                base_url = base_url_from(hostname, port)
            client = ChatClient(base_url, model, api_key=api_key, **client_kwargs)
        self.client = client
        self.max_tokens = max_tokens
        if check:
            self.client.check_reachable()

    @property
    def base_url(self) -> str:
        return self.client.base_url

    def reply_batch(self, conversations: List[ChatMessages],
                    keys: DialogueKeys = None) -> List[SimulatorReply]:
        results = self.client.complete_batch(conversations, temperature=0.0,
                                             max_tokens=self.max_tokens)
        return [SimulatorReply(text=r.text, error=r.error) for r in results]

    def close(self) -> None:
        self.client.close()
