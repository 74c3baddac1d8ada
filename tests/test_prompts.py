import pytest

from sweet_rl.prompts import fill_template, load_prompt, template_fields


def test_bundled_prompts_keep_the_protocol_strings():
    # Agent prompts are system messages used verbatim: they need no placeholder.
    agent = load_prompt(None, "agent")
    assert "OUTPUT:" in agent and "I WANT TO ANSWER:" in agent and "10 rounds" in agent
    assert template_fields(agent) == set()
    single = load_prompt(None, "agent", single_turn=True)
    assert "I WANT TO ANSWER:" in single and "cannot ask" in single
    assert template_fields(single) == set()
    user = load_prompt(None, "user")
    assert template_fields(user) == {
        "problem_description",
        "hidden_information",
        "dialogue_history",
    }
    assert "two sentences" in user and "don't know" in user


def test_fill_leaves_other_braces_alone():
    text = fill_template(
        "code {x: 1} for {problem_description}; {unknown}", {"problem_description": "P"}
    )
    assert text == "code {x: 1} for P; {unknown}"


def test_a_user_prompt_file_replaces_the_default(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("Task: {problem_description}")
    assert load_prompt(str(path), "agent") == "Task: {problem_description}"


def test_bundled_html_prompts_keep_the_protocol_strings():
    agent = load_prompt(None, "agent", "html")
    assert "OUTPUT:" in agent and "I WANT TO ANSWER:" in agent and "10 rounds" in agent
    assert "<html>" in agent and "Tailwind" in agent and "at most one page" in agent
    assert template_fields(agent) == set()
    single = load_prompt(None, "agent", "html", single_turn=True)
    assert "I WANT TO ANSWER:" in single and "cannot ask" in single and "<html>" in single
    assert template_fields(single) == set()
    user = load_prompt(None, "user", "html")
    # As the original's, the frontend simulator prompt is sent as written: it sees the two
    # pictures, not the conversation, and the reference is an image, never the HTML.
    assert template_fields(user) == set()
    assert "Never write code" in user and "briefly" in user and "Compare" in user


def test_html_prompt_files_can_be_replaced(tmp_path):
    path = tmp_path / "designer.txt"
    path.write_text("Make {problem_description} pretty")
    assert load_prompt(str(path), "agent", "html") == "Make {problem_description} pretty"
    assert load_prompt("auto", "user", "html") == load_prompt(None, "user", "html")


def test_bundled_captions_are_ours_and_a_file_replaces_them(tmp_path):
    from sweet_rl.prompts.captions import PageCaptions, load_captions

    assert load_captions(None) == load_captions("auto") == PageCaptions(
        agent_page="The page the assistant showed you in its latest message:",
        no_page="The assistant did not show you a page in its latest message.",
        reference_page="The page you want (only you can see it):")
    path = tmp_path / "captions.json"
    path.write_text('{"agent_page": "Draft:\\n", "no_page": " none ", "reference_page": "Goal"}')
    assert load_captions(str(path)) == PageCaptions("Draft:\n", " none ", "Goal")


@pytest.mark.parametrize("text, message", [
    ('{"agent_page": "a", "no_page": "b"}', "field 'reference_page': missing"),
    ('{"agent_page": "a", "no_page": 2, "reference_page": "c"}',
     "field 'no_page': expected str, got int"),
    ('{"agent_page": "a", "no_page": "b", "reference_page": "c", "reference": "d"}',
     "field 'reference': unknown field"),
    ('["a", "b", "c"]', "expected a JSON object"),
    ('{\n"agent_page": "a",\n"no_page": "b"\n"reference_page": "c"}',
     "line 4: not valid JSON"),
])
def test_a_bad_captions_file_names_the_file_and_the_field(tmp_path, text, message):
    from sweet_rl.prompts.captions import load_captions

    path = tmp_path / "captions.json"
    path.write_text(text)
    with pytest.raises(ValueError) as caught:
        load_captions(str(path))
    assert str(caught.value).startswith(str(path)) and message in str(caught.value)
    with pytest.raises(FileNotFoundError, match="captions file not found: .*nowhere.json"):
        load_captions(str(tmp_path / "nowhere.json"))


def test_simulate_refuses_a_bad_captions_file_before_writing(tmp_path):
    from sweet_rl.stages.simulate import simulate
    from sweet_rl.stages.simulate_options import SimulateOptions
    from sweet_rl.records import RecordError

    captions, out = tmp_path / "captions.json", tmp_path / "run.jsonl"
    captions.write_text('{"agent_page": "a", "no_page": "b"}')
    with pytest.raises(RecordError, match="captions.json: field 'reference_page': missing"):
        simulate(SimulateOptions(task_type="html", user_captions_path=str(captions),
                                 output_path=str(out)))
    assert list(tmp_path.iterdir()) == [captions]
