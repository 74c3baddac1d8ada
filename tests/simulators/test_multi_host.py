"""Several simulator servers behind one simulator: --hostname parsing, stickiness, failover."""

import contextlib
import logging
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from sweet_rl.stages.factory import build_simulator
from sweet_rl.stages.simulate_options import SimulatorOptions
from sweet_rl.models.openai_compat import EndpointUnavailable
from sweet_rl.simulators.base import SimulatorReply
from sweet_rl.simulators.multi_host import MultiHostSimulator, parse_hosts
from sweet_rl.simulators.openai_simulator import OpenAISimulator
from sweet_rl.simulators.scripted_simulator import ScriptedSimulator
from tests.serve_helpers import free_port
from tests.simulators.fake_openai_server import FakeOpenAIServer, Step

# One retry with tiny pauses: a dead server is given up on within a fraction of a second.
FAST = dict(backoff=0.01, max_backoff=0.05, max_retries=1, timeout=5)
LOGGER = "sweet_rl.simulators.multi_host"


def turn(keys, step):
    return [[{"role": "user", "content": f"k{key} t{step}"}] for key in keys]


def echoes(keys, step):
    return [SimulatorReply(f"echo: k{key} t{step}") for key in keys]


def keys_seen(server):
    return {body["messages"][-1]["content"].split()[0] for body in server.requests}


def dead_url():
    return f"http://127.0.0.1:{free_port()}/v1"


def out_of_rotation(caplog, url):
    return [r for r in caplog.records if r.name == LOGGER and url in r.getMessage()]


# ----- parsing --------------------------------------------------------------------------------


def test_parse_hosts_accepts_one_host_commas_lists_and_tuples():
    assert parse_hosts("node1", 8000) == ["http://node1:8000/v1"]
    assert parse_hosts(" node1 , node2:8001,http://node3:9000/v1/", 8000) == [
        "http://node1:8000/v1", "http://node2:8001/v1", "http://node3:9000/v1"]
    assert parse_hosts(("node1", "node2"), 8000) == parse_hosts(["node1", "node2"], 8000)
    assert parse_hosts(("node1", "node2"), 8000) == ["http://node1:8000/v1",
                                                     "http://node2:8000/v1"]
    assert parse_hosts("[::1]:8001,[fe80::2],10.0.0.5", 7000) == [
        "http://[::1]:8001/v1", "http://[fe80::2]:7000/v1", "http://10.0.0.5:7000/v1"]
    assert parse_hosts("node1") == ["http://node1/v1"]  # no port anywhere: the URL has none


def test_parse_hosts_reads_a_file_with_comments(tmp_path):
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("# the simulator nodes\n\nnode1\n  node2:8001   # the big one\n"
                     "https://node3.example/v1\n")
    expected = ["http://node1:8000/v1", "http://node2:8001/v1", "https://node3.example/v1"]
    assert parse_hosts(f"@{hosts}", 8000) == expected
    assert parse_hosts(str(hosts), 8000) == expected
    assert parse_hosts(("node0", f"@{hosts}"), 8000) == ["http://node0:8000/v1"] + expected


@pytest.mark.parametrize("hostname, message", [
    ("node1,node2:abc", r"'node2:abc'.*port"),
    ("node1,node2:70000", r"'node2:70000'.*port"),
    ("node1,,node2", "empty simulator host"),
    ("ftp://node1/v1", r"'ftp://node1/v1'.*http"),
    ("http://:8000/v1", "names no host"),
    ("node one", "'node one'"),
    ("::1", "'::1'"),
    ("node1,node1:8000", "listed twice"),
    ("@/no/such/hosts.txt", "'/no/such/hosts.txt' is not a file"),
])
def test_parse_hosts_names_the_bad_entry(hostname, message):
    with pytest.raises(ValueError, match=message):
        parse_hosts(hostname, 8000)


def test_parse_hosts_names_the_file_and_line(tmp_path):
    hosts = tmp_path / "hosts.txt"
    hosts.write_text("node1\n# fine so far\nnode2:80x1\n")
    with pytest.raises(ValueError, match=rf"{hosts}, line 3: .*'node2:80x1'"):
        parse_hosts(f"@{hosts}", 8000)
    hosts.write_text("# nobody\n\n")
    with pytest.raises(ValueError, match="names no host"):
        parse_hosts(f"@{hosts}", 8000)


# ----- routing --------------------------------------------------------------------------------


