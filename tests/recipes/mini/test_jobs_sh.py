"""scripts/jobs.sh, the miniature recipes' scheduler: at most JOBS stage commands at once, each
with THREADS torch threads, and a failure in any background step fails the recipe, naming the
step and showing its log."""

from __future__ import annotations

import os
import subprocess
import sys

from tests.conftest import REPO_ROOT


def _run(script: str, tmp_path, **env):
    full = dict(os.environ, PYTHON=sys.executable, OUT=str(tmp_path), **env)
    return subprocess.run(["bash", "-c", "set -euo pipefail\nsource scripts/jobs.sh\n" + script],
                          cwd=REPO_ROOT,
                          env=full, capture_output=True, text=True, timeout=120)


# a stage stand-in: notes when it starts and ends (monotonic clock), sleeping in between
STAGE = ("import os, sys, time; out = sys.argv[1]; open(out, 'w').write(str(time.monotonic()) "
         "+ ' '); time.sleep(0.6); open(out, 'a').write(str(time.monotonic()) + ' ' "
         "+ os.environ['OMP_NUM_THREADS'])")


def _intervals(folder):
    spans = []
    for name in sorted(os.listdir(folder)):
        start, end, threads = open(os.path.join(folder, name)).read().split()
        spans.append((float(start), float(end), threads))
    return spans


def _most_at_once(spans):
    return max(sum(1 for s, e, _ in spans if s <= t < e) for t, _, _ in spans)


def _run_stages(tmp_path, count, **env):
    """``count`` stand-in stages started at once through jobs.sh; their (start, end, threads)."""
    marks = tmp_path / "marks"
    marks.mkdir()
    script = (f'stage() {{ py -c "{STAGE}" "$1"; }}\njobs_init\npids=()\n'
              f'for i in $(seq {count}); do start "s$i" stage {marks}/$i; '
              'pids+=("$STARTED_PID"); done\nfinish "${pids[@]}"\n')
    result = _run(script, tmp_path, **env)
    assert result.returncode == 0, result.stderr
    return result, _intervals(marks)


def test_at_most_jobs_stages_run_at_once_each_with_its_threads(tmp_path):
    result, spans = _run_stages(tmp_path, 6, JOBS="2", THREADS="3")
    assert len(spans) == 6
    assert _most_at_once(spans) == 2  # six stages, two slots: never three, and the slots used
    assert {threads for _, _, threads in spans} == {"3"}
    for i in range(1, 7):
        assert f"start s{i} (log: {tmp_path}/logs/s{i}.log)" in result.stdout
        assert f"done  s{i}" in result.stdout


def test_one_job_runs_the_stages_one_after_another(tmp_path):
    _, spans = _run_stages(tmp_path, 2, JOBS="1")
    assert _most_at_once(spans) == 1


def test_a_failed_step_fails_the_recipe_after_the_others_end_and_shows_its_log(tmp_path):
    script = ('ok() { py -c "print(\'fine\')"; }\n'
              'bad() { echo "about to fail"; py -c "import sys; sys.exit(\'the stage broke\')"; '
              'echo "never reached"; }\n'
              'jobs_init\nstart good ok; p1=$STARTED_PID\nstart broken bad; p2=$STARTED_PID\n'
              'finish "$p1" "$p2" || { echo "recipe saw the failure"; exit 3; }\n')
    result = _run(script, tmp_path)
    assert result.returncode == 3
    assert "done  good" in result.stdout and "recipe saw the failure" in result.stdout
    assert "---- broken failed; the end of" in result.stderr
    assert "the stage broke" in result.stderr and "never reached" not in result.stderr
    # the slot of the failed stage was given back: a later stage still runs with one slot
    again = _run('jobs_init\npy -c "import sys; sys.exit(1)" || true\npy -c "print(7)"\n',
                 tmp_path, JOBS="1")
    assert again.returncode == 0 and again.stdout.strip() == "7"


def test_bad_settings_are_refused(tmp_path):
    for name, value in (("JOBS", "0"), ("JOBS", "two"), ("THREADS", "-1")):
        result = _run("jobs_init\n", tmp_path, **{name: value})
        assert result.returncode == 2 and f"{name} must be a positive number" in result.stderr


def test_device_sets_the_stages_flag_and_is_checked_before_any_work(tmp_path):
    show = 'device_init\necho "flag=[$DEVICE_FLAG] visible=[${CUDA_VISIBLE_DEVICES-unset}]"\n'
    assert _run(show, tmp_path, DEVICE="").stdout.startswith("flag=[] visible=[")
    # cpu: the flag for the stages, and no GPU for the trainings, which take one by themselves
    assert _run(show, tmp_path, DEVICE="cpu").stdout.strip() == "flag=[--device cpu] visible=[]"
    bad = _run(show, tmp_path, DEVICE="gpu")
    assert bad.returncode == 2 and "DEVICE must be cpu or cuda" in bad.stderr
    # the recipe refuses it before its output folder exists
    out = tmp_path / "mini"
    refused = subprocess.run(["bash", "scripts/run_mini_quick.sh"], capture_output=True,
                             text=True, timeout=60, env=dict(os.environ, OUT=str(out),
                                                             DEVICE="gpu"),
                             cwd=REPO_ROOT)
    assert refused.returncode == 2 and not out.exists()
