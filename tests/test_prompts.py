from sweet_rl.prompts import fill_template, load_prompt, template_fields


def test_bundled_prompts_keep_the_protocol_strings():
    agent = load_prompt(None, "agent")
    assert "OUTPUT:" in agent and "I WANT TO ANSWER:" in agent and "10 rounds" in agent
    single = load_prompt(None, "agent", single_turn=True)
    assert "I WANT TO ANSWER:" in single and "cannot ask" in single
    user = load_prompt(None, "user")
    assert template_fields(user) == {"problem_description", "hidden_information", "dialogue_history"}
    assert "two sentences" in user and "don't know" in user


def test_fill_leaves_other_braces_alone():
    text = fill_template("code {x: 1} for {problem_description}; {unknown}", {"problem_description": "P"})
    assert text == "code {x: 1} for P; {unknown}"


def test_a_user_prompt_file_replaces_the_default(tmp_path):
    path = tmp_path / "mine.txt"
    path.write_text("Task: {problem_description}")
    assert load_prompt(str(path), "agent") == "Task: {problem_description}"
