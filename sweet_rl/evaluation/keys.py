"""The keys the evaluation stages write into a trajectory row beside ``reward``.

Backend rows (evaluate_code) record which grading rules gave the reward and why each hidden
test passed or not; frontend rows (evaluate_html) record the CLIP settings that gave it and
why a page could not be shot. Readers (the viewers, the tests, a later evaluation deciding
what to grade again) take the names from here.
"""

RULES_KEY = "grader_rules"  # which rules produced ``reward`` (benchmark or strict)
VERDICTS_KEY = "grader_tests"  # one word per test: why it passed or not
REFUSED_KEY = "grader_refused"  # result packets the answer forged (refused)
# per test, in the task's order: {"test", "passed", "expected", "got"}, texts cut to 200
# characters (sweet_rl.grading.test_report), so a reader sees what failed and how
TEST_RESULTS_KEY = "test_results"

SETTINGS_KEY = "clip_settings"  # what produced a frontend ``reward``: model|weights|crop
ERROR_KEY = "render_error"  # why the answer or the reference page has no screenshot
# Rows from the original code carry no settings key: it scored with ViT-B/32, OpenAI, centre.
ORIGINAL_SETTINGS = "ViT-B-32|openai|center"
