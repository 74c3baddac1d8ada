"""A small client for OpenAI-compatible chat servers (vLLM, ``transformers serve``, OpenAI).

Shared by the HTTP human simulator and the HTTP agent. What it adds over the ``openai``
package is a failure policy suited to long batch rollouts:

* transient trouble (connection refused/reset, timeouts, HTTP 429, HTTP 5xx) is retried with
  exponential backoff plus jitter, so a briefly overloaded server does not end dialogues;
* a request the server rejects (HTTP 400/404/409/413/422, e.g. "context too long") is not
  retried — repeating it cannot help — and comes back as ``ChatResult(text=None, error=...)``,
  so only that one dialogue ends, with the reason recorded;
* a server that stays unreachable (or keeps timing out, rate limiting, or refusing the API
  key) raises :class:`EndpointUnavailable` naming the URL: the run stops instead of
  silently filling the output with errors.

The ``openai`` package is imported lazily so importing this module stays cheap.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Dict, List, Optional, Sequence

from sweet_rl.types import ChatMessages

logger = logging.getLogger(__name__)

HOW_TO_START = ("Start an OpenAI-compatible server first, e.g. `vllm serve MODEL --port N` or "
                "`transformers serve --host 127.0.0.1 --port N MODEL`, and pass its host and "
                "port (or full base URL).")


class EndpointUnavailable(RuntimeError):
    """Nothing usable answers at a server's URL (down, timing out, or refusing the API key).

    Named after the endpoint, not its role: the simulator and the HTTP agent share this
    client, and an unreachable agent server must not be reported as a simulator failure.
    The run stops; the message names the URL.
    """


class ModelNotServed(EndpointUnavailable):
    """The server answers, but not for the model name asked for."""


def base_url_from(hostname: str, port: Optional[int] = None) -> str:
    """``http://{hostname}:{port}/v1``; a ``hostname`` that already is a URL is kept as is."""
    hostname = hostname.strip()
    if "://" in hostname:
        return hostname.rstrip("/")
    if port is None:
        return f"http://{hostname}/v1"
    return f"http://{hostname}:{port}/v1"


@dataclass
class ChatResult:
    """One completion: ``text`` or, for a rejected request, ``error`` (then ``text`` is None)."""

    text: Optional[str]
    error: Optional[str] = None
    finish_reason: Optional[str] = None


def _server_message(err) -> str:
    """The server's own explanation inside an ``APIStatusError``."""
    body = getattr(err, "body", None)
    if isinstance(body, dict):
        # OpenAI/vLLM put it in {"error": {"message"}} (the client unwraps "error");
        # FastAPI servers such as `transformers serve` use {"detail": ...}.
        for key in ("message", "detail"):
            if body.get(key):
                return str(body[key])
    if body:
        return str(body)
    return str(err)


def _is_read_timeout(err) -> bool:
    # A read timeout means a server accepted the connection but is slow; a connect timeout
    # (dropped packets) means nothing is there. The openai exception wraps the httpx one.
    return type(getattr(err, "__cause__", None)).__name__ == "ReadTimeout"


