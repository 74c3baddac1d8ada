#!/usr/bin/env python
"""Rollout speed: pipelined dialogues against the lockstep loop, in one run.

    python benchmarks/bench_rollout.py                  # 200 dialogues, median latency 1 s
    python benchmarks/bench_rollout.py --dialogues 60 --median_latency 0.3 --device cuda

The simulated human is a loopback OpenAI-compatible server (this file) whose reply time is
lognormal: median ``--median_latency`` seconds (1.0) and log-spread ``--sigma`` (0.5: a tenth
of the replies take over 1.9 s, one in a hundred over 3.2 s), about what a 70B simulator
behind vLLM shows for replies of a few sentences under load. Each request's latency is drawn
from a generator seeded by the request's text, so both loops wait the same time for the same
reply. The agent is the embedded tiny Llama (transformers ``generate``, sampled, seeded per
row and turn) writing ``--max_new_tokens`` tokens per turn; it never answers, so a dialogue
ends at its turn limit, drawn per dialogue uniformly from 1 to 10 (ColBench's dialogues end
anywhere in that range). Both loops get the same dialogues, seeds and simulator concurrency
(``--concurrency`` requests at once); the script checks that they return the same trajectories
and prints dialogues per second for each and their ratio. Target: pipelined >= 1.5x.

"The same trajectories" holds exactly for a greedy agent (``--temperature 0``). A sampled one
draws each row's tokens from its own seeded generator, but transformers' batched forward pass
gives a row logits that differ in the last bits with the padding its batch mates impose, and
once in tens of thousands of draws that moves a token across a boundary of the sampling
distribution; the lockstep loop has the same dependence on its batches. The script prints the
rows that differ.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import os
import random
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def latency_server(median: float, sigma: float) -> ThreadingHTTPServer:
    """A chat-completions server on a free loopback port that answers after a lognormal delay."""

    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args):
            pass

        def _answer(self, body: dict) -> None:
            data = json.dumps(body).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):  # /v1/models: the client's reachability probe
            self._answer({"object": "list", "data": [{"id": "sim", "object": "model"}]})

        def do_POST(self):
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            seed = int.from_bytes(hashlib.sha256(raw).digest()[:8], "big")
            time.sleep(median * math.exp(sigma * random.Random(seed).gauss(0, 1)))
            self._answer({"id": "sim", "object": "chat.completion", "created": 0, "model": "sim",
                          "choices": [{"index": 0, "finish_reason": "stop", "message": {
                              "role": "assistant", "content": "Sure, it should return a list."}}],
                          "usage": {"prompt_tokens": 1, "completion_tokens": 8,
                                    "total_tokens": 9}})

    class Server(ThreadingHTTPServer):
        request_queue_size = 1024  # every concurrent request gets in (the default is 5)
        daemon_threads = True

    server = Server(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--dialogues", type=int, default=200)
    parser.add_argument("--median_latency", type=float, default=1.0)
    parser.add_argument("--sigma", type=float, default=0.5)
    parser.add_argument("--max_new_tokens", type=int, default=32)
    parser.add_argument("--batch_size", type=int, default=16, help="agent rows per generate")
    parser.add_argument("--concurrency", type=int, default=64, help="simulator requests at once")
    parser.add_argument("--device", default="cpu")
    parser.add_argument("--temperature", type=float, default=1.0, help="the agent's (0: greedy)")
    args = parser.parse_args()

    from sweet_rl.agents.hf_agent import HFAgent
    from sweet_rl.data.tasks import load_tasks
    from sweet_rl.environments import make_env
    from sweet_rl.models.openai_compat import ChatClient
    from sweet_rl.models.tiny_model import ensure_tiny_model
    from sweet_rl.prompts import load_prompt
    from sweet_rl.rollouts.lockstep import run_dialogues
    from sweet_rl.rollouts.pipeline import run_pipelined
    from sweet_rl.seeding import row_seed
    from sweet_rl.simulators.openai_simulator import OpenAISimulator

    server = latency_server(args.median_latency, args.sigma)
    base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    tasks = load_tasks(None, None)
    rng = random.Random(0)
    rows = [(tasks[i % len(tasks)], rng.randint(1, 10)) for i in range(args.dialogues)]
    agent_prompt, user_prompt = load_prompt(None, "agent"), load_prompt(None, "user")
    seeds = [row_seed(0, i) for i in range(len(rows))]
    agent = HFAgent(ensure_tiny_model(), max_new_tokens=args.max_new_tokens,
                    device=args.device, batch_size=args.batch_size, temperature=args.temperature)
    print(f"{len(rows)} dialogues of 1-10 turns (mean {sum(n for _, n in rows) / len(rows):.1f})"
          f", simulator latency lognormal median {args.median_latency} s sigma {args.sigma}, "
          f"{args.concurrency} simulator requests at once, agent {args.max_new_tokens} new "
          f"tokens x batch {args.batch_size} at temperature {args.temperature} on {args.device}")
    results = {}
    for mode in ("lockstep", "pipelined"):
        simulator = OpenAISimulator("sim", client=ChatClient(base_url, "sim",
                                                             max_workers=args.concurrency))
        envs = [make_env("code", task, agent_prompt, user_prompt, max_steps=steps)
                for task, steps in rows]
        started = time.perf_counter()
        if mode == "lockstep":
            trajectories = run_dialogues(envs, agent, simulator, row_seeds=seeds)
        else:
            finished = {}
            run_pipelined(envs, agent, simulator, seeds, finished.__setitem__,
                          agent_batch=args.batch_size, simulator_concurrency=args.concurrency)
            trajectories = [finished[i] for i in range(len(envs))]
        seconds = time.perf_counter() - started
        simulator.close()
        results[mode] = ([t.to_dict() for t in trajectories], seconds)
        print(f"{mode}: {len(rows) / seconds:.2f} dialogues/s ({seconds:.1f} s)")
    same = results["lockstep"][0] == results["pipelined"][0]
    differ = [i for i, (a, b) in enumerate(zip(*(results[m][0] for m in results))) if a != b]
    if differ:
        print(f"rows that differ: {differ[:10]} ({len(differ)} in all)")
    ratio = results["lockstep"][1] / results["pipelined"][1]
    print(f"pipelined / lockstep: {ratio:.2f}x; same trajectories: {same}")
    server.shutdown()


if __name__ == "__main__":
    main()