def test_a_dialogue_stays_on_its_server_and_both_servers_work():
    keys = list(range(6))
    with FakeOpenAIServer([Step(200)]) as a, FakeOpenAIServer([Step(200)]) as b:
        simulator = MultiHostSimulator("fake", [a.base_url, b.base_url], **FAST)
        for step in range(3):
            # dialogues end at different times: the later turns carry fewer of them
            alive = keys[:6 - step]
            assert simulator.reply_batch(turn(alive, step), keys=alive) == echoes(alive, step)
        simulator.close()
    assert keys_seen(a) and keys_seen(b) and not keys_seen(a) & keys_seen(b)
    assert len(keys_seen(a)) == len(keys_seen(b)) == 3  # new dialogues fill the emptier one
    assert all(body["temperature"] == 0.0 and body["max_tokens"] == 512
               for body in a.requests + b.requests)


def test_without_keys_requests_go_round_robin_in_order():
    with FakeOpenAIServer([Step(200)]) as a, FakeOpenAIServer([Step(200)]) as b:
        simulator = MultiHostSimulator("fake", [a.base_url, b.base_url], max_tokens=7, **FAST)
        assert simulator.reply_batch(turn(range(5), 0)) == echoes(range(5), 0)
        assert simulator.reply_batch(turn(range(3), 1)) == echoes(range(3), 1)
        simulator.close()
    assert (a.attempts, b.attempts) == (4, 4)
    assert a.requests[0]["max_tokens"] == 7


def test_servers_answer_their_shares_concurrently():
    with FakeOpenAIServer([Step(200, delay=0.4)]) as a, \
            FakeOpenAIServer([Step(200, delay=0.4)]) as b:
        simulator = MultiHostSimulator("fake", [a.base_url, b.base_url], **FAST)
        start = time.monotonic()
        assert simulator.reply_batch(turn(range(4), 0), keys=range(4)) == echoes(range(4), 0)
        elapsed = time.monotonic() - start
        simulator.close()
    assert (a.attempts, b.attempts) == (2, 2) and elapsed < 0.75


def test_concurrent_callers_spread_by_load_and_run_side_by_side():
    # The pipelined rollout calls reply_batch with one conversation from many threads.
    with FakeOpenAIServer([Step(200, delay=0.3)]) as a, \
            FakeOpenAIServer([Step(200, delay=0.3)]) as b:
        simulator = MultiHostSimulator("fake", [a.base_url, b.base_url], **FAST)
        start = time.monotonic()
        with ThreadPoolExecutor(8) as pool:
            replies = list(pool.map(lambda k: simulator.reply_batch(turn([k], 0), keys=[k]),
                                    range(8)))
        elapsed = time.monotonic() - start
        simulator.close()
    assert replies == [echoes([k], 0) for k in range(8)]
    assert (a.attempts, b.attempts) == (4, 4) and elapsed < 1.0


# ----- failures -------------------------------------------------------------------------------


def test_a_server_that_crashes_mid_run_hands_its_dialogues_over(caplog):
    keys = list(range(4))
    # a answers the first turn, then hangs up on everything: its turn-2 requests are pending
    crash = [Step(200), Step(200), Step(hang_up=True)]
    with FakeOpenAIServer(crash) as a, FakeOpenAIServer([Step(200)]) as b, \
            caplog.at_level(logging.WARNING):
        simulator = MultiHostSimulator("fake", [a.base_url, b.base_url], **FAST)
        for step in range(3):
            assert simulator.reply_batch(turn(keys, step), keys=keys) == echoes(keys, step)
        assert simulator.live_urls == [b.base_url]
        simulator.close()
    assert len(out_of_rotation(caplog, a.base_url)) == 1
    moved = keys_seen(a)
    assert len(moved) == 2 and moved <= keys_seen(b)
    assert b.attempts == 2 + 4 + 4  # its own two, then all four dialogues on turns 2 and 3


def test_a_server_stopped_between_turns_is_replaced(caplog):
    stack = contextlib.ExitStack()
    a = stack.enter_context(FakeOpenAIServer([Step(200)]))
    with stack, FakeOpenAIServer([Step(200)]) as b, caplog.at_level(logging.WARNING):
        simulator = MultiHostSimulator("fake", [a.base_url, b.base_url], **FAST)
        assert simulator.reply_batch(turn([0, 1], 0), keys=[0, 1]) == echoes([0, 1], 0)
        stack.close()  # a goes away: connections are refused from now on
        for step in (1, 2):
            assert simulator.reply_batch(turn([0, 1], step), keys=[0, 1]) == echoes([0, 1], step)
        simulator.close()
    assert len(out_of_rotation(caplog, a.base_url)) == 1
    assert a.attempts == 1 and b.attempts == 5


