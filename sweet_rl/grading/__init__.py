"""Grading backend answers: the code cut from an answer, the rules, and the grader that runs
answers and references in the sandbox (:mod:`sweet_rl.grading.sandbox`)."""