class ChatClient:
    """Thread-safe chat-completions client with retries and a bounded thread pool.

    ``reasoning_model=True`` is for o1/o3-style endpoints, which reject ``max_tokens`` and any
    ``temperature`` other than 1: the limit is then sent as ``max_completion_tokens`` and the
    temperature is left out.
    """

    def __init__(self, base_url: str, model: str, api_key: str = "EMPTY", timeout: float = 120,
                 max_retries: int = 5, backoff: float = 1.0, max_backoff: float = 30,
                 max_workers: int = 64, reasoning_model: bool = False):
        from openai import OpenAI

        self.base_url = base_url.rstrip("/")
        self.model = model
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_workers = max_workers
        self.reasoning_model = reasoning_model
        # The package's own retries are off: ours distinguish "rejected" from "unavailable".
        self._client = OpenAI(base_url=self.base_url, api_key=api_key or "EMPTY",
                              max_retries=0, timeout=timeout)
        self._pool: Optional[ThreadPoolExecutor] = None
        self._pool_lock = threading.Lock()

    # ----- reachability -------------------------------------------------------------------

    def check_reachable(self, timeout: float = 5.0) -> None:
        """Fail within ``timeout`` seconds if nothing answers at ``base_url``.

        Any HTTP answer counts as reachable, even an error: `transformers serve` answers
        ``GET /v1/models`` with 500 when the Hugging Face cache folder does not exist, and
        some servers have no ``/models`` at all. Fatal here: a refused API key, and a model
        list that does not hold ``model`` (every request would be refused with HTTP 400
        and each dialogue would end in an error): :class:`ModelNotServed` names the models
        the server does serve.
        """
        import openai

        try:
            listed = self._client.with_options(timeout=timeout, max_retries=0).models.list()
            served = sorted(str(m.id) for m in getattr(listed, "data", None) or [])
            if served and self.model not in served:
                raise ModelNotServed(
                    f"{self.base_url} does not serve a model named {self.model!r}; it serves: "
                    f"{', '.join(served[:20])}{' ...' if len(served) > 20 else ''}. Pass one "
                    "of these names (with `transformers serve MODEL`, the MODEL string as "
                    "given there).")
        except openai.APIStatusError as err:
            if err.status_code in (401, 403):
                raise EndpointUnavailable(
                    f"{self.base_url} refused the API key (HTTP {err.status_code}): "
                    f"{_server_message(err)}") from err
            logger.debug("%s/models answered HTTP %s; the server is up", self.base_url,
                         err.status_code)
        except openai.APITimeoutError as err:
            if _is_read_timeout(err):
                logger.warning("%s/models was slow to answer (> %.0f s); assuming the server "
                               "is up", self.base_url, timeout)
                return
            raise EndpointUnavailable(
                f"no OpenAI-compatible server reachable at {self.base_url} (connection timed "
                f"out after {timeout:.0f} s). {HOW_TO_START}") from err
        except openai.APIConnectionError as err:
            raise EndpointUnavailable(
                f"no OpenAI-compatible server reachable at {self.base_url} "
                f"({err.__cause__ or err}). {HOW_TO_START}") from err
        except openai.OpenAIError as err:  # e.g. a non-JSON body: still somebody answering
            logger.debug("%s/models gave an unexpected answer (%s); the server is up",
                         self.base_url, err)

    # ----- one request ---------------------------------------------------------------------

    def _request_kwargs(self, messages: ChatMessages, temperature: Optional[float],
                        max_tokens: Optional[int], seed: Optional[int]) -> Dict[str, object]:
        kwargs: Dict[str, object] = dict(model=self.model, messages=list(messages))
        if max_tokens is not None:
            kwargs["max_completion_tokens" if self.reasoning_model else "max_tokens"] = max_tokens
        if temperature is not None and not self.reasoning_model:
            kwargs["temperature"] = temperature
        if seed is not None:
            kwargs["seed"] = int(seed)
        return kwargs

    def _delay(self, attempt: int, err=None) -> float:
        """Exponential backoff, capped, plus up to 25% jitter so clients do not retry in step."""
        delay = min(self.max_backoff, self.backoff * (2 ** attempt))
        response = getattr(err, "response", None)
        retry_after = response.headers.get("retry-after") if response is not None else None
        if retry_after:
            try:  # honour the server's hint on 429/503, within our cap
                delay = max(delay, min(self.max_backoff, float(retry_after)))
            except ValueError:
                pass
        return delay * (1 + 0.25 * random.random())

    def complete(self, messages: ChatMessages, temperature: Optional[float],
                 max_tokens: Optional[int], seed: Optional[int] = None,
                 _abort: Optional[threading.Event] = None) -> ChatResult:
        """One chat completion, retried on transient failures (see the module docstring)."""
        import openai

        kwargs = self._request_kwargs(messages, temperature, max_tokens, seed)
        attempts = self.max_retries + 1
        for attempt in range(attempts):
            try:
                response = self._client.chat.completions.create(**kwargs)
            except openai.APIConnectionError as err:  # includes APITimeoutError
                last_err = err  # `err` itself is unbound after the except block
                what = (f"timed out after {self.timeout:.0f} s"
                        if isinstance(err, openai.APITimeoutError)
                        else f"connection failed ({err.__cause__ or err})")
                if attempt + 1 >= attempts or (_abort is not None and _abort.is_set()):
                    raise EndpointUnavailable(
                        f"server at {self.base_url} unavailable: request {what}, "
                        f"{attempt + 1} attempt(s). {HOW_TO_START}") from err
                reason = what
            except openai.APIStatusError as err:
                last_err = err
                status, message = err.status_code, _server_message(err)
                if status in (401, 403):
                    raise EndpointUnavailable(
                        f"{self.base_url} refused the API key (HTTP {status}): {message}") from err
                if status != 429 and status < 500:
                    # The request itself is bad (context too long, unknown model, bad field):
                    # retrying would get the same answer.
                    return ChatResult(text=None, error=f"HTTP {status}: {message}")
                if attempt + 1 >= attempts or (_abort is not None and _abort.is_set()):
                    if status == 429:  # still rate limited after backing off: quota is gone
                        raise EndpointUnavailable(
                            f"{self.base_url} kept rate limiting (HTTP 429) after {attempts} "
                            f"attempts: {message}") from err
                    # A persistent 5xx for one request ends that dialogue, not the run.
                    return ChatResult(text=None, error=f"HTTP {status} after {attempts} "
                                                       f"attempts: {message}")
                reason = f"HTTP {status}: {message}"
            else:
                if not response.choices:
                    return ChatResult(text=None, error="server answered with no choices")
                choice = response.choices[0]
                return ChatResult(text=choice.message.content or "",
                                  finish_reason=choice.finish_reason)
            delay = self._delay(attempt, last_err)
            logger.warning("%s: %s; retry %d/%d in %.2f s", self.base_url, reason, attempt + 1,
                           self.max_retries, delay)
            if _abort is not None:
                # Wakes early when a sibling request of the batch found the server gone.
                if _abort.wait(delay):
                    raise EndpointUnavailable(f"{self.base_url}: gave up after {reason}, "
                                               "another request found the server unavailable")
            else:
                time.sleep(delay)
        raise AssertionError("unreachable")  # pragma: no cover - the loop always returns/raises

    # ----- batches ---------------------------------------------------------------------------

    def _executor(self) -> ThreadPoolExecutor:
        with self._pool_lock:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.max_workers,
                                                thread_name_prefix="chat-client")
            return self._pool

    def complete_batch(self, batch: Sequence[ChatMessages], temperature: Optional[float],
                       max_tokens: Optional[int],
                       seeds: Optional[Sequence[Optional[int]]] = None) -> List[ChatResult]:
        """``complete`` for every conversation concurrently; results in input order.

        If one request finds the server unavailable, the others stop retrying and the
        :class:`EndpointUnavailable` is raised here.
        """
        if not batch:
            return []
        if seeds is not None and len(seeds) != len(batch):
            raise ValueError(f"{len(seeds)} seeds for {len(batch)} conversations")
        abort = threading.Event()
        pool = self._executor()
        futures = [pool.submit(self.complete, messages, temperature, max_tokens,
                               None if seeds is None else seeds[i], abort)
                   for i, messages in enumerate(batch)]
        wait(futures, return_when=FIRST_EXCEPTION)
        for future in futures:
            if future.done() and future.exception() is not None:
                abort.set()
                for other in futures:
                    other.cancel()
                raise future.exception()
        return [future.result() for future in futures]

    def close(self) -> None:
        with self._pool_lock:
            if self._pool is not None:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = None
        self._client.close()
