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
