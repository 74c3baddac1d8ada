"""What simulate checks and says about a trajectory file: whether a resumed file holds this
run's rows, the metrics line, and whether too many dialogues ended in simulator errors."""

from __future__ import annotations

from typing import List

from sweet_rl.records import Task


def check_resumable(output_path: str, rows: List[Task], done: int) -> None:
    """The rows already written must be the same tasks in the same order."""
    from sweet_rl.io import iter_jsonl
    from sweet_rl.records import RecordError, Trajectory

    if done > len(rows):
        raise RecordError(f"has {done} rows but this run makes only {len(rows)}", path=output_path)
    for index, traj in enumerate(iter_jsonl(output_path, Trajectory.from_dict)):
        expected = rows[index].problem_description
        if traj.task.problem_description != expected:
            raise RecordError("field 'task.problem_description' differs from the task this row "
                              "should hold; was the file made with other --input_path, "
                              "--num_tasks or --best_of_n?", path=output_path, line=index + 1)


def check_error_share(path: str, most: float) -> None:
    """Refuse a run whose dialogues mostly ended in simulator errors: its rows would be graded
    0 and pass for a bad agent. A frontend reference page that did not render is the task's
    problem, not the server's: it is counted in the metrics line, not here."""
    from sweet_rl.io import iter_jsonl

    count = errors = 0
    first = None
    for row in iter_jsonl(path):
        count += 1
        problems = [problem for problem in [row.get("error")] + list(
            row.get("simulator_errors") or []) if str(problem).startswith("simulator")]
        errors += bool(problems)
        first = first or (problems[0] if problems else None)
    if count and errors / count > most:
        raise ValueError(f"{errors} of {count} dialogues in {path} ended with simulator errors "
                         f"(more than --max_error_share {most}); the first: {first}. Check "
                         "--hostname, --port and --env_model (the served model's name)")


def summarize(path: str) -> str:
    """One metrics line over the whole output file."""
    from sweet_rl.environments.leaks import format_leak_rate, leak_summary
    from sweet_rl.environments.protocol import ANSWER_MARKER, NO_ANSWER
    from sweet_rl.io import iter_jsonl
    from sweet_rl.records import Trajectory
    from sweet_rl.rendering.pictures import REFERENCE_KEY

    count = turns = answered = errors = pages = with_page = 0
    rows = []  # what the leak count needs of each row, not the row (inputs are long)
    for traj in iter_jsonl(path, Trajectory.from_dict):
        count += 1
        rows.append({"leaked_replies": traj.extra.get("leaked_replies"),
                     "dialogue_history": [{"role": turn.role} for turn in traj.dialogue_history]})
        agent_turns = traj.assistant_turns
        turns += len(agent_turns)
        answered += bool(agent_turns) and ANSWER_MARKER in agent_turns[-1].content
        errors += "error" in traj.extra or bool(traj.extra.get("simulator_errors"))
        if REFERENCE_KEY in traj.extra:  # frontend rows
            pages += 1
            with_page += traj.answer not in ("", NO_ANSWER)
    if count == 0:
        return "0 dialogues"
    line = (f"{count} dialogues, mean agent turns {turns / count:.2f}, "
            f"answered explicitly {100 * answered / count:.1f}%")
    if pages:  # errors there are the simulator's or a reference that did not render
        return line + (f", errors {errors}, "
                       f"answered with a page {100 * with_page / pages:.1f}%")
    leaks = leak_summary(rows)
    line += f", dialogues with simulator errors {errors}"
    return line + (f", {format_leak_rate(leaks)}" if leaks["dialogues"] else "")