def test_a_dead_port_is_skipped_at_start_or_on_first_use(caplog):
    gone = dead_url()
    with FakeOpenAIServer([Step(200)]) as b, caplog.at_level(logging.WARNING):
        checked = MultiHostSimulator("fake", [gone, b.base_url], **FAST)
        assert checked.live_urls == [b.base_url] and checked.base_urls == [gone, b.base_url]
        unchecked = MultiHostSimulator("fake", [gone, b.base_url], check=False, **FAST)
        assert unchecked.reply_batch(turn(range(3), 0)) == echoes(range(3), 0)
        assert unchecked.live_urls == [b.base_url]
        checked.close()
        unchecked.close()
    assert len(out_of_rotation(caplog, gone)) == 2  # once per simulator


def test_no_server_left_names_every_url():
    urls = [dead_url(), dead_url()]
    with pytest.raises(EndpointUnavailable) as info:
        MultiHostSimulator("fake", urls, **FAST)
    assert all(url in str(info.value) for url in urls)
    simulator = MultiHostSimulator("fake", urls, check=False, **FAST)
    with pytest.raises(EndpointUnavailable) as info:
        simulator.reply_batch(turn(range(4), 0), keys=range(4))
    assert all(url in str(info.value) for url in urls)
    simulator.close()


def test_a_rejected_request_is_the_reply_error_and_the_server_stays(caplog):
    too_long = Step(400, body={"error": {"message": "maximum context length exceeded"}})
    with FakeOpenAIServer([too_long, Step(200)]) as a, FakeOpenAIServer([Step(200)]) as b, \
            caplog.at_level(logging.WARNING):
        simulator = MultiHostSimulator("fake", [a.base_url, b.base_url], **FAST)
        first, second = simulator.reply_batch(turn([0, 1], 0), keys=[0, 1])
        assert first.text is None and "400" in first.error and "context length" in first.error
        assert second == SimulatorReply("echo: k1 t0")
        assert simulator.live_urls == [a.base_url, b.base_url]
        assert simulator.reply_batch(turn([0], 1), keys=[0]) == echoes([0], 1)
        simulator.close()
    assert a.attempts == 2 and keys_seen(a) == {"k0"}  # no retry, and key 0 stayed on a
    assert not out_of_rotation(caplog, a.base_url)


def test_a_server_failing_every_request_with_5xx_is_taken_out(caplog):
    with FakeOpenAIServer([Step(500)]) as a, FakeOpenAIServer([Step(200)]) as b, \
            caplog.at_level(logging.WARNING):
        simulator = MultiHostSimulator("fake", [a.base_url, b.base_url], **FAST)
        assert simulator.reply_batch(turn([0, 1], 0), keys=[0, 1]) == echoes([0, 1], 0)
        assert simulator.live_urls == [b.base_url]
        simulator.close()
    assert "HTTP 500" in out_of_rotation(caplog, a.base_url)[0].getMessage()


def test_a_request_that_gets_5xx_everywhere_only_ends_its_dialogue():
    # The request, not the servers, is the problem: it empties a, then fails on b too.
    with FakeOpenAIServer([Step(500)]) as a, \
            FakeOpenAIServer([Step(500), Step(500), Step(200)]) as b:
        simulator = MultiHostSimulator("fake", [a.base_url, b.base_url], **FAST)
        [reply] = simulator.reply_batch(turn([0], 0), keys=[0])
        assert reply.text is None and "HTTP 500" in reply.error
        assert simulator.live_urls == [b.base_url]
        assert simulator.reply_batch(turn([1], 0), keys=[1]) == echoes([1], 0)
        simulator.close()


# ----- the factory and the other simulators ---------------------------------------------------


def test_factory_builds_one_or_several_servers_and_every_simulator_takes_keys():
    with FakeOpenAIServer([Step(200)]) as a, FakeOpenAIServer([Step(200)]) as b:
        single = build_simulator(SimulatorOptions(hostname=a.base_url, env_model="fake",
                                                  simulator_max_tokens=5))
        several = build_simulator(SimulatorOptions(hostname=f"{a.base_url},{b.base_url}",
                                                   env_model="fake", simulator_max_tokens=5))
        assert isinstance(single, OpenAISimulator) and single.base_url == a.base_url
        assert isinstance(several, MultiHostSimulator)
        assert several.base_urls == [a.base_url, b.base_url] and several.max_tokens == 5
        assert single.reply_batch(turn([3], 0), keys=[3]) == echoes([3], 0)
        single.close()
        several.close()
    with pytest.raises(ValueError, match="--env_model is required"):
        build_simulator(SimulatorOptions(hostname="node1,node2"))
    assert len(ScriptedSimulator().reply_batch(turn([0], 0), keys=[0])) == 1
